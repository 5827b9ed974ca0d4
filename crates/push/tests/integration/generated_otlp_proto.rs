//! The committed OTLP types are what prost-build makes of the committed
//! OpenTelemetry schema today: regenerated here (protox compiles the
//! schema, so no `protoc`) and compared byte for byte, file by file, so
//! neither can drift from the other unnoticed.
//! `MULTIPROM_REGENERATE_PROTO=1` writes the files instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// One generated file per protobuf package.
const PACKAGES: [&str; 4] = [
    "opentelemetry.proto.common.v1",
    "opentelemetry.proto.resource.v1",
    "opentelemetry.proto.metrics.v1",
    "opentelemetry.proto.collector.metrics.v1",
];

#[test]
fn generated_otlp_code_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let descriptors = protox::compile(
        ["opentelemetry/proto/collector/metrics/v1/metrics_service.proto"],
        [crate_dir.join("proto")],
    )
    .expect("compile metrics_service.proto");
    let out = tempfile::tempdir().unwrap();
    prost_build::Config::new()
        .out_dir(out.path())
        .compile_fds(descriptors)
        .expect("generate the Rust types");
    let mut generated_files: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    generated_files.sort();
    let mut expected: Vec<String> = PACKAGES.iter().map(|p| format!("{p}.rs")).collect();
    expected.sort();
    assert_eq!(generated_files, expected, "prost-build made other files");
    let regenerate = std::env::var_os("MULTIPROM_REGENERATE_PROTO").is_some();
    for package in PACKAGES {
        let committed = crate_dir.join(format!("src/otlp/{package}.rs"));
        let generated = std::fs::read_to_string(out.path().join(format!("{package}.rs"))).unwrap();
        if regenerate {
            std::fs::write(&committed, &generated).unwrap();
        }
        let on_disk = std::fs::read_to_string(&committed).unwrap_or_default();
        assert!(
            on_disk == generated,
            "{} is not what prost-build generates from proto/; regenerate it with \
             MULTIPROM_REGENERATE_PROTO=1 cargo test -p multiprom-push generated_otlp_code_is_up_to_date",
            committed.display()
        );
    }
}
