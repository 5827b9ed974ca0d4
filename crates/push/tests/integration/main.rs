//! The push crate's integration tests, one module per area, in one test
//! binary (one link step instead of one per file).

mod generated_otlp_proto;
mod generated_proto;
mod otlp_sdk;
mod receivers;
mod remote_write;
mod remote_write_v2;
