//! Python's `float(str)`, for histogram bucket bounds (`le`).

/// Python's `float(str)`: surrounding whitespace allowed, `_` between digits,
/// `inf`/`infinity`/`nan` in any case with an optional sign.
///
/// One known difference: Python also accepts non-ASCII decimal digits
/// (`float('\u0661') == 1.0`); here they do not parse, so a histogram file
/// with such an `le` is reported as bad instead of merged. No writer makes
/// them (Python renders `le` with `floatToGoString`).
pub(crate) fn parse_python_float(s: &str) -> Option<f64> {
    let s = s.trim_matches(|c: char| c.is_whitespace());
    if s.contains('_') {
        let bytes = s.as_bytes();
        let ok = bytes.iter().enumerate().all(|(i, &b)| {
            b != b'_'
                || (i > 0
                    && i + 1 < bytes.len()
                    && bytes[i - 1].is_ascii_digit()
                    && bytes[i + 1].is_ascii_digit())
        });
        if !ok {
            return None;
        }
        return s.replace('_', "").parse().ok();
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::parse_python_float;

    #[test]
    fn floats_parse_like_python() {
        assert_eq!(parse_python_float("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_python_float("-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_python_float(" 1_000.5 "), Some(1000.5));
        assert_eq!(parse_python_float("1e3"), Some(1000.0));
        assert_eq!(parse_python_float("1__0"), None);
        assert_eq!(parse_python_float("_1"), None);
        assert_eq!(parse_python_float("abc"), None);
        assert!(parse_python_float("nan").is_some_and(f64::is_nan));
    }
}
