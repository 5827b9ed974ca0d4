//! Entry keys: `json.dumps([family, sample, labels, help], sort_keys=True)`.
//!
//! Writers must produce Python's exact bytes: a Python process that reopens a
//! file (pid reuse) finds its entries by the raw key string, so a key that is
//! merely equivalent JSON would be appended a second time. Readers accept any
//! valid JSON of the right shape.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A decoded entry key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Family (metric) name, e.g. `requests` for a counter.
    pub family: String,
    /// Sample name, e.g. `requests_total` or `latency_bucket`.
    pub sample: String,
    /// Labels sorted by name (code point order, as `sort_keys=True`).
    pub labels: Vec<(String, String)>,
    /// Help text.
    pub help: String,
}

/// Why a key could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Not JSON at all.
    #[error("key is not valid JSON: {0}")]
    InvalidJson(String),
    /// JSON, but not `[string, string, {string: string}, string]`.
    #[error("key is not a [family, sample, {{labels}}, help] array: {0}")]
    WrongShape(String),
    /// The family name is empty: Python refuses to build a metric of it.
    /// [`Key::decode`] accepts such a key; a reader that merges keys the
    /// way Python does rejects it.
    #[error("entry has an empty metric name")]
    EmptyFamilyName,
    /// A histogram bucket's `le` label does not parse as a number (or is
    /// NaN): Python cannot order the buckets. [`Key::decode`] does not look
    /// at labels; a reader that merges histograms rejects it.
    #[error("histogram bucket bound le={0:?} is not a number")]
    BadBucketBound(String),
}

type KeyTuple = (String, String, BTreeMap<String, String>, String);

impl Key {
    /// Decodes a key as stored in a file.
    ///
    /// ```
    /// use multiprom_format::Key;
    /// let key = Key::decode(br#"["m", "m_total", {"b": "2", "a": "1"}, "help"]"#).unwrap();
    /// assert_eq!(key.labels, [("a".into(), "1".into()), ("b".into(), "2".into())]);
    /// ```
    ///
    /// A lone surrogate escape (`\udce9`: Python text decoded with
    /// `surrogateescape`, which `json.dumps` writes so) is read as U+FFFD:
    /// it is no character, so no text can hold it (`prometheus_client`'s own
    /// exposition fails on it, every sample of the scrape with it).
    ///
    /// ```
    /// use multiprom_format::Key;
    /// let key = Key::decode(br#"["m", "m_total", {"path": "caf\udce9"}, "h"]"#).unwrap();
    /// assert_eq!(key.labels[0].1, "caf\u{fffd}");
    /// ```
    pub fn decode(bytes: &[u8]) -> Result<Key, KeyError> {
        match Key::decode_json(bytes) {
            Err(KeyError::InvalidJson(error)) => match without_lone_surrogates(bytes) {
                Some(replaced) => Key::decode_json(&replaced),
                None => Err(KeyError::InvalidJson(error)),
            },
            decoded => decoded,
        }
    }

    fn decode_json(bytes: &[u8]) -> Result<Key, KeyError> {
        match serde_json::from_slice::<KeyTuple>(bytes) {
            Ok((family, sample, labels, help)) => Ok(Key {
                family,
                sample,
                labels: labels.into_iter().collect(),
                help,
            }),
            // serde_json reports a shape mismatch as soon as it sees one, even
            // in text that is not JSON further on; parse again to tell apart.
            Err(err) => Err(match serde_json::from_slice::<serde_json::Value>(bytes) {
                Ok(_) => KeyError::WrongShape(err.to_string()),
                Err(syntax) => KeyError::InvalidJson(syntax.to_string()),
            }),
        }
    }

    /// Encodes this key exactly as Python would.
    #[must_use]
    pub fn encode(&self) -> String {
        encode_key(
            &self.family,
            &self.sample,
            self.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &self.help,
        )
    }
}

/// `json` with every escape of a lone surrogate (`\\uD800` to `\\uDFFF`
/// not in a high-low pair) replaced by `\\ufffd`, or `None` when it has
/// none. Escapes are followed from the start, so an escaped backslash
/// before a `u` is not taken for one.
fn without_lone_surrogates(json: &[u8]) -> Option<Vec<u8>> {
    let escape_at = |at: usize| -> Option<u16> {
        let hex = json.get(at..at + 6)?.strip_prefix(b"\\u")?;
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    };
    let is_high = |unit: u16| (0xD800..0xDC00).contains(&unit);
    let is_low = |unit: u16| (0xDC00..0xE000).contains(&unit);
    let mut out: Option<Vec<u8>> = None;
    let mut at = 0;
    while at < json.len() {
        if json[at] != b'\\' {
            at += 1;
            continue;
        }
        let Some(unit) = escape_at(at) else {
            // Another escape: it and the character it escapes.
            at += 2;
            continue;
        };
        if is_high(unit) && escape_at(at + 6).is_some_and(is_low) {
            at += 12;
            continue;
        }
        if is_high(unit) || is_low(unit) {
            let out = out.get_or_insert_with(|| json.to_vec());
            out[at..at + 6].copy_from_slice(b"\\ufffd");
        }
        at += 6;
    }
    out
}

