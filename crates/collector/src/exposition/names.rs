//! Python's name escaping (`openmetrics/exposition.py`: the four schemes a
//! scraper may ask for) and value escaping.

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

/// How names that are not legacy Prometheus names are written: the
/// `escaping` parameter a scraper's `Accept` header gives (Prometheus 3
/// asks for `allow-utf-8`), each as `prometheus_client` 0.26 writes it.
/// Legacy names come out as they are in `underscores` and `allow-utf-8`
/// (but OpenMetrics sample names lose a `:` in `underscores`); `dots`
/// escapes every name, and `values` every OpenMetrics sample name, as
/// Python does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Escaping {
    /// `underscores`: every character a legacy name may not have there
    /// becomes `_` (OpenMetrics sample names by the label-name rules, so a
    /// `:` too). The scheme of a scraper that names none.
    #[default]
    Underscores,
    /// `allow-utf-8`: names as they are, a name that is not a legacy name
    /// quoted (and a sample's then inside the braces).
    AllowUtf8,
    /// `dots`: `.` becomes `_dot_`, `_` and other characters `__`.
    Dots,
    /// `values`: `U__`, then each character kept, `_` doubled, any other
    /// as `_<hex code point>_`.
    Values,
}

impl Escaping {
    /// The scheme an `escaping` parameter names; an unknown one is
    /// `underscores`, as `prometheus_client` takes it.
    ///
    /// ```
    /// use multiprom_collector::Escaping;
    /// assert_eq!(Escaping::from_param("allow-utf-8"), Escaping::AllowUtf8);
    /// assert_eq!(Escaping::from_param("utf8"), Escaping::Underscores);
    /// assert_eq!(Escaping::Dots.as_str(), "dots");
    /// ```
    #[must_use]
    pub fn from_param(value: &str) -> Self {
        match value {
            "allow-utf-8" => Escaping::AllowUtf8,
            "dots" => Escaping::Dots,
            "values" => Escaping::Values,
            _ => Escaping::Underscores,
        }
    }

    /// The scheme's name, as in an `escaping` parameter.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Escaping::Underscores => "underscores",
            Escaping::AllowUtf8 => "allow-utf-8",
            Escaping::Dots => "dots",
            Escaping::Values => "values",
        }
    }
}

/// `_escape(s, escaping, rune_fn)` of `s`, quoting aside: what each scheme
/// makes of each code point (valid runes judged at their position).
fn push_escaped_name(
    out: &mut String,
    s: &str,
    escaping: Escaping,
    valid: fn(char, usize) -> bool,
) {
    match escaping {
        Escaping::AllowUtf8 => push_escaped(out, s, true),
        Escaping::Underscores => {
            for (i, c) in s.chars().enumerate() {
                out.push(if valid(c, i) { c } else { '_' });
            }
        }
        Escaping::Dots => {
            for (i, c) in s.chars().enumerate() {
                match c {
                    '_' => out.push_str("__"),
                    '.' => out.push_str("_dot_"),
                    c if valid(c, i) => out.push(c),
                    _ => out.push_str("__"),
                }
            }
        }
        Escaping::Values => {
            out.push_str("U__");
            for (i, c) in s.chars().enumerate() {
                match c {
                    '_' => out.push_str("__"),
                    c if valid(c, i) => out.push(c),
                    // A `char` is never a surrogate (Python's `_FFFD_` case).
                    c => {
                        use std::fmt::Write;
                        let _ = write!(out, "_{:x}_", u32::from(c));
                    }
                }
            }
        }
    }
}

/// `escape_metric_name` / `escape_label_name(s, escaping)`: a legacy name
/// (`legacy`) as it is, but in `dots`; any other escaped, and quoted in
/// `allow-utf-8`; the empty name as it is.
fn push_name(
    out: &mut String,
    s: &str,
    escaping: Escaping,
    legacy: bool,
    valid: fn(char, usize) -> bool,
) {
    if s.is_empty() || (legacy && escaping != Escaping::Dots) {
        out.push_str(s);
    } else if escaping == Escaping::AllowUtf8 {
        out.push('"');
        push_escaped_name(out, s, escaping, valid);
        out.push('"');
    } else {
        push_escaped_name(out, s, escaping, valid);
    }
}

/// `escape_metric_name(s, escaping)`.
pub(crate) fn push_metric_name(out: &mut String, s: &str, escaping: Escaping) {
    push_name(out, s, escaping, is_legacy_metric_name(s), is_metric_rune);
}

/// Whether a sample named `s` has its name inside the braces, quoted
/// (`allow-utf-8`, a name that is not a legacy name).
pub(crate) fn name_in_braces(s: &str, escaping: Escaping) -> bool {
    escaping == Escaping::AllowUtf8 && !is_legacy_metric_name(s)
}

/// `_escape(s, escaping, _is_legacy_labelname_rune)`: what Python's
/// OpenMetrics encoder applies to a sample name outside the braces, so `:`
/// becomes `_` there in `underscores`.
pub(crate) fn push_om_sample_name(out: &mut String, s: &str, escaping: Escaping) {
    if escaping == Escaping::Underscores && is_label_runes(s) {
        out.push_str(s);
    } else {
        push_escaped_name(out, s, escaping, is_label_rune);
    }
}

/// `escape_label_name(s, escaping)`.
pub(crate) fn push_label_name(out: &mut String, s: &str, escaping: Escaping) {
    push_name(out, s, escaping, is_legacy_label_name(s), is_label_rune);
}

