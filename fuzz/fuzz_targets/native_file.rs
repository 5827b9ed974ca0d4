//! `parse_native_histogram_file` (the native histogram reader minus its
//! `pread`) on arbitrary bytes, then the merge of everything it accepted:
//! neither may panic, and the merge keeps every observation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use multiprom_format::native_file::parse_native_histogram_file;
use multiprom_format::NativeHistogram;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = parse_native_histogram_file(data, data.len() as u64) else {
        return;
    };
    let mut merged: Option<NativeHistogram> = None;
    let mut count = 0u64;
    for entry in &file.entries {
        let h = &entry.histogram;
        for side in [&h.positive, &h.negative] {
            assert!(side.windows(2).all(|w| w[0].0 < w[1].0), "sorted, distinct");
            assert!(side.iter().all(|&(_, c)| c > 0), "no empty bucket");
        }
        count = count.saturating_add(h.count());
        match &mut merged {
            Some(m) => m.merge(h),
            None => merged = Some(h.clone()),
        }
    }
    if let Some(m) = merged {
        if count < u64::MAX {
            assert_eq!(m.count(), count, "a merge keeps every observation");
        }
    }
});
