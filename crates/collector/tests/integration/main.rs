//! The collector's integration tests, one module per area, in one test
//! binary: one link step instead of one per file, as the workspace's own
//! `tests/integration` does. Shared helpers live in `support`.
//!
//! Two tests are binaries of their own, beside this one: `fork` (its own
//! `main`, so that no libtest thread runs beside the fork) and
//! `first_collection` (it counts this process's inotify descriptors and
//! memory maps, which the tests here would disturb).

mod support;

mod alike_files;
mod exemplar_changes;
mod exemplars;
mod generated_proto;
mod given_files;
mod growing_files;
mod incremental_cache;
mod key_hints;
mod live_exemplars_ops;
mod live_natives;
mod live_natives_ops;
mod long_keys;
mod native_histograms;
mod read_ahead;
mod settled_exemplars;
mod settled_files;
mod settled_natives;
mod single_flight;
mod warm_collection;