/// client_golang's `model.EscapeName`, as its protobuf encoder applies it to
/// a metric name: a legacy name as it is in every scheme (in `dots` too,
/// unlike `prometheus_client`'s text encoders), any other escaped by the
/// scheme, never quoted (a protobuf string holds any name; `allow-utf-8`
/// leaves it as it is).
pub(crate) fn push_protobuf_metric_name(out: &mut String, s: &str, escaping: Escaping) {
    push_protobuf_name(out, s, escaping, is_legacy_metric_name(s), is_metric_rune);
}

/// [`push_protobuf_metric_name`] for a label name: one of label runes only
/// is as it is (a reserved `__` name included: client_golang does not
/// escape it).
pub(crate) fn push_protobuf_label_name(out: &mut String, s: &str, escaping: Escaping) {
    push_protobuf_name(out, s, escaping, is_label_runes(s), is_label_rune);
}

fn push_protobuf_name(
    out: &mut String,
    s: &str,
    escaping: Escaping,
    legacy: bool,
    valid: fn(char, usize) -> bool,
) {
    if s.is_empty() || legacy || escaping == Escaping::AllowUtf8 {
        out.push_str(s);
    } else {
        push_escaped_name(out, s, escaping, valid);
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

/// A sample's name and labels, the same in both formats: `name{labels}`,
/// or `{"name",labels}` where the name goes in the braces
/// ([`name_in_braces`]); labels sorted as given, names escaped, values
/// backslash-escaped. `push_sample_name` writes a name outside the braces.
pub(crate) fn push_name_and_labels(
    out: &mut String,
    name: &str,
    labels: &[(Arc<str>, Arc<str>)],
    escaping: Escaping,
    push_sample_name: fn(&mut String, &str, Escaping),
) {
    let in_braces = name_in_braces(name, escaping);
    if in_braces {
        out.push('{');
        push_metric_name(out, name, escaping);
        if !labels.is_empty() {
            out.push(',');
        }
    } else {
        push_sample_name(out, name, escaping);
        if !labels.is_empty() {
            out.push('{');
        }
    }
    for (i, (label, value)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_label_name(out, label, escaping);
        out.push_str("=\"");
        push_escaped(out, value, true);
        out.push('"');
    }
    if in_braces || !labels.is_empty() {
        out.push('}');
    }
}

/// ` value\n` after a sample's name and labels.
pub(crate) fn push_value(out: &mut String, value: f64) {
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

    fn with(f: fn(&mut String, &str, Escaping), s: &str, escaping: Escaping) -> String {
        let mut out = String::new();
        f(&mut out, s, escaping);
        out
    }

    #[test]
    fn escapes_like_python() {
        use Escaping::Underscores;
        assert_eq!(with(push_metric_name, "a:b_c1", Underscores), "a:b_c1");
        assert_eq!(with(push_metric_name, "1a.b\u{e9}", Underscores), "_a_b_");
        assert_eq!(
            with(push_om_sample_name, "a:b_total", Underscores),
            "a_b_total"
        );
        assert_eq!(with(push_label_name, "__x", Underscores), "__x");
        assert_eq!(with(push_label_name, "a-b", Underscores), "a_b");
        let mut out = String::new();
        push_escaped(&mut out, "a\\b\n\"c", true);
        assert_eq!(out, "a\\\\b\\n\\\"c");
        out.clear();
        push_escaped(&mut out, "a\"\n", false);
        assert_eq!(out, "a\"\\n");
    }

    // What prometheus_client 0.26 prints for each scheme
    // (`escape_label_name`, `escape_metric_name`, and `_escape` with the
    // label-name runes for OpenMetrics sample names).
    #[test]
    fn every_scheme_escapes_like_python() {
        let labels = ["__x", "a-b", "ok", "a.b_c", "\u{e9}", ""];
        let metrics = ["a:b", "1x", "a.b_c", "ns:\u{e9}"];
        let samples = ["requests_total", "a:b", "\u{e9}"];
        // Per scheme: the label names, metric names and sample names above.
        type Expected = (
            Escaping,
            [&'static str; 6],
            [&'static str; 4],
            [&'static str; 3],
        );
        let cases: [Expected; 4] = [
            (
                Escaping::AllowUtf8,
                ["\"__x\"", "\"a-b\"", "ok", "\"a.b_c\"", "\"\u{e9}\"", ""],
                ["a:b", "\"1x\"", "\"a.b_c\"", "\"ns:\u{e9}\""],
                ["requests_total", "a:b", "\u{e9}"],
            ),
            (
                Escaping::Underscores,
                ["__x", "a_b", "ok", "a_b_c", "_", ""],
                ["a:b", "_x", "a_b_c", "ns:_"],
                ["requests_total", "a_b", "_"],
            ),
            (
                Escaping::Dots,
                ["____x", "a__b", "ok", "a_dot_b__c", "__", ""],
                ["a:b", "__x", "a_dot_b__c", "ns:__"],
                ["requests__total", "a__b", "__"],
            ),
            (
                Escaping::Values,
                ["U______x", "U__a_2d_b", "ok", "U__a_2e_b__c", "U___e9_", ""],
                ["a:b", "U___31_x", "U__a_2e_b__c", "U__ns:_e9_"],
                ["U__requests__total", "U__a_3a_b", "U___e9_"],
            ),
        ];
        for (escaping, want_labels, want_metrics, want_samples) in cases {
            for (s, want) in labels.iter().zip(want_labels) {
                assert_eq!(with(push_label_name, s, escaping), want, "{escaping:?} {s}");
            }
            for (s, want) in metrics.iter().zip(want_metrics) {
                assert_eq!(
                    with(push_metric_name, s, escaping),
                    want,
                    "{escaping:?} {s}"
                );
            }
            for (s, want) in samples.iter().zip(want_samples) {
                assert_eq!(
                    with(push_om_sample_name, s, escaping),
                    want,
                    "{escaping:?} {s}"
                );
            }
        }
    }
}
