//! `floatToGoString` from `prometheus_client/utils.py`.
//!
//! Python prints `repr(float)` (the shortest string that round-trips), except
//! that positive numbers with 7 to 16 integer digits switch to Go's exponent
//! form, and infinities/NaN print as `+Inf`, `-Inf`, `NaN`.

use std::fmt::Write as _;

/// Formats `v` exactly as Python's `prometheus_client.utils.floatToGoString`.
///
/// ```
/// use multiprom_format::float_to_go_string;
/// assert_eq!(float_to_go_string(1.0), "1.0");
/// assert_eq!(float_to_go_string(0.1), "0.1");
/// assert_eq!(float_to_go_string(1e-5), "1e-05");
/// assert_eq!(float_to_go_string(1e16), "1e+16");
/// assert_eq!(float_to_go_string(1234567.0), "1.234567e+06");
/// assert_eq!(float_to_go_string(-1234567.0), "-1234567.0");
/// assert_eq!(float_to_go_string(f64::INFINITY), "+Inf");
/// assert_eq!(float_to_go_string(f64::NAN), "NaN");
/// ```
#[must_use]
pub fn float_to_go_string(v: f64) -> String {
    let mut out = String::with_capacity(24);
    write_float_to_go_string(&mut out, v);
    out
}

/// Appends `floatToGoString(v)` to `out`.
pub fn write_float_to_go_string(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let start = out.len();
        write_python_repr(out, v);
        let repr = &out[start..];
        // Go switches to exponents sooner than Python: positive values whose
        // repr has the dot after 7..=16 digits (1e6 <= v < 1e16).
        if v > 0.0 {
            if let Some(dot) = repr.find('.').filter(|&d| d > 6) {
                let mut mantissa = String::with_capacity(repr.len());
                mantissa.push_str(&repr[..1]);
                mantissa.push('.');
                mantissa.push_str(&repr[1..dot]);
                mantissa.push_str(&repr[dot + 1..]);
                let trimmed = mantissa.trim_end_matches(['0', '.']);
                let go = format!("{trimmed}e+{:02}", dot - 1);
                out.truncate(start);
                out.push_str(&go);
            }
        }
    }
}

/// Appends Python's `repr(v)` for a finite `v`.
///
/// Python uses the shortest digit string that round-trips (David Gay's dtoa,
/// mode 0), ties between two equally short candidates going to the one nearer
/// the exact binary value, exact halfway cases to even. Rust's `{:e}` finds
/// the shortest length, but may pick the other candidate on exact ties, so the
/// digits are re-derived at that length with `{:.N$e}`, which rounds the exact
/// value half-to-even.
pub fn write_python_repr(out: &mut String, v: f64) {
    debug_assert!(v.is_finite());
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    let shortest = format!("{v:e}");
    let (mantissa, _) = shortest.split_once('e').unwrap_or((&shortest, "0"));
    let digit_count = mantissa.bytes().filter(u8::is_ascii_digit).count();
    let exact = format!("{v:.prec$e}", prec = digit_count.saturating_sub(1));
    // Only trust the re-rounded string if it still round-trips; otherwise keep
    // the shortest one (never observed, but cheap insurance).
    let sci = match exact.parse::<f64>() {
        Ok(parsed) if parsed == v => exact,
        _ => shortest,
    };
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    if negative {
        out.push('-');
    }
    // repr switches to exponent notation when exp < -4 or exp >= 16.
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exp.unsigned_abs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_known_python_output() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-1.5, "-1.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (123456.0, "123456.0"),
            (1e6, "1e+06"),
            (1200000.5, "1.2000005e+06"),
            (1234567.0, "1.234567e+06"),
            (6e8, "6e+08"),
            (1e15, "1e+15"),
            (1234567890123456.8, "1.2345678901234568e+15"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e100, "1e+100"),
            (-1e100, "-1e+100"),
            (-1234567.0, "-1234567.0"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.1 + 0.2, "0.30000000000000004"),
            (9007199254740993.0, "9.007199254740992e+15"),
        ];
        for &(v, want) in cases {
            assert_eq!(float_to_go_string(v), want, "{v:e}");
        }
    }
}
