//! A request as the HTTP body Remote-Write sends (1.0's `WriteRequest`,
//! 2.0's `Request`: the same framing).

use prost::Message;

use super::prometheus::WriteRequest;
use super::v2;

/// The body of `request`: its protobuf encoding compressed with snappy's
/// block format (not the framed, streaming one), as the specification
/// requires (`Content-Encoding: snappy`).
#[must_use]
pub fn encode(request: &WriteRequest) -> Vec<u8> {
    snappy(request)
}

/// The body of a Remote-Write 2.0 `request`, as [`encode`]'s of 1.0:
/// protobuf in snappy's block format.
#[must_use]
pub fn encode_v2(request: &v2::Request) -> Vec<u8> {
    snappy(request)
}

fn snappy(message: &impl Message) -> Vec<u8> {
    compress(&message.encode_to_vec())
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
