//! Prometheus's exponential bucket layout for native histograms.
//!
//! A schema `s` (from -4 to 8) fixes the growth factor between bucket
//! boundaries, `2^(2^-s)`: schema 3 is `2^(1/8)`, about 9% per bucket.
//! Bucket `i` holds the absolute values in `(2^((i-1)·2^-s), 2^(i·2^-s)]`;
//! bucket 0's upper bound is 1. Positive and negative observations have
//! buckets of their own with the same indices; observations within the
//! zero threshold go to the zero bucket instead.
//!
//! The index of a value is found as client_golang finds it (from
//! `frexp`, with a table of boundaries for positive schemas), so an
//! observation lands in the same bucket as it would in a Go process; an
//! infinity lands one bucket past the largest finite value's.

use std::sync::OnceLock;

/// The finest schema Prometheus accepts (growth factor `2^(1/256)`).
pub const MAX_SCHEMA: i8 = 8;

/// The coarsest schema Prometheus accepts (growth factor `2^16`).
pub const MIN_SCHEMA: i8 = -4;

/// The zero threshold client_golang uses by default, `2^-128`: values
/// this close to zero count as zero.
pub const DEFAULT_ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// The bucket index of a positive absolute value `abs` (finite or
/// infinite) at `schema` (clamped to [`MIN_SCHEMA`]..=[`MAX_SCHEMA`]).
#[must_use]
pub fn bucket_index(abs: f64, schema: i8) -> i32 {
    let schema = schema.clamp(MIN_SCHEMA, MAX_SCHEMA);
    let (abs, past_largest) = if abs.is_infinite() {
        (f64::MAX, 1)
    } else {
        (abs, 0)
    };
    let (frac, exp) = frexp(abs);
    let index = if schema > 0 {
        let per_octave = 1i32 << schema;
        // The first boundary not below `frac`: boundaries are
        // 2^(j/2^schema - 1) for j in 0..2^schema, so j's bucket ends at it.
        let j = lower_bound(frac, schema);
        j + (exp - 1) * per_octave
    } else {
        let mut index = exp;
        if frac == 0.5 {
            index -= 1;
        }
        let shift = -i32::from(schema);
        let offset = (1 << shift) - 1;
        (index + offset) >> shift
    };
    index + past_largest
}

/// The index that bucket `index` falls into when the schema is lowered by
/// `by` steps (each step merges pairs of neighbouring buckets).
#[must_use]
pub fn reduce_index(index: i32, by: u32) -> i32 {
    if by == 0 {
        return index;
    }
    // In i64: indices read from a file may be anywhere in i32's range.
    (((i64::from(index) - 1) >> by.min(40)) + 1) as i32
}

/// The upper bound of bucket `index` at `schema` (its lower bound is the
/// upper bound of `index - 1`).
#[must_use]
pub fn bucket_upper_bound(index: i32, schema: i8) -> f64 {
    let schema = schema.clamp(MIN_SCHEMA, MAX_SCHEMA);
    // 2^(index / 2^schema), exact in the exponent for schema <= 0.
    if schema <= 0 {
        let exp = i64::from(index) << (-i32::from(schema));
        return pow2(exp as f64);
    }
    let per_octave = 1i32 << schema;
    let octave = index.div_euclid(per_octave);
    let j = index.rem_euclid(per_octave);
    // 2^octave · 2^(j / 2^schema): the fractional part from the same
    // table the index uses, so a value equal to a bound indexes into the
    // bucket the bound closes.
    let frac = boundary(j, schema) * 2.0;
    frac * pow2(f64::from(octave))
}

/// `2^exp`, saturating to 0 and infinity.
fn pow2(exp: f64) -> f64 {
    2f64.powf(exp)
}

