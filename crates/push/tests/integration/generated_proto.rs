//! The committed Remote-Write types are what prost-build makes of the
//! committed `remote.proto` and `types.proto` today: regenerated here
//! (protox compiles the schema, so no `protoc`) and compared byte for byte,
//! so neither can drift from the other unnoticed.
//! `MULTIPROM_REGENERATE_PROTO=1` writes the file instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

#[test]
fn generated_code_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let committed = crate_dir.join("src/remote_write/prometheus.rs");
    let descriptors =
        protox::compile(["remote.proto"], [crate_dir.join("proto")]).expect("compile remote.proto");
    let out = tempfile::tempdir().unwrap();
    prost_build::Config::new()
        .out_dir(out.path())
        .compile_fds(descriptors)
        .expect("generate the Rust types");
    let generated = std::fs::read_to_string(out.path().join("prometheus.rs")).unwrap();
    if std::env::var_os("MULTIPROM_REGENERATE_PROTO").is_some() {
        std::fs::write(&committed, &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(&committed).unwrap_or_default();
    assert!(
        on_disk == generated,
        "{} is not what prost-build generates from proto/; regenerate it with \
         MULTIPROM_REGENERATE_PROTO=1 cargo test -p multiprom-push generated_code_is_up_to_date",
        committed.display()
    );
}
