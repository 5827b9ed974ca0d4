//! How a native histogram records: its resolution, its bucket limit, its
//! zero bucket and its optional classic buckets.

use multiprom_format::native_buckets::{DEFAULT_ZERO_THRESHOLD, MAX_SCHEMA, MIN_SCHEMA};
use multiprom_format::native_file::MAX_NATIVE_BUCKETS;
use multiprom_format::NativeHistogramConfig;

use crate::error::NativeOptionsError;

/// Options of a [`NativeHistogram`](crate::NativeHistogram), built like
/// [`RegistryBuilder`](crate::RegistryBuilder):
/// `NativeHistogramOptions::default().schema(5).classic_buckets(&DEFAULT_BUCKETS)`.
///
/// The defaults are client_golang's: schema 3 (about 9% between bucket
/// boundaries), at most 160 buckets, a zero bucket of width
/// [`DEFAULT_ZERO_THRESHOLD`], and no classic buckets (native only).
#[derive(Debug, Clone, PartialEq)]
pub struct NativeHistogramOptions {
    schema: i8,
    max_buckets: u32,
    zero_threshold: f64,
    classic_buckets: Option<Vec<f64>>,
}

impl Default for NativeHistogramOptions {
    fn default() -> Self {
        NativeHistogramOptions {
            schema: 3,
            max_buckets: 160,
            zero_threshold: DEFAULT_ZERO_THRESHOLD,
            classic_buckets: None,
        }
    }
}

impl NativeHistogramOptions {
    /// The starting resolution, from -4 (coarsest) to 8: bucket boundaries
    /// are powers of `2^(2^-schema)`.
    #[must_use]
    pub fn schema(mut self, schema: i8) -> Self {
        self.schema = schema;
        self
    }

    /// The most buckets a series keeps (1 to 65,536); one more lowers its
    /// schema, as client_golang does, so memory and scrape size stay bounded.
    #[must_use]
    pub fn max_buckets(mut self, max_buckets: u32) -> Self {
        self.max_buckets = max_buckets;
        self
    }

    /// Observations with an absolute value at most this count in the zero
    /// bucket.
    #[must_use]
    pub fn zero_threshold(mut self, zero_threshold: f64) -> Self {
        self.zero_threshold = zero_threshold;
        self
    }

    /// Also keeps classic buckets with these upper bounds (ascending;
    /// `+Inf` appended if missing; the classic histogram's rules), for
    /// scrapers that read only the text formats. Without them the classic
    /// part is a single `+Inf` bucket and the sum.
    #[must_use]
    pub fn classic_buckets(mut self, buckets: &[f64]) -> Self {
        self.classic_buckets = Some(buckets.to_vec());
        self
    }

    /// The classic upper bounds given, `None` for a native-only histogram.
    pub(crate) fn classic(&self) -> Option<&[f64]> {
        self.classic_buckets.as_deref()
    }

    /// The writer's configuration, refused where the writer would
    /// otherwise quietly clamp (a registration should say what it gets).
    pub(crate) fn config(&self) -> Result<NativeHistogramConfig, NativeOptionsError> {
        if !(MIN_SCHEMA..=MAX_SCHEMA).contains(&self.schema) {
            return Err(NativeOptionsError::Schema);
        }
        if !(1..=MAX_NATIVE_BUCKETS).contains(&self.max_buckets) {
            return Err(NativeOptionsError::MaxBuckets);
        }
        if !(self.zero_threshold.is_finite() && self.zero_threshold >= 0.0) {
            return Err(NativeOptionsError::ZeroThreshold);
        }
        Ok(NativeHistogramConfig {
            schema: self.schema,
            zero_threshold: self.zero_threshold,
            max_buckets: self.max_buckets,
        })
    }
}
