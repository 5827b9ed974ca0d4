//! The committed Remote-Write types are what prost-build makes of the
//! committed schemas today (1.0's `remote.proto` and `types.proto`, 2.0's
//! `io/prometheus/write/v2/types.proto`): regenerated here (protox
//! compiles the schemas, so no `protoc`) and compared byte for byte, so
//! neither side can drift from the other unnoticed.
//! `MULTIPROM_REGENERATE_PROTO=1` writes the files instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// Each schema compiled, and where prost-build's output for its package
/// (named after the package) is committed.
const GENERATED: [(&str, &str, &str); 2] = [
    (
        "remote.proto",
        "prometheus.rs",
        "src/remote_write/prometheus.rs",
    ),
    (
        "io/prometheus/write/v2/types.proto",
        "io.prometheus.write.v2.rs",
        "src/remote_write/v2/types.rs",
    ),
];

#[test]
fn generated_code_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let schemas = GENERATED.map(|(schema, _, _)| schema);
    let descriptors =
        protox::compile(schemas, [crate_dir.join("proto")]).expect("compile the schemas");
    let out = tempfile::tempdir().unwrap();
    prost_build::Config::new()
        .out_dir(out.path())
        .compile_fds(descriptors)
        .expect("generate the Rust types");
    let mut stale = Vec::new();
    for (_, generated, committed) in GENERATED {
        let committed = crate_dir.join(committed);
        let generated = std::fs::read_to_string(out.path().join(generated)).unwrap();
        if std::env::var_os("MULTIPROM_REGENERATE_PROTO").is_some() {
            std::fs::write(&committed, &generated).unwrap();
        }
        let on_disk = std::fs::read_to_string(&committed).unwrap_or_default();
        if on_disk != generated {
            stale.push(committed.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} not what prost-build generates from proto/; regenerate with \
         MULTIPROM_REGENERATE_PROTO=1 cargo test -p multiprom-push generated_code_is_up_to_date"
    );
}
