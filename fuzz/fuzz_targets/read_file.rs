//! `parse_file` (the whole reader minus the `pread`) on arbitrary bytes: it
//! must never panic, and whatever it accepts must be really there.
#![no_main]

use libfuzzer_sys::fuzz_target;
use multiprom_format::layout::HEADER_LEN;
use multiprom_format::{parse_file, parse_header, Entry, EntryIter};

fuzz_target!(|data: &[u8]| {
    let size = data.len() as u64;
    let parsed = parse_file(data, size);
    if let Ok(contents) = &parsed {
        let used = contents.header.used;
        assert!(used >= HEADER_LEN as u64 && used % 8 == 0 && used <= size);
        let mut end = HEADER_LEN as u64;
        for entry in &contents.entries {
            assert_eq!(entry.offset, end);
            let value_offset = entry.value_offset() as usize;
            assert_eq!(value_offset % 8, 0);
            let value =
                f64::from_ne_bytes(data[value_offset..value_offset + 8].try_into().unwrap());
            assert_eq!(value.to_bits(), entry.value.to_bits());
            end = value_offset as u64 + 16;
        }
        assert_eq!(end, used);
    }
    // The same bytes as the start of a larger file (spare capacity, or a
    // short read): whatever they held is read the same.
    let larger = parse_file(data, size.saturating_mul(2));
    if let Ok(contents) = parsed {
        let larger = larger.expect("more capacity spoils nothing");
        // Bit for bit: a NaN value is not equal to itself.
        let bits = |e: &Entry| {
            (
                e.offset,
                e.raw_key.clone(),
                e.value.to_bits(),
                e.timestamp.to_bits(),
            )
        };
        assert!(larger
            .entries
            .iter()
            .map(bits)
            .eq(contents.entries.iter().map(bits)));
    }
    // The entry walk on its own.
    if let Ok(header) = parse_header(data, size) {
        for entry in EntryIter::new(data, HEADER_LEN, header.used as usize) {
            if entry.is_err() {
                break;
            }
        }
    }
});