/// Encodes a key exactly as `prometheus_client.mmap_dict.mmap_key` does.
///
/// Labels may come in any order; they are sorted by name. If a name repeats,
/// the last value wins, as when Python builds the dict.
///
/// ```
/// use multiprom_format::encode_key;
/// let key = encode_key("m", "m_total", [("b", "x\u{1}\u{7f}"), ("a", "y\"\\/\t")], "h\n\u{2028}");
/// assert_eq!(key, r#"["m", "m_total", {"a": "y\"\\/\t", "b": "x\u0001\u007f"}, "h\n\u2028"]"#);
/// assert_eq!(encode_key("m", "m", [], ""), r#"["m", "m", {}, ""]"#);
/// ```
pub fn encode_key<'a>(
    family: &str,
    sample: &str,
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    help: &str,
) -> String {
    let labels: BTreeMap<&str, &str> = labels.into_iter().collect();
    let mut out = String::with_capacity(
        16 + family.len()
            + sample.len()
            + help.len()
            + labels
                .iter()
                .map(|(k, v)| k.len() + v.len() + 8)
                .sum::<usize>(),
    );
    out.push('[');
    push_json_string(&mut out, family);
    out.push_str(", ");
    push_json_string(&mut out, sample);
    out.push_str(", {");
    for (i, (name, value)) in labels.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_json_string(&mut out, name);
        out.push_str(": ");
        push_json_string(&mut out, value);
    }
    out.push_str("}, ");
    push_json_string(&mut out, help);
    out.push(']');
    out
}

/// Appends `s` as a JSON string literal the way Python's `json.dumps` does
/// with `ensure_ascii=True`: printable ASCII (0x20..=0x7E) stays, `"` and `\`
/// and the five short escapes are backslashed, everything else (controls, DEL,
/// non-ASCII) becomes lowercase `\uXXXX`, astral code points a surrogate pair.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    let mut run_start = 0;
    for (i, c) in s.char_indices() {
        let escape: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            ' '..='~' => continue,
            _ => None,
        };
        out.push_str(&s[run_start..i]);
        run_start = i + c.len_utf8();
        match escape {
            Some(e) => out.push_str(e),
            None => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_python() {
        assert_eq!(
            encode_key(
                "m",
                "m_total",
                [
                    ("\u{e9}", "\u{1F600}"),
                    ("b", "x\u{1}\u{7f}"),
                    ("a", "y\"\\/\t")
                ],
                "h\n\u{2028}"
            ),
            r#"["m", "m_total", {"a": "y\"\\/\t", "b": "x\u0001\u007f", "\u00e9": "\ud83d\ude00"}, "h\n\u2028"]"#
        );
    }

    #[test]
    fn lone_surrogates_are_read_as_replacement_characters() {
        let decoded = |json: &str| Key::decode(json.as_bytes()).map(|key| key.labels[0].1.clone());
        // Lone, high or low, at the end, before another escape.
        assert_eq!(
            decoded(r#"["m", "m", {"l": "a\udce9b"}, ""]"#).unwrap(),
            "a\u{fffd}b"
        );
        assert_eq!(
            decoded(r#"["m", "m", {"l": "\ud83d"}, ""]"#).unwrap(),
            "\u{fffd}"
        );
        assert_eq!(
            decoded(r#"["m", "m", {"l": "\ud83d\n"}, ""]"#).unwrap(),
            "\u{fffd}\n"
        );
        assert_eq!(
            decoded(r#"["m", "m", {"l": "\ude00\ud83d\ude00"}, ""]"#).unwrap(),
            "\u{fffd}\u{1f600}"
        );
        // A pair stays a character; an escaped backslash before `u` is no escape.
        assert_eq!(
            decoded(r#"["m", "m", {"l": "\ud83d\ude00"}, ""]"#).unwrap(),
            "\u{1f600}"
        );
        assert_eq!(
            decoded(r#"["m", "m", {"l": "\\ud800"}, ""]"#).unwrap(),
            "\\ud800"
        );
        // Everywhere in the key.
        let key = Key::decode(br#"["\udc80", "\udc80_total", {"\udc81": "v"}, "\udc82"]"#).unwrap();
        assert_eq!(
            (
                key.family.as_str(),
                key.sample.as_str(),
                key.labels[0].0.as_str(),
                key.help.as_str()
            ),
            ("\u{fffd}", "\u{fffd}_total", "\u{fffd}", "\u{fffd}")
        );
        // Other bad JSON stays bad.
        assert!(matches!(
            Key::decode(br#"["m", "m", {"l": "\ud83d"}, "#),
            Err(KeyError::InvalidJson(_))
        ));
    }

    #[test]
    fn decode_round_trips_and_classifies() {
        let key = Key {
            family: "f".into(),
            sample: "f_bucket".into(),
            labels: vec![
                ("le".into(), "+Inf".into()),
                ("x".into(), "\u{0}\u{10ffff}".into()),
            ],
            help: "\u{7f}".into(),
        };
        assert_eq!(Key::decode(key.encode().as_bytes()).unwrap(), key);
        assert!(matches!(
            Key::decode(b"[1, 2"),
            Err(KeyError::InvalidJson(_))
        ));
        assert!(matches!(
            Key::decode(b"\"s\""),
            Err(KeyError::WrongShape(_))
        ));
        assert!(matches!(
            Key::decode(br#"["a", "b", {}]"#),
            Err(KeyError::WrongShape(_))
        ));
        assert!(matches!(
            Key::decode(br#"["a", "b", {"x": 1}, ""]"#),
            Err(KeyError::WrongShape(_))
        ));
        assert!(matches!(
            Key::decode(br#"["a", "b", {}, "", 5]"#),
            Err(KeyError::WrongShape(_))
        ));
    }
}
