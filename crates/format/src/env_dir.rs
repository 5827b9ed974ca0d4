//! Which directory the files are in, as the environment names it.
//!
//! One rule, prometheus_client's (`values.py` and `multiprocess.py`), for
//! every part of multiprom that reads the environment (the Rust client, the
//! command line, the Python package):
//!
//! * [`DIR_ENV_VAR`] (`PROMETHEUS_MULTIPROC_DIR`) names the directory if it is
//!   set at all;
//! * only when it is unset, the deprecated lowercase [`LEGACY_DIR_ENV_VAR`]
//!   (`prometheus_multiproc_dir`) does, and callers warn that it is
//!   deprecated, as Python does;
//! * a variable that is set but empty names no directory: an error, not a
//!   fall-through to the other name (Python treats an empty value as
//!   multiprocess mode off, and would never look at the legacy name).

use std::ffi::OsString;
use std::path::PathBuf;

/// The environment variable prometheus_client reads.
pub const DIR_ENV_VAR: &str = "PROMETHEUS_MULTIPROC_DIR";

/// The deprecated lowercase name, honoured only when [`DIR_ENV_VAR`] is unset.
pub const LEGACY_DIR_ENV_VAR: &str = "prometheus_multiproc_dir";

/// The directory as the environment names it (not checked to exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvDir {
    /// The directory.
    pub path: PathBuf,
    /// The variable it came from: [`DIR_ENV_VAR`] or [`LEGACY_DIR_ENV_VAR`].
    pub variable: &'static str,
}

/// Why the environment names no directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvDirError {
    /// Neither variable is set.
    #[error("{DIR_ENV_VAR} is not set")]
    Unset,
    /// The variable that decides is set but empty.
    #[error("{variable} is set but empty")]
    Empty {
        /// The variable's name.
        variable: &'static str,
    },
}

impl EnvDir {
    /// Reads the process environment by the rule of this module.
    pub fn from_env() -> Result<EnvDir, EnvDirError> {
        EnvDir::from_lookup(|name| std::env::var_os(name))
    }

    /// The same rule over any environment: `lookup` returns a variable's
    /// value, or `None` when it is unset.
    ///
    /// ```
    /// use multiprom_format::{EnvDir, EnvDirError, DIR_ENV_VAR, LEGACY_DIR_ENV_VAR};
    ///
    /// let env = |pairs: &'static [(&'static str, &'static str)]| {
    ///     move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.into())
    /// };
    /// let legacy = EnvDir::from_lookup(env(&[(LEGACY_DIR_ENV_VAR, "/tmp/m")])).unwrap();
    /// assert!(legacy.is_legacy());
    /// // An empty PROMETHEUS_MULTIPROC_DIR does not fall through to the legacy name.
    /// assert_eq!(
    ///     EnvDir::from_lookup(env(&[(DIR_ENV_VAR, ""), (LEGACY_DIR_ENV_VAR, "/tmp/m")])),
    ///     Err(EnvDirError::Empty { variable: DIR_ENV_VAR })
    /// );
    /// assert_eq!(EnvDir::from_lookup(env(&[])), Err(EnvDirError::Unset));
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<EnvDir, EnvDirError> {
        let (variable, value) = match lookup(DIR_ENV_VAR) {
            Some(value) => (DIR_ENV_VAR, value),
            None => match lookup(LEGACY_DIR_ENV_VAR) {
                Some(value) => (LEGACY_DIR_ENV_VAR, value),
                None => return Err(EnvDirError::Unset),
            },
        };
        if value.is_empty() {
            return Err(EnvDirError::Empty { variable });
        }
        Ok(EnvDir {
            path: PathBuf::from(value),
            variable,
        })
    }

    /// Whether it came from the deprecated lowercase variable.
    #[must_use]
    pub fn is_legacy(&self) -> bool {
        self.variable == LEGACY_DIR_ENV_VAR
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_uppercase_name_wins_when_set() {
        let env = EnvDir::from_lookup(lookup(&[(DIR_ENV_VAR, "/a"), (LEGACY_DIR_ENV_VAR, "/b")]))
            .unwrap();
        assert_eq!(env.path, PathBuf::from("/a"));
        assert!(!env.is_legacy());
    }

    #[test]
    fn empty_is_an_error_of_the_deciding_variable() {
        assert_eq!(
            EnvDir::from_lookup(lookup(&[(LEGACY_DIR_ENV_VAR, "")])),
            Err(EnvDirError::Empty {
                variable: LEGACY_DIR_ENV_VAR
            })
        );
    }
}
