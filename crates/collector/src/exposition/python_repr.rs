//! Python's `repr(float)` (what `'{}'.format(x)` prints for a float): the
//! shortest digits that read back as the same float, positional when the
//! decimal exponent is from -4 to 15 (integral values end in `.0`),
//! otherwise `d.ddde+XX` with at least two exponent digits; `inf`, `-inf`,
//! `nan`.
//!
//! `prometheus_client` prints an exemplar's timestamp this way.

use std::fmt::Write as _;

/// Appends `repr(v)` to `out`.
pub(crate) fn write_python_repr(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("nan");
        return;
    }
    if v.is_sign_negative() {
        out.push('-');
    }
    let v = v.abs();
    if v.is_infinite() {
        out.push_str("inf");
        return;
    }
    if v == 0.0 {
        out.push_str("0.0");
        return;
    }
    let mut buffer = ryu::Buffer::new();
    let (digits, exp) = shortest_digits(buffer.format_finite(v));
    let digits = digits.as_str();
    if !(-4..16).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(
            out,
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        );
    } else if exp < 0 {
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
}

/// `ryu`'s shortest form of a positive finite float (`123.45`, `1e16`,
/// `1.5e-7`, `0.001`) as its significant digits, without leading or
/// trailing zeros, and the decimal exponent of the first: `d.ddd x 10^exp`.
fn shortest_digits(text: &str) -> (String, i32) {
    let (mantissa, exp10) = match text.split_once('e') {
        Some((mantissa, exp)) => (mantissa, exp.parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut point = int_part.len() as i32 + exp10;
    let mut digits = String::with_capacity(17);
    for c in int_part.chars().chain(frac_part.chars()) {
        if digits.is_empty() && c == '0' {
            point -= 1;
            continue;
        }
        digits.push(c);
    }
    let kept = digits.trim_end_matches('0').len().max(1);
    digits.truncate(kept);
    if digits.is_empty() {
        digits.push('0');
    }
    (digits, point - 1)
}

#[cfg(test)]
mod tests {
    use super::write_python_repr;

    fn repr(v: f64) -> String {
        let mut out = String::new();
        write_python_repr(&mut out, v);
        out
    }

    #[test]
    fn known_reprs() {
        for (v, text) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (1.5, "1.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1234567.0, "1234567.0"),
            (1_700_000_000.123_456_7, "1700000000.1234567"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (-123.25, "-123.25"),
        ] {
            assert_eq!(repr(v), text, "{v:e}");
        }
    }

    /// Python's own `repr` of floats of every kind (random bit patterns,
    /// Unix times, powers of ten and their neighbours), made by
    /// `tests/python/python_float_repr.py`.
    #[test]
    fn matches_python_repr_table() {
        let table = include_str!("python_repr_table.txt");
        let mut checked = 0;
        for line in table.lines() {
            let Some((bits, text)) = line.split_once(' ') else {
                continue;
            };
            let bits = u64::from_str_radix(bits, 16).expect("hex bits");
            assert_eq!(repr(f64::from_bits(bits)), text, "bits {bits:016x}");
            checked += 1;
        }
        assert!(checked > 1000, "{checked} lines");
    }
}
