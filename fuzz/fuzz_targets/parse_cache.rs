//! The collector's incremental parse cache: a sequence of appends, value
//! updates, rewrites in place, replacements, truncations, damage, deletions
//! and collections leaving files out (as a reaper does), applied to a few
//! files in a temporary directory, each followed by a collection on one
//! long-lived `DirCollector`, whose result must equal a fresh collector's
//! over the same bytes (families and per-file reports); for a quarter of
//! the inputs among 64 more files, so that collections read ahead on other
//! threads. The operations and the check are shared with the property test
//! `crates/collector/tests/integration/incremental_cache.rs`.
#![no_main]

#[path = "../../crates/collector/tests/integration/support/dir_ops.rs"]
mod dir_ops;

use dir_ops::{check_sequence, EntrySpec, KeySpec, Op, Reference};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use multiprom_collector::CollectOptions;

/// Operations per input: enough for a file to go through several lives,
/// few enough that one input takes milliseconds.
const MAX_OPS: usize = 24;

fuzz_target!(|data: &[u8]| {
    let mut input = Unstructured::new(data);
    // One byte says both: bit 0 (what `bool` reads, so inputs found before
    // the padding keep their meaning) accumulate; bits 1 and 2 both set (a
    // quarter of the inputs) the padding files, so that collections read
    // ahead on other threads.
    let Ok(first) = input.arbitrary::<u8>() else {
        return;
    };
    let accumulate = first & 1 == 1;
    let padded = first & 6 == 6;
    let mut ops = Vec::new();
    while ops.len() < MAX_OPS && !input.is_empty() {
        match op(&mut input) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    // tmpfs when there is one: the target is bound by file-system calls.
    let dir = tempfile::Builder::new()
        .prefix("parse_cache")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("a temporary directory");
    if padded {
        dir_ops::pad(dir.path()).expect("the padding files");
    }
    // The reference reads the files without maps (as any collector's first
    // collection does), the least a fresh merge can cost. The property test
    // also compares with merge_files; the fuzzer spends its time on
    // sequences.
    check_sequence(
        dir.path(),
        CollectOptions::default().accumulate(accumulate),
        Reference::FreshReadingCollector,
        &ops,
    );
});

fn op(input: &mut Unstructured<'_>) -> Result<Op> {
    let file = usize::from(input.arbitrary::<u8>()?);
    Ok(match input.int_in_range(0..=7u8)? {
        0 => Op::Append {
            file,
            entries: entries(input)?,
        },
        1 => Op::SetValue {
            file,
            entry: usize::from(input.arbitrary::<u8>()?),
            value: value(input)?,
            timestamp: value(input)?,
        },
        2 => Op::Rewrite {
            file,
            entries: entries(input)?,
            spare: u64::from(input.arbitrary::<u8>()?),
        },
        3 => Op::Replace {
            file,
            entries: entries(input)?,
            spare: u64::from(input.arbitrary::<u8>()?),
        },
        4 => Op::Truncate {
            file,
            len: u64::from(input.arbitrary::<u16>()?),
        },
        5 => Op::Damage {
            file,
            offset: u64::from(input.arbitrary::<u16>()?),
            bytes: {
                let len = input.int_in_range(1..=8)?;
                input.bytes(len)?.to_vec()
            },
        },
        6 => Op::Delete { file },
        _ => Op::LeaveOut {
            files: input.arbitrary()?,
        },
    })
}

fn entries(input: &mut Unstructured<'_>) -> Result<Vec<EntrySpec>> {
    let count = input.int_in_range(0..=4)?;
    (0..count)
        .map(|_| {
            Ok(EntrySpec {
                key: key(input)?,
                value: value(input)?,
                timestamp: value(input)?,
            })
        })
        .collect()
}

fn key(input: &mut Unstructured<'_>) -> Result<KeySpec> {
    if input.ratio(1, 16)? {
        let len = input.int_in_range(0..=32)?;
        return Ok(KeySpec::Raw(input.bytes(len)?.to_vec()));
    }
    let labels = input.int_in_range(0..=3)?;
    Ok(KeySpec::Named {
        family: usize::from(input.arbitrary::<u8>()?),
        suffix: usize::from(input.arbitrary::<u8>()?),
        labels: (0..labels)
            .map(|_| {
                Ok((
                    usize::from(input.arbitrary::<u8>()?),
                    usize::from(input.arbitrary::<u8>()?),
                ))
            })
            .collect::<Result<_>>()?,
        help: usize::from(input.arbitrary::<u8>()?),
    })
}

/// Mostly small integers, as writers store; any bit pattern otherwise.
fn value(input: &mut Unstructured<'_>) -> Result<f64> {
    if input.ratio(3, 4)? {
        Ok(f64::from(input.int_in_range(-3i8..=9)?))
    } else {
        input.arbitrary()
    }
}
