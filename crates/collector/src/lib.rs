//! Placeholder; see the crate issue.
