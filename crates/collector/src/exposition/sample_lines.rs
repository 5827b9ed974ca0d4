//! How an encoder writes a sample line: formatted afresh, or through a
//! [`super::LineCache`]. Its own module so that the encoders and the cache
//! each take it from here, and the cache takes the encoders, one way.

use crate::family::MergedSample;

/// How an encoder writes a sample line: formatted afresh, or through a
/// [`super::LineCache`].
pub(crate) trait SampleLines {
    /// Writes `sample`'s line to `out`; `format` writes it afresh.
    fn sample(&mut self, out: &mut String, sample: &MergedSample, format: impl FnOnce(&mut String));
}

/// Every line formatted afresh.
pub(crate) struct Fresh;

impl SampleLines for Fresh {
    #[inline]
    fn sample(&mut self, out: &mut String, _: &MergedSample, format: impl FnOnce(&mut String)) {
        format(out);
    }
}