/// The boundaries of each positive schema within one octave, in [0.5, 1):
/// `2^(j/2^schema - 1)` for `j` in `0..2^schema`. Computed once (510
/// numbers), so finding an index is a binary search, not a `powf` per step.
fn boundaries(schema: i8) -> &'static [f64] {
    static TABLES: OnceLock<Vec<Vec<f64>>> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        (1..=MAX_SCHEMA)
            .map(|schema| {
                let per_octave = 1i32 << schema;
                (0..per_octave)
                    .map(|j| 2f64.powf(f64::from(j) / f64::from(per_octave) - 1.0))
                    .collect()
            })
            .collect()
    });
    let at = usize::try_from(schema - 1).unwrap_or(0);
    tables.get(at).map_or(&[], Vec::as_slice)
}

/// `j`-th boundary of a positive schema, in [0.5, 1).
fn boundary(j: i32, schema: i8) -> f64 {
    let table = boundaries(schema);
    usize::try_from(j)
        .ok()
        .and_then(|j| table.get(j))
        .copied()
        .unwrap_or(1.0)
}

/// The smallest `j` in `0..2^schema` with `boundary(j) >= frac`, or
/// `2^schema` if none (never for `frac < 1`).
fn lower_bound(frac: f64, schema: i8) -> i32 {
    boundaries(schema).partition_point(|&b| b < frac) as i32
}

/// `frexp`: `abs = frac · 2^exp` with `frac` in [0.5, 1), for positive
/// finite `abs` (subnormals included).
fn frexp(abs: f64) -> (f64, i32) {
    if abs == 0.0 || !abs.is_finite() {
        return (abs, 0);
    }
    let bits = abs.to_bits();
    let raw_exp = ((bits >> 52) & 0x7ff) as i32;
    if raw_exp == 0 {
        // Subnormal: scale into the normal range first.
        let (frac, exp) = frexp(abs * pow2(64.0));
        return (frac, exp - 64);
    }
    let exp = raw_exp - 1022;
    let frac = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (frac, exp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_zero_ends_at_one_for_every_schema() {
        for schema in MIN_SCHEMA..=MAX_SCHEMA {
            assert_eq!(bucket_index(1.0, schema), 0, "schema {schema}");
            assert_eq!(bucket_upper_bound(0, schema), 1.0);
        }
    }

    #[test]
    fn values_land_between_their_bucket_bounds() {
        let values = [
            1e-300, 3e-9, 0.001, 0.0125, 0.1, 0.3, 0.5, 0.75, 1.0, 1.0001, 1.5, 2.0, 2.5, 7.0,
            123.456, 1e6, 1e300,
        ];
        for schema in MIN_SCHEMA..=MAX_SCHEMA {
            for v in values {
                let i = bucket_index(v, schema);
                let upper = bucket_upper_bound(i, schema);
                let lower = bucket_upper_bound(i - 1, schema);
                assert!(
                    lower < v && v <= upper * (1.0 + 1e-12),
                    "{v} at schema {schema}: bucket {i} is ({lower}, {upper}]"
                );
            }
        }
    }

    #[test]
    fn indices_as_client_golang_computes_them() {
        // Worked by hand from client_golang's rule.
        assert_eq!(bucket_index(2.0, 0), 1);
        assert_eq!(bucket_index(2.1, 0), 2);
        assert_eq!(bucket_index(0.5, 0), -1);
        assert_eq!(bucket_index(4.0, -1), 1);
        assert_eq!(bucket_index(4.1, -1), 2);
        assert_eq!(bucket_index(1.1, 3), 2);
        assert_eq!(bucket_index(2.0, 3), 8);
        assert_eq!(bucket_index(0.5, 3), -8);
        assert_eq!(
            bucket_index(f64::INFINITY, 0),
            bucket_index(f64::MAX, 0) + 1
        );
    }

    #[test]
    fn reducing_merges_the_buckets_a_coarser_schema_holds() {
        for schema in (MIN_SCHEMA + 1)..=MAX_SCHEMA {
            for v in [0.001, 0.3, 1.0, 1.7, 2.0, 3.3, 1000.0] {
                for by in 1..=(schema - MIN_SCHEMA) as u32 {
                    let coarse = schema - by as i8;
                    assert_eq!(
                        reduce_index(bucket_index(v, schema), by),
                        bucket_index(v, coarse),
                        "{v} from schema {schema} down {by}"
                    );
                }
            }
        }
    }
}
