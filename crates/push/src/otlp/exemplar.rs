//! A Prometheus exemplar as an OTLP exemplar.

use multiprom_format::Exemplar as PromExemplar;

use super::points::string_attribute;
use super::proto::metrics::v1::{exemplar, Exemplar};
use super::time::nanos_of_seconds;

/// `prom` as the specification converts an exemplar: its time from its
/// timestamp, its `trace_id` and `span_id` labels as the trace and span
/// ids when they are valid ids (32 and 16 hex digits, not all zero), every
/// other label as a filtered attribute. A `trace_id` or `span_id` that is
/// not a valid id stays a filtered attribute rather than being lost: the
/// specification says what to do with valid ones only.
pub(super) fn exemplar(prom: &PromExemplar) -> Exemplar {
    let mut out = Exemplar {
        filtered_attributes: Vec::new(),
        time_unix_nano: nanos_of_seconds(prom.timestamp),
        span_id: Vec::new(),
        trace_id: Vec::new(),
        value: Some(exemplar::Value::AsDouble(prom.value)),
    };
    for (name, value) in &prom.labels {
        match name.as_str() {
            "trace_id" if out.trace_id.is_empty() => {
                if let Some(id) = id_bytes::<16>(value) {
                    out.trace_id = id.to_vec();
                    continue;
                }
            }
            "span_id" if out.span_id.is_empty() => {
                if let Some(id) = id_bytes::<8>(value) {
                    out.span_id = id.to_vec();
                    continue;
                }
            }
            _ => {}
        }
        out.filtered_attributes.push(string_attribute(name, value));
    }
    out
}

/// The `N` bytes `hex` spells (2N hex digits, either case), unless they are
/// all zero (OpenTelemetry's invalid id).
fn id_bytes<const N: usize>(hex: &str) -> Option<[u8; N]> {
    let digits = hex.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let mut id = [0u8; N];
    for (byte, pair) in id.iter_mut().zip(digits.chunks_exact(2)) {
        let high = char::from(pair[0]).to_digit(16)?;
        let low = char::from(pair[1]).to_digit(16)?;
        // Two hex digits make a byte.
        #[allow(clippy::cast_possible_truncation)]
        {
            *byte = (high * 16 + low) as u8;
        }
    }
    if id.iter().all(|&b| b == 0) {
        return None;
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prom(labels: &[(&str, &str)]) -> PromExemplar {
        PromExemplar {
            labels: labels
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            value: 0.25,
            timestamp: 1_700_000_000.5,
        }
    }

    #[test]
    fn trace_and_span_ids_become_bytes_and_the_rest_filtered_attributes() {
        let out = exemplar(&prom(&[
            ("trace_id", "0af7651916cd43dd8448eb211c80319c"),
            ("span_id", "B7AD6B7169203331"),
            ("user", "ann"),
        ]));
        assert_eq!(
            out.trace_id,
            [
                0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80,
                0x31, 0x9c
            ]
        );
        assert_eq!(
            out.span_id,
            [0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]
        );
        assert_eq!(out.filtered_attributes, [string_attribute("user", "ann")]);
        assert_eq!(out.time_unix_nano, 1_700_000_000_500_000_000);
        assert_eq!(out.value, Some(exemplar::Value::AsDouble(0.25)));
    }

    #[test]
    fn invalid_ids_stay_attributes() {
        let out = exemplar(&prom(&[
            ("trace_id", "00000000000000000000000000000000"),
            ("span_id", "b7ad6b716920333"),
        ]));
        assert!(out.trace_id.is_empty() && out.span_id.is_empty());
        assert_eq!(
            out.filtered_attributes,
            [
                string_attribute("trace_id", "00000000000000000000000000000000"),
                string_attribute("span_id", "b7ad6b716920333"),
            ]
        );
        assert_eq!(id_bytes::<8>("b7ad6b71692033zz"), None);
    }
}
