//! Finding the multiprocess directory: `--dir`, then `PROMETHEUS_MULTIPROC_DIR`,
//! then the deprecated lowercase `prometheus_multiproc_dir`.

use std::path::PathBuf;

/// The environment variable Python's `prometheus_client` reads.
pub const ENV_VAR: &str = "PROMETHEUS_MULTIPROC_DIR";
/// The deprecated lowercase name, still honoured (with a warning) as Python does.
pub const LEGACY_ENV_VAR: &str = "prometheus_multiproc_dir";

/// Why no usable directory was found. Displayed as one line for people.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// Neither `--dir` nor either environment variable.
    #[error("no directory: pass --dir DIR or set {ENV_VAR}")]
    Unset,
    /// The path does not exist.
    #[error("{}: no such directory", .0.display())]
    Missing(PathBuf),
    /// The path exists but is not a directory.
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
}

/// Resolves the directory from `--dir` or the environment and checks that it
/// is a directory. The legacy variable prints a deprecation warning.
pub fn resolve(flag: Option<PathBuf>) -> Result<PathBuf, DirError> {
    let dir = match flag {
        Some(dir) => dir,
        None => match std::env::var_os(ENV_VAR).filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => match std::env::var_os(LEGACY_ENV_VAR).filter(|v| !v.is_empty()) {
                Some(dir) => {
                    eprintln!(
                        "multiprom: warning: {LEGACY_ENV_VAR} is deprecated, use {ENV_VAR} (as prometheus_client does)"
                    );
                    PathBuf::from(dir)
                }
                None => return Err(DirError::Unset),
            },
        },
    };
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => Ok(dir),
        Ok(_) => Err(DirError::NotADirectory(dir)),
        Err(_) => Err(DirError::Missing(dir)),
    }
}
