//! A `WriteRequest` as the HTTP body Remote-Write 1.0 sends.

use prost::Message;

use super::prometheus::WriteRequest;

/// The body of `request`: its protobuf encoding compressed with snappy's
/// block format (not the framed, streaming one), as the specification
/// requires (`Content-Encoding: snappy`).
#[must_use]
pub fn encode(request: &WriteRequest) -> Vec<u8> {
    compress(&request.encode_to_vec())
}

/// `protobuf` compressed with snappy's block format.
pub(super) fn compress(protobuf: &[u8]) -> Vec<u8> {
    // Fails only for an input longer than snappy's block format can hold
    // (about 4 GiB, far past what any receiver accepts in one request);
    // such a request is sent empty and rejected rather than panicking.
    snap::raw::Encoder::new()
        .compress_vec(protobuf)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::remote_write::prometheus::{Label, Sample, TimeSeries};

    #[test]
    fn the_body_is_the_protobuf_in_snappy_blocks() {
        let request = WriteRequest {
            timeseries: vec![TimeSeries {
                labels: vec![Label {
                    name: "__name__".into(),
                    value: "up".into(),
                }],
                samples: vec![Sample {
                    value: 1.0,
                    timestamp: 1_700_000_000_123,
                }],
                ..TimeSeries::default()
            }],
            metadata: Vec::new(),
        };
        let body = encode(&request);
        let protobuf = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        assert_eq!(protobuf, request.encode_to_vec());
        assert_eq!(WriteRequest::decode(protobuf.as_slice()).unwrap(), request);
        // The block format has no stream identifier chunk (the framed
        // format starts with 0xff "sNaPpY"): it starts with the length.
        assert_eq!(
            snap::raw::decompress_len(&body).unwrap(),
            request.encoded_len()
        );
    }
}
