//! Byte layout of a `*.db` file, as written by `prometheus_client/mmap_dict.py`.
//!
//! ```text
//! offset 0  i32   used   bytes in use, including this 8-byte header (8 = empty)
//! offset 4  4 zero bytes, never read
//! offset 8  entries back to back up to `used`; zero bytes after, up to capacity
//!
//! entry:    i32 key_len | key bytes | 1..=8 pad bytes | f64 value | f64 timestamp
//! ```
//!
//! Everything is native-endian; multiprom supports little-endian targets only
//! (the files are shared with Python processes on the same machine).

use bytemuck::{Pod, Zeroable};

/// Size of the file header (`used` plus four unused bytes).
pub const HEADER_LEN: usize = 8;

/// Capacity of a fresh file: Python truncates new files to `1 << 16` bytes.
pub const INITIAL_CAPACITY: u64 = 1 << 16;

/// `used` is a signed 32-bit integer, so no file may grow past this.
pub const MAX_USED: u64 = i32::MAX as u64;

/// The longest key a reader accepts (1 MiB). prometheus_client's keys are a
/// few hundred bytes; the limit bounds what one damaged length field can make
/// a reader read before it can tell the entry is bad.
pub const MAX_KEY_LEN: usize = 1 << 20;

/// Size of the value and timestamp that end every entry.
pub const VALUE_PAIR_LEN: usize = 16;

/// The 8-byte header at offset 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct RawHeader {
    /// Bytes in use including the header.
    pub used: i32,
    /// Unused; Python never reads it.
    pub reserved: u32,
}

/// The value and timestamp at the end of an entry.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct ValuePair {
    /// The sample value.
    pub value: f64,
    /// Seconds since the epoch; 0.0 except for `mostrecent` gauges.
    pub timestamp: f64,
}

/// Number of pad bytes after a key of `key_len` bytes.
///
/// Python computes `8 - (key_len + 4) % 8`, which is 8 (not 0) when the
/// length prefix and key already end on an 8-byte boundary.
#[must_use]
pub const fn pad_len(key_len: usize) -> usize {
    8 - (key_len + 4) % 8
}

/// Total bytes of an entry whose key is `key_len` bytes long.
#[must_use]
pub const fn entry_len(key_len: usize) -> usize {
    4 + key_len + pad_len(key_len) + VALUE_PAIR_LEN
}

/// Offset of the value within an entry that starts at `entry_offset`.
#[must_use]
pub const fn value_offset(entry_offset: usize, key_len: usize) -> usize {
    entry_offset + 4 + key_len + pad_len(key_len)
}

/// Appends one entry exactly as Python lays it out: length, key, space
/// padding, value, timestamp. Keys longer than `i32::MAX` bytes are the
/// caller's to refuse ([`crate::FileWriter`] does).
pub fn push_entry(out: &mut Vec<u8>, key: &[u8], value: f64, timestamp: f64) {
    debug_assert!(
        i32::try_from(key.len()).is_ok(),
        "key too long for an entry"
    );
    out.reserve(entry_len(key.len()));
    out.extend_from_slice(&(key.len() as i32).to_ne_bytes());
    out.extend_from_slice(key);
    // Python pads with spaces.
    out.resize(out.len() + pad_len(key.len()), b' ');
    out.extend_from_slice(bytemuck::bytes_of(&ValuePair { value, timestamp }));
}

/// A whole file image without a writer: header, `entries` (key, value,
/// timestamp), zeros up to `capacity`: what compaction writes, and what
/// tests and fixtures use for exact bytes (including ones they then damage
/// on purpose).
///
/// ```
/// use multiprom_format::{layout, parse_file};
/// let image = layout::file_image([(br#"["a", "a_total", {}, ""]"#.as_slice(), 2.0, 0.0)], 4096);
/// assert_eq!(image.len(), 4096);
/// assert_eq!(parse_file(&image, 4096).unwrap().entries[0].value, 2.0);
/// ```
#[must_use]
pub fn file_image<'a>(
    entries: impl IntoIterator<Item = (&'a [u8], f64, f64)>,
    capacity: usize,
) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN];
    for (key, value, timestamp) in entries {
        push_entry(&mut out, key, value, timestamp);
    }
    let used = out.len() as i32;
    out[..4].copy_from_slice(&used.to_ne_bytes());
    out.resize(capacity.max(out.len()), 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_matches_python() {
        // (key_len + 4) % 8 == 0 pads 8 bytes, never 0.
        assert_eq!(pad_len(4), 8);
        assert_eq!(pad_len(12), 8);
        assert_eq!(pad_len(0), 4);
        assert_eq!(pad_len(5), 7);
        for len in 0..64 {
            assert_eq!((4 + len + pad_len(len)) % 8, 0);
            assert!((1..=8).contains(&pad_len(len)));
        }
        assert_eq!(entry_len(4), 32);
    }
}
