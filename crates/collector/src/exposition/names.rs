//! Python's name escaping (`openmetrics/exposition.py`, `underscores` mode)
//! and value escaping.

use std::sync::Arc;

use multiprom_format::write_float_to_go_string;

/// `_is_legacy_labelname_rune`: letters, `_`, digits except first.
fn is_label_rune(c: char, i: usize) -> bool {
    c.is_ascii_alphabetic() || c == '_' || (c.is_ascii_digit() && i > 0)
}

/// `_is_legacy_metric_rune`: a label rune or `:`.
fn is_metric_rune(c: char, i: usize) -> bool {
    is_label_rune(c, i) || c == ':'
}

/// `METRIC_NAME_RE`: `^[a-zA-Z_:][a-zA-Z0-9_:]*$`.
fn is_legacy_metric_name(s: &str) -> bool {
    !s.is_empty() && s.chars().enumerate().all(|(i, c)| is_metric_rune(c, i))
}

/// `_is_valid_legacy_labelname`: `^[a-zA-Z_][a-zA-Z0-9_]*$`, not `__...`.
fn is_legacy_label_name(s: &str) -> bool {
    !s.is_empty() && !s.starts_with("__") && s.chars().enumerate().all(|(i, c)| is_label_rune(c, i))
}

/// `_escape(s, UNDERSCORES, rune_fn)`: every code point that is not a valid
/// rune at its position becomes `_`.
fn push_underscored(out: &mut String, s: &str, valid: fn(char, usize) -> bool) {
    for (i, c) in s.chars().enumerate() {
        out.push(if valid(c, i) { c } else { '_' });
    }
}

/// `escape_metric_name(s, UNDERSCORES)`.
pub(crate) fn push_metric_name(out: &mut String, s: &str) {
    if is_legacy_metric_name(s) || s.is_empty() {
        out.push_str(s);
    } else {
        push_underscored(out, s, is_metric_rune);
    }
}

/// `_escape(s, UNDERSCORES, _is_legacy_labelname_rune)`: what Python's
/// OpenMetrics encoder applies to sample names, so `:` becomes `_` there.
pub(crate) fn push_om_sample_name(out: &mut String, s: &str) {
    push_underscored(out, s, is_label_rune);
}

/// `escape_label_name(s, UNDERSCORES)`.
pub(crate) fn push_label_name(out: &mut String, s: &str) {
    if is_legacy_label_name(s) || s.is_empty() {
        out.push_str(s);
    } else {
        push_underscored(out, s, is_label_rune);
    }
}

/// Backslash, newline and (if `quote`) double quote, backslash-escaped.
pub(crate) fn push_escaped(out: &mut String, s: &str, quote: bool) {
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc = match b {
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'"' if quote => "\\\"",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        out.push_str(esc);
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// ` {labels} value\n` after a sample name: labels sorted as given, names
/// escaped, values backslash-escaped; the same in both formats.
pub(crate) fn push_labels_and_value(out: &mut String, labels: &[(Arc<str>, Arc<str>)], value: f64) {
    if !labels.is_empty() {
        out.push('{');
        for (i, (name, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_label_name(out, name);
            out.push_str("=\"");
            push_escaped(out, value, true);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    write_float_to_go_string(out, value);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: fn(&mut String, &str), s: &str) -> String {
        let mut out = String::new();
        f(&mut out, s);
        out
    }

    #[test]
    fn escapes_like_python() {
        assert_eq!(with(push_metric_name, "a:b_c1"), "a:b_c1");
        assert_eq!(with(push_metric_name, "1a.b\u{e9}"), "_a_b_");
        assert_eq!(with(push_om_sample_name, "a:b_total"), "a_b_total");
        assert_eq!(with(push_label_name, "__x"), "__x");
        assert_eq!(with(push_label_name, "a-b"), "a_b");
        assert_eq!(
            with(|o, s| push_escaped(o, s, true), "a\\b\n\"c"),
            "a\\\\b\\n\\\"c"
        );
        assert_eq!(with(|o, s| push_escaped(o, s, false), "a\"\n"), "a\"\\n");
    }
}
