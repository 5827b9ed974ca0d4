//! `floatToGoString` from `prometheus_client/utils.py`, and Python's
//! `repr(float)` it is built on.
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

/// Appends `floatToGoString(v)` to `out`, without allocating.
pub fn write_float_to_go_string(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0.0" } else { "0.0" });
    } else {
        let decimal = Decimal::shortest(v);
        // Go switches to exponents sooner than Python: positive values whose
        // repr has the dot after 7..=16 digits (1e6 <= v < 1e16). Python
        // joins the repr's digits around the dot and strips trailing zeros
        // (and a bare dot): the significant digits, as here.
        if v > 0.0 && (6..16).contains(&decimal.exp) {
            decimal.write_scientific(out, "+");
        } else {
            decimal.write_repr(out);
        }
    }
}

/// Appends Python's `repr(v)` (what `'{}'.format(v)` prints, e.g. an
/// exemplar's timestamp in `prometheus_client`'s OpenMetrics output): the
/// shortest digits that read back as `v`, positional when the decimal
/// exponent is from -4 to 15 (integral values end in `.0`), otherwise
/// `d.ddde+XX`; `inf`, `-inf`, `nan`.
///
/// ```
/// use multiprom_format::write_python_repr;
/// let mut out = String::new();
/// for v in [1732000000.25, 1e16, 1.5e-5, 3.0, f64::NEG_INFINITY] {
///     write_python_repr(&mut out, v);
///     out.push(' ');
/// }
/// assert_eq!(out, "1732000000.25 1e+16 1.5e-05 3.0 -inf ");
/// ```
pub fn write_python_repr(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("nan");
    } else if v == f64::INFINITY {
        out.push_str("inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-inf");
    } else if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0.0" } else { "0.0" });
    } else {
        Decimal::shortest(v).write_repr(out);
    }
}

/// A finite, non-zero float as its shortest round-trip decimal digits:
/// `d1.d2d3... x 10^exp`, without trailing zeros.
struct Decimal {
    negative: bool,
    /// ASCII digits; at most 17 are ever needed for an `f64`.
    digits: [u8; 20],
    len: usize,
    exp: i32,
}

/// 2^53: below it, every integer is a float and floats are at most 1 apart.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

impl Decimal {
    fn shortest(v: f64) -> Decimal {
        let mut decimal = Decimal {
            negative: v.is_sign_negative(),
            digits: [b'0'; 20],
            len: 0,
            exp: 0,
        };
        let magnitude = v.abs();
        if magnitude.fract() == 0.0 && magnitude < EXACT_INTEGERS {
            // Integer digits, most significant first.
            let mut n = magnitude as u64;
            let mut reversed = [0u8; 20];
            let mut count = 0;
            while n > 0 {
                reversed[count] = b'0' + (n % 10) as u8;
                n /= 10;
                count += 1;
            }
            for i in 0..count {
                decimal.digits[i] = reversed[count - 1 - i];
            }
            decimal.len = count;
            decimal.exp = count as i32 - 1;
        } else {
            let mut buffer = ryu::Buffer::new();
            decimal.parse_ryu(buffer.format_finite(magnitude));
        }
        while decimal.len > 1 && decimal.digits[decimal.len - 1] == b'0' {
            decimal.len -= 1;
        }
        decimal
    }

    /// Reads `ryu`'s output for a positive float: `123.45`, `1e16`,
    /// `1.5e-7`.
    fn parse_ryu(&mut self, text: &str) {
        let (mantissa, exp10) = match text.split_once('e') {
            Some((mantissa, exp)) => (mantissa, exp.parse::<i32>().unwrap_or(0)),
            None => (text, 0),
        };
        let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        // Where the decimal point falls, counted in digits from the first.
        let mut point = int_part.len() as i32 + exp10;
        let mut leading = true;
        for &b in int_part.as_bytes().iter().chain(frac_part.as_bytes()) {
            if leading && b == b'0' {
                point -= 1;
                continue;
            }
            leading = false;
            if self.len < self.digits.len() {
                self.digits[self.len] = b;
                self.len += 1;
            }
        }
        if self.len == 0 {
            self.digits[0] = b'0';
            self.len = 1;
        }
        self.exp = point - 1;
    }

    fn digits(&self) -> &str {
        // Only ASCII digits are ever stored.
        std::str::from_utf8(&self.digits[..self.len]).unwrap_or("0")
    }

    /// `d1.d2...e<sign>XX`, or `d1e<sign>XX` for one digit; `plus` is the
    /// sign written for a positive exponent.
    fn write_scientific(&self, out: &mut String, plus: &str) {
        if self.negative {
            out.push('-');
        }
        let digits = self.digits();
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push_str(if self.exp < 0 { "-" } else { plus });
        let exp = self.exp.unsigned_abs();
        if exp < 10 {
            out.push('0');
        }
        let _ = write!(out, "{exp}");
    }

    /// Python's `repr`: positional when `-4 <= exp < 16`, else scientific.
    fn write_repr(&self, out: &mut String) {
        if !(-4..16).contains(&self.exp) {
            self.write_scientific(out, "+");
            return;
        }
        if self.negative {
            out.push('-');
        }
        let digits = self.digits();
        if self.exp < 0 {
            out.push_str("0.");
            for _ in 0..(-self.exp - 1) {
                out.push('0');
            }
            out.push_str(digits);
        } else {
            let int_len = self.exp as usize + 1;
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
