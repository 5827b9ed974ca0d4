//! Finding the multiprocess directory: `--dir`, else the environment by
//! prometheus_client's rule ([`EnvDir::from_env`], where the rule is
//! written down), then checking that it is a directory.

use std::path::PathBuf;

use multiprom_format::{EnvDir, EnvDirError, DIR_ENV_VAR, LEGACY_DIR_ENV_VAR};

/// Why no usable directory was found. Displayed as one line for people.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DirError {
    /// Neither `--dir` nor either environment variable.
    #[error("no directory: pass --dir DIR or set {DIR_ENV_VAR}")]
    Unset,
    /// The environment names no directory (a variable set but empty).
    #[error("no directory: {0}")]
    Env(EnvDirError),
    /// The path does not exist.
    #[error("{}: no such directory", .0.display())]
    Missing(PathBuf),
    /// The path exists but is not a directory.
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// The path cannot be looked at (a symbolic link loop, a parent
    /// without permission).
    #[error("{}: cannot look at it: {}", .0.display(), .1)]
    Unreachable(PathBuf, std::io::Error),
}

/// Resolves the directory from `--dir` or the environment and checks that it
/// is a directory. The legacy variable prints a deprecation warning.
pub(crate) fn resolve(flag: Option<PathBuf>) -> Result<PathBuf, DirError> {
    let dir = match flag {
        Some(dir) => dir,
        None => match EnvDir::from_env() {
            Ok(env) => {
                if env.is_legacy() {
                    eprintln!(
                        "multiprom: warning: {LEGACY_DIR_ENV_VAR} is deprecated, use {DIR_ENV_VAR} (as prometheus_client does)"
                    );
                }
                env.path
            }
            Err(EnvDirError::Unset) => return Err(DirError::Unset),
            Err(e) => return Err(DirError::Env(e)),
        },
    };
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => Ok(dir),
        Ok(_) => Err(DirError::NotADirectory(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(DirError::Missing(dir)),
        Err(e) => Err(DirError::Unreachable(dir, e)),
    }
}
