//! Protobuf fields written from parts, for the request bodies written
//! piece by piece (OTLP's and Remote-Write's): keys and lengths by
//! prost's encoding functions, strings straight from the `&str`s a
//! collection holds (prost's own string encoder takes a `String`).

use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
use prost::Message;

/// A string field's length, key included: none when empty (proto3 leaves
/// a field at its default out, as prost does).
pub(crate) fn string_len(tag: u32, text: &str) -> usize {
    if text.is_empty() {
        0
    } else {
        field_len(tag, text.len())
    }
}

/// A string field, unless empty.
pub(crate) fn put_string(tag: u32, text: &str, out: &mut Vec<u8>) {
    if !text.is_empty() {
        put_oneof_string(tag, text, out);
    }
}

/// A string field of a `oneof`, written even when empty (which member is
/// set is the value).
pub(crate) fn put_oneof_string(tag: u32, text: &str, out: &mut Vec<u8>) {
    put_header(tag, text.len(), out);
    out.extend_from_slice(text.as_bytes());
}

/// A `oneof` string field's length, key included.
pub(crate) fn oneof_string_len(tag: u32, text: &str) -> usize {
    field_len(tag, text.len())
}

/// A length-delimited field's header: its key and its length.
pub(crate) fn put_header(tag: u32, length: usize, out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(length as u64, out);
}

/// A length-delimited field's length with its header.
pub(crate) fn field_len(tag: u32, length: usize) -> usize {
    key_len(tag) + encoded_len_varint(length as u64) + length
}

/// `message`'s fields (no header). Into a `Vec`, which grows, encoding
/// cannot fail.
pub(crate) fn put_message(message: &impl Message, out: &mut Vec<u8>) {
    let _ = message.encode(out);
}
