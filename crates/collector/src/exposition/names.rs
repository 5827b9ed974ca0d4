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

// The checks below run on every sample's name and label names, so they go by
// bytes through a table rather than decoding characters: every valid rune is
// ASCII, and no byte of a multi-byte character is, so a name is valid by
// bytes exactly when it is valid by characters.

/// `[a-zA-Z_]`
const LETTER: u8 = 1;
/// `[0-9]`
const DIGIT: u8 = 2;
/// `:`
const COLON: u8 = 4;

/// The class of each byte: which of the rune sets above it is in.
static CLASS: [u8; 256] = {
    let mut class = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        class[b] = if c.is_ascii_alphabetic() || c == b'_' {
            LETTER
        } else if c.is_ascii_digit() {
            DIGIT
        } else if c == b':' {
            COLON
        } else {
            0
        };
        b += 1;
    }
    class
};

/// Whether `s` is not empty, its first byte is in one of the classes
/// `first` and every other byte in one of `rest`.
fn is_valid_name(s: &str, first: u8, rest: u8) -> bool {
    match s.as_bytes().split_first() {
        Some((&head, tail)) => {
            CLASS[usize::from(head)] & first != 0
                && tail.iter().all(|&b| CLASS[usize::from(b)] & rest != 0)
        }
        None => false,
    }
}

/// `METRIC_NAME_RE`: `^[a-zA-Z_:][a-zA-Z0-9_:]*$`.
fn is_legacy_metric_name(s: &str) -> bool {
    is_valid_name(s, LETTER | COLON, LETTER | DIGIT | COLON)
}

/// `^[a-zA-Z_][a-zA-Z0-9_]*$`: every rune a label rune.
fn is_label_runes(s: &str) -> bool {
    is_valid_name(s, LETTER, LETTER | DIGIT)
}

/// `_is_valid_legacy_labelname`: `^[a-zA-Z_][a-zA-Z0-9_]*$`, not `__...`.
fn is_legacy_label_name(s: &str) -> bool {
    !s.starts_with("__") && is_label_runes(s)
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
    if is_label_runes(s) {
        out.push_str(s);
    } else {
        push_underscored(out, s, is_label_rune);
    }
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
    let special = |b: u8| b == b'\\' || b == b'\n' || (quote && b == b'"');
    // Nearly every value has nothing to escape: one pass to find that out,
    // then one copy.
    let Some(first) = s.bytes().position(special) else {
        out.push_str(s);
        return;
    };
    let mut start = 0;
    for (i, b) in s.bytes().enumerate().skip(first) {
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
    use proptest::prelude::*;

    /// Python's definitions, character by character.
    fn by_chars(s: &str, valid: fn(char, usize) -> bool) -> bool {
        !s.is_empty() && s.chars().enumerate().all(|(i, c)| valid(c, i))
    }

    /// Python's `replace` chain, one character at a time.
    fn escaped_by_chars(s: &str, quote: bool) -> String {
        s.chars()
            .map(|c| match c {
                '\\' => "\\\\".to_string(),
                '\n' => "\\n".to_string(),
                '"' if quote => "\\\"".to_string(),
                c => c.to_string(),
            })
            .collect()
    }

    proptest! {
        // Names and values drawn from the runes that matter and a few
        // others, multi-byte ones among them.
        #[test]
        fn byte_checks_agree_with_the_character_definitions(
            s in "[a-zA-Z0-9_:\\\\\n\"\u{e9}\u{2603}\u{1f600} .-]{0,12}",
            quote in any::<bool>(),
        ) {
            prop_assert_eq!(is_legacy_metric_name(&s), by_chars(&s, is_metric_rune));
            prop_assert_eq!(is_label_runes(&s), by_chars(&s, is_label_rune));
            prop_assert_eq!(
                is_legacy_label_name(&s),
                !s.starts_with("__") && by_chars(&s, is_label_rune)
            );
            let mut out = String::from("x");
            push_escaped(&mut out, &s, quote);
            prop_assert_eq!(out, format!("x{}", escaped_by_chars(&s, quote)));
        }
    }

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
