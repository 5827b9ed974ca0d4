//! The one integration-test binary: the real `multiprom` binary, the crates
//! together, and the real Python `prometheus_client` in real processes.
//!
//! Each area has its own module; shared plumbing lives in `harness`.

// Not every test module uses every helper.
#[allow(dead_code)]
mod harness;

mod bad_files;
mod client_failures;
mod client_interop;
mod collector_conflicts;
mod collector_diff;
mod collector_registry;
mod collector_upstream;
mod compaction;
mod compat;
mod completions;
mod container;
mod demo;
mod exemplars;
mod faults;
mod format_interop;
mod gunicorn;
mod health;
mod http_client;
mod inspect;
mod liveness;
mod logging;
mod name_filter;
mod node_exporter;
mod prometheus_exemplars;
mod prometheus_native_histograms;
mod prometheus_protobuf;
mod prometheus_server;
mod push_remote_write;
mod push_transport;
mod python_native_histograms;
mod python_package;
mod python_package_releases;
mod run;
mod scrape;
mod serve;
mod shrinking;
mod spawned_server;
mod status_page;
mod wheel_command;
