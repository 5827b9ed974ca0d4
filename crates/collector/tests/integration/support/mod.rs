//! Helpers shared by the test modules.

pub(crate) mod dir_ops;
pub(crate) mod maps;
pub(crate) mod native_worker;
