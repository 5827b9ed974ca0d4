//! [`PushConfig`]: where and how one pusher pushes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Url;

use crate::otlp::Temporality;

/// The protocol a pusher speaks.
#[derive(Debug, Clone, PartialEq)]
pub enum Protocol {
    /// OTLP/HTTP, protobuf, to a `/v1/metrics` URL.
    Otlp {
        /// Cumulative (the default) or delta sums and histograms.
        temporality: Temporality,
        /// Resource attributes (`service.name` and the like).
        resource: Vec<(String, String)>,
        /// Whether bodies are gzipped (OTLP's `gzip` compression).
        gzip: bool,
    },
    /// Prometheus Remote-Write (protobuf, snappy).
    RemoteWrite {
        /// 1.0 (the default) or 2.0.
        version: RemoteWriteVersion,
    },
}

/// The version of Prometheus Remote-Write a pusher speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RemoteWriteVersion {
    /// 1.0: `prometheus.WriteRequest`, which every receiver takes.
    #[default]
    V1,
    /// 2.0: `io.prometheus.write.v2.Request`, which also carries each
    /// cumulative series' start time and its metadata inline; only some
    /// receivers take it (Prometheus 3's receiver does unless told
    /// otherwise).
    V2,
}

impl Protocol {
    /// `otlp` or `remote_write`, as the self-metrics label it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Protocol::Otlp { .. } => "otlp",
            Protocol::RemoteWrite { .. } => "remote_write",
        }
    }
}

/// Credentials sent with each push, read from files (read again on every
/// push, so a rotated token is picked up; the last good one is kept while a
/// file cannot be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// `Authorization: Bearer <the file's content, trimmed>`.
    BearerTokenFile(PathBuf),
    /// `Authorization: Basic`, the password from a file (trimmed).
    BasicAuth {
        /// The user name.
        username: String,
        /// The file holding the password.
        password_file: PathBuf,
    },
}

impl Credentials {
    /// Reads the files once: at start, so one that cannot be read stops
    /// the binary with a clear error rather than failing every push.
    pub fn check(&self) -> Result<(), PushSetupError> {
        match self {
            Credentials::BearerTokenFile(path) => read_file(path).map(drop),
            Credentials::BasicAuth { password_file, .. } => read_file(password_file).map(drop),
        }
    }
}

/// Why a push cannot be set up (the binary exits with status 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PushSetupError {
    /// The URL is not an `http` or `https` URL.
    #[error("{url:?} is not an http:// or https:// URL{}", why.as_ref().map(|w| format!(": {w}")).unwrap_or_default())]
    BadUrl {
        /// As given.
        url: String,
        /// Why, when the parser said.
        why: Option<String>,
    },
    /// A credentials or CA file cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A CA file holds no certificate, or the HTTP client cannot be made.
    #[error("{0}")]
    Tls(String),
    /// An `OTEL_*` variable holds what it cannot.
    #[error("{0}")]
    BadEnv(String),
    /// A header is not a valid HTTP header.
    #[error("{0:?} is not a valid header (NAME=VALUE or NAME: VALUE)")]
    BadHeader(String),
}

/// Where and how one pusher pushes.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// The protocol.
    pub protocol: Protocol,
    /// The receiver's URL.
    pub url: Url,
    /// How often the view is pushed.
    pub interval: Duration,
    /// How long one request may take.
    pub timeout: Duration,
    /// Headers sent with each request.
    pub headers: Vec<(String, String)>,
    /// Credentials, if any.
    pub credentials: Option<Credentials>,
    /// Certificates (PEM) trusted besides the system's roots.
    pub ca_pem: Option<Vec<u8>>,
}

impl PushConfig {
    /// A configuration for `url` (checked: `http` or `https`), every
    /// 60 seconds with a 10 second timeout, no headers or credentials.
    pub fn new(protocol: Protocol, url: &str) -> Result<Self, PushSetupError> {
        let bad = |why: Option<String>| PushSetupError::BadUrl {
            url: url.to_owned(),
            why,
        };
        let parsed = Url::parse(url).map_err(|e| bad(Some(e.to_string())))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(bad(None));
        }
        Ok(PushConfig {
            protocol,
            url: parsed,
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
            headers: Vec::new(),
            credentials: None,
            ca_pem: None,
        })
    }

    /// Makes the HTTP client this configuration asks for and drops it: a
    /// CA file without a certificate fails here, at start.
    pub fn check(&self) -> Result<(), PushSetupError> {
        crate::sender::Sender::new(self).map(drop)
    }

    /// The receiver as logs and metrics name it: without user, password
    /// or query (which may hold secrets).
    #[must_use]
    pub fn receiver(&self) -> String {
        let mut url = self.url.clone();
        let _ = url.set_username("");
        let _ = url.set_password(None);
        url.set_query(None);
        url.to_string()
    }
}

/// Reads a credentials or CA file (at start: one that cannot be read
/// stops the binary with a clear error).
pub fn read_file(path: &Path) -> Result<Vec<u8>, PushSetupError> {
    std::fs::read(path).map_err(|source| PushSetupError::Unreadable {
        path: path.to_owned(),
        source,
    })
}

/// A header given as `NAME=VALUE` or `NAME: VALUE`.
pub fn parse_header(text: &str) -> Result<(String, String), PushSetupError> {
    let (name, value) = text
        .split_once(':')
        .filter(|(n, _)| !n.contains('='))
        .or_else(|| text.split_once('='))
        .ok_or_else(|| PushSetupError::BadHeader(text.to_owned()))?;
    let (name, value) = (name.trim(), value.trim());
    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err()
        || reqwest::header::HeaderValue::from_str(value).is_err()
    {
        return Err(PushSetupError::BadHeader(text.to_owned()));
    }
    Ok((name.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REMOTE_WRITE: Protocol = Protocol::RemoteWrite {
        version: RemoteWriteVersion::V1,
    };

    #[test]
    fn urls() {
        assert!(PushConfig::new(REMOTE_WRITE, "http://localhost:9090/api/v1/write").is_ok());
        assert!(PushConfig::new(REMOTE_WRITE, "localhost:9090").is_err());
        assert!(PushConfig::new(REMOTE_WRITE, "ftp://x/").is_err());
        assert!(PushConfig::new(REMOTE_WRITE, "http://").is_err());
        let config = PushConfig::new(REMOTE_WRITE, "https://u:p@h:1/w?token=s").unwrap();
        assert_eq!(config.receiver(), "https://h:1/w");
    }

    #[test]
    fn headers() {
        assert_eq!(
            parse_header("X-Scope-OrgID=tenant").unwrap(),
            ("X-Scope-OrgID".into(), "tenant".into())
        );
        assert_eq!(
            parse_header("Authorization: Basic a==").unwrap(),
            ("Authorization".into(), "Basic a==".into())
        );
        assert!(parse_header("novalue").is_err());
        assert!(parse_header("bad name=x").is_err());
    }
}
