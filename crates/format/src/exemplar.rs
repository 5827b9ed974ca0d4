//! An exemplar: a label set (a trace id, say), the value it was recorded
//! with and when, attached to one counter or histogram bucket entry.
//!
//! `prometheus_client` keeps exemplars in memory only, and not at all in
//! multiprocess mode. multiprom's writers store them beside the `*.db`
//! files, in companion files Python never opens (see
//! [`crate::exemplar_file`]), and its collector merges them.

/// The most code points the names and values of an exemplar's labels may
/// have together (OpenMetrics' limit, which `prometheus_client` enforces).
pub const MAX_EXEMPLAR_RUNES: usize = 128;

/// The most bytes of encoded labels a record holds: enough for any label
/// set within OpenMetrics' 128 code points (see [`encode_labels`]).
pub const LABELS_CAPACITY: usize = 1024;

/// One exemplar.
#[derive(Debug, Clone, PartialEq)]
pub struct Exemplar {
    /// The exemplar's labels, in the order they were given.
    pub labels: Vec<(String, String)>,
    /// The value recorded with it (the increment, or the observation).
    pub value: f64,
    /// Seconds since the Unix epoch, as `time.time()` gives them.
    pub timestamp: f64,
}

/// Why an exemplar cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExemplarError {
    /// Names and values together are longer than OpenMetrics allows.
    #[error("exemplar labels have {runes} code points, more than the {MAX_EXEMPLAR_RUNES} OpenMetrics allows")]
    TooLong {
        /// Code points in names and values together.
        runes: usize,
    },
}

/// Checks OpenMetrics' length limit, as `prometheus_client` does: the code
/// points of all names and values together.
pub fn check_exemplar_labels<'a>(
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(), ExemplarError> {
    let runes: usize = labels
        .into_iter()
        .map(|(name, value)| name.chars().count() + value.chars().count())
        .sum();
    if runes > MAX_EXEMPLAR_RUNES {
        return Err(ExemplarError::TooLong { runes });
    }
    Ok(())
}

/// Encodes labels into `out` as `u16 len | name | u16 len | value`, pairs
/// back to back: the record's label area. Returns the bytes used.
///
/// Any label set within [`MAX_EXEMPLAR_RUNES`] fits: at most 128 pairs
/// (names are not empty), 4 bytes per code point, 4 length bytes per pair.
pub(crate) fn encode_labels<'a>(
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    out: &mut [u8; LABELS_CAPACITY],
) -> Result<usize, ExemplarError> {
    let labels: Vec<(&str, &str)> = labels.into_iter().collect();
    check_exemplar_labels(labels.iter().copied())?;
    let mut at = 0;
    for (name, value) in labels {
        for part in [name, value] {
            let len = part.len();
            // Unreachable within the rune limit (see above); checked anyway.
            let end = at + 2 + len;
            let (Ok(len16), Some(dest)) = (u16::try_from(len), out.get_mut(at..end)) else {
                return Err(ExemplarError::TooLong {
                    runes: MAX_EXEMPLAR_RUNES + 1,
                });
            };
            dest[..2].copy_from_slice(&len16.to_le_bytes());
            dest[2..].copy_from_slice(part.as_bytes());
            at = end;
        }
    }
    Ok(at)
}

/// Decodes what [`encode_labels`] wrote; `None` if the bytes are not such
/// an encoding (a damaged or foreign record).
/// Decodes labels into `labels`, reusing its strings; `false` (and `labels`
/// left unspecified) if they are not labels multiprom encoded.
pub(crate) fn decode_labels_into(mut bytes: &[u8], labels: &mut Vec<(String, String)>) -> bool {
    fn part<'a>(bytes: &mut &'a [u8]) -> Option<&'a str> {
        let (len, rest) = bytes.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_le_bytes(*len));
        let text = std::str::from_utf8(rest.get(..len)?).ok()?;
        *bytes = &rest[len..];
        Some(text)
    }
    let mut n = 0;
    while !bytes.is_empty() {
        let (Some(name), Some(value)) = (part(&mut bytes), part(&mut bytes)) else {
            return false;
        };
        match labels.get_mut(n) {
            Some((held_name, held_value)) => {
                held_name.clear();
                held_name.push_str(name);
                held_value.clear();
                held_value.push_str(value);
            }
            None => labels.push((name.to_owned(), value.to_owned())),
        }
        n += 1;
    }
    labels.truncate(n);
    true
}

pub(crate) fn decode_labels(mut bytes: &[u8]) -> Option<Vec<(String, String)>> {
    fn part(bytes: &mut &[u8]) -> Option<String> {
        let (len, rest) = bytes.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_le_bytes(*len));
        let text = std::str::from_utf8(rest.get(..len)?).ok()?.to_owned();
        *bytes = &rest[len..];
        Some(text)
    }
    let mut labels = Vec::new();
    while !bytes.is_empty() {
        let name = part(&mut bytes)?;
        let value = part(&mut bytes)?;
        labels.push((name, value));
    }
    Some(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_decoded_into_held_ones_are_the_labels_decoded_anew() {
        let mut area = [0u8; LABELS_CAPACITY];
        let mut held = vec![("old".to_owned(), "x".to_owned())];
        for labels in [
            &[("trace_id", "abc"), ("span", "")][..],
            &[("a", "\u{e9}")][..],
            &[][..],
            &[("b", "1"), ("c", "2"), ("d", "3")][..],
        ] {
            let len = encode_labels(labels.iter().copied(), &mut area).unwrap();
            assert!(decode_labels_into(&area[..len], &mut held));
            assert_eq!(held, decode_labels(&area[..len]).unwrap());
        }
        // Not multiprom's encoding: a length past the bytes.
        assert!(!decode_labels_into(&[9, 0, b'a'], &mut held));
    }

    #[test]
    fn labels_round_trip_and_the_limit_is_in_code_points() {
        let mut area = [0u8; LABELS_CAPACITY];
        let len = encode_labels([("trace_id", "abc"), ("span", "")], &mut area).unwrap();
        assert_eq!(
            decode_labels(&area[..len]).unwrap(),
            [
                ("trace_id".to_string(), "abc".to_string()),
                ("span".to_string(), String::new())
            ]
        );
        // 128 four-byte code points fit; 129 do not.
        let wide = "\u{1F600}".repeat(127);
        let len = encode_labels([("a", wide.as_str())], &mut area).unwrap();
        assert_eq!(len, 2 + 1 + 2 + 127 * 4);
        let wider = "\u{1F600}".repeat(128);
        assert_eq!(
            encode_labels([("a", wider.as_str())], &mut area),
            Err(ExemplarError::TooLong { runes: 129 })
        );
        // The worst case within the limit: 128 one-letter names.
        let names: Vec<String> = (0..128)
            .map(|i| char::from(b'a' + i % 26).to_string())
            .collect();
        let len = encode_labels(names.iter().map(|n| (n.as_str(), "")), &mut area).unwrap();
        assert_eq!(len, 128 * 5);
        assert_eq!(decode_labels(&area[..len]).unwrap().len(), 128);
        assert!(decode_labels(&[5, 0, b'a']).is_none());
        assert!(decode_labels(&[1, 0, 0xff, 0, 0]).is_none());
    }
}
