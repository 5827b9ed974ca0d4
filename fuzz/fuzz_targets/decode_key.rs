//! `Key::decode` on arbitrary bytes: never panics, and every key it accepts
//! re-encodes (Python's form) to a key that decodes to the same thing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use multiprom_format::Key;

fuzz_target!(|data: &[u8]| {
    if let Ok(key) = Key::decode(data) {
        let encoded = key.encode();
        assert!(encoded.is_ascii(), "Python's keys are ASCII: {encoded}");
        let again = Key::decode(encoded.as_bytes()).expect("re-encoded key decodes");
        assert_eq!(again, key);
        assert_eq!(again.encode(), encoded);
    }
});
