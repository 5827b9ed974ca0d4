//! Push a directory's served view ([`multiprom_collector::ServedView`]) to a
//! receiver: OTLP/HTTP and Prometheus Remote-Write.
//!
//! A [`Pusher`] collects the view on its own schedule (sharing a collection
//! that runs when it arrives, never waiting on a scrape's response),
//! encodes it, and sends it, retrying with backoff until the next push is
//! due; the next push carries every cumulative total, so nothing is queued
//! and nothing is lost while a receiver is down.

mod backoff;
mod config;
mod encoder;
mod fields;
mod otel_env;
pub mod otlp;
mod pusher;
pub mod remote_write;
mod sender;
mod stats;

pub use config::{
    parse_header, read_file, Credentials, Protocol, PushConfig, PushSetupError, RemoteWriteVersion,
};
pub use otel_env::{OtelEnv, DEFAULT_OTLP_ENDPOINT};
pub use pusher::{Pusher, LAST_PUSH_WAIT};
pub use stats::{push_families, PushStats, PusherReport};
