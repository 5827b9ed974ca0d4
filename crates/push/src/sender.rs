//! One request to a receiver, and what its answer means: accepted, worth
//! retrying (and when), or refused.

use std::time::{Duration, SystemTime};

use reqwest::header::{
    HeaderMap, HeaderName, HeaderValue, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER, USER_AGENT,
};
use reqwest::{Client, StatusCode};

use crate::config::{Credentials, Protocol, PushConfig, PushSetupError, RemoteWriteVersion};
use crate::remote_write::Written;

/// What became of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Accepted (2xx). OTLP's answer may say some points were rejected:
    /// the body is kept for that; a Remote-Write 2.0 receiver says what
    /// it wrote in headers.
    Accepted {
        /// The answer's body.
        body: Vec<u8>,
        /// Remote-Write 2.0's written counts, when the answer has them.
        written: Option<Written>,
    },
    /// Not now: a network, TLS or DNS failure, a timeout, or a status the
    /// protocol calls retryable; `after` is the receiver's `Retry-After`.
    Retry {
        /// Why, for the log.
        why: String,
        /// When the receiver asked to be tried again.
        after: Option<Duration>,
    },
    /// Refused: sending the same again would be refused again.
    Refused(String),
}

/// Sends one pusher's requests.
#[derive(Debug)]
pub(crate) struct Sender {
    client: Client,
    protocol: Protocol,
    url: reqwest::Url,
    headers: HeaderMap,
    credentials: Option<Credentials>,
    /// What the credentials files held when last read.
    authorization: Option<Authorization>,
    /// Whether the credentials file was unreadable at the last try (said
    /// once).
    unreadable: bool,
}

impl Sender {
    pub(crate) fn new(config: &PushConfig) -> Result<Sender, PushSetupError> {
        let mut builder = Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .tls_built_in_native_certs(true)
            // A receiver's redirect of a POST is a misconfiguration to see
            // in the log, not to follow with the body dropped.
            .redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = &config.ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| PushSetupError::Tls(format!("CA file: {e}")))?;
            if certificates.is_empty() {
                return Err(PushSetupError::Tls(
                    "CA file: no PEM certificate in it".into(),
                ));
            }
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let client = builder
            .build()
            .map_err(|e| PushSetupError::Tls(format!("cannot make the HTTP client: {e}")))?;
        let mut headers = HeaderMap::new();
        let version = concat!("multiprom/", env!("CARGO_PKG_VERSION"));
        headers.insert(USER_AGENT, HeaderValue::from_static(version));
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        );
        match &config.protocol {
            Protocol::Otlp { gzip, .. } => {
                if *gzip {
                    headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                }
            }
            Protocol::RemoteWrite { version } => {
                // As each specification asks: 1.0's bare content type
                // means `prometheus.WriteRequest`; 2.0 names its message.
                let (content_type, version) = match version {
                    RemoteWriteVersion::V1 => ("application/x-protobuf", "0.1.0"),
                    RemoteWriteVersion::V2 => (
                        "application/x-protobuf;proto=io.prometheus.write.v2.Request",
                        "2.0.0",
                    ),
                };
                headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
                headers.insert(CONTENT_ENCODING, HeaderValue::from_static("snappy"));
                headers.insert(
                    HeaderName::from_static("x-prometheus-remote-write-version"),
                    HeaderValue::from_static(version),
                );
            }
        }
        for (name, value) in &config.headers {
            let bad = || PushSetupError::BadHeader(format!("{name}={value}"));
            headers.insert(
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?,
                HeaderValue::from_str(value).map_err(|_| bad())?,
            );
        }
        Ok(Sender {
            client,
            protocol: config.protocol.clone(),
            url: config.url.clone(),
            headers,
            credentials: config.credentials.clone(),
            authorization: None,
            unreadable: false,
        })
    }

    /// Sends `body` once.
    pub(crate) async fn send(&mut self, body: Vec<u8>) -> Outcome {
        self.reread_credentials();
        let mut request = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(body);
        request = match &self.authorization {
            Some(Authorization::Bearer(token)) => request.bearer_auth(token),
            Some(Authorization::Basic(user, password)) => request.basic_auth(user, Some(password)),
            None => request,
        };
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                return Outcome::Retry {
                    why: describe(&e),
                    after: None,
                }
            }
        };
        let status = response.status();
        let after = retry_after(response.headers(), SystemTime::now());
        let written = Written::answered(response.headers());
        // The answer's body: bounded, as a receiver may send anything.
        let answer = read_bounded(response).await;
        if status.is_success() {
            return Outcome::Accepted {
                body: answer,
                written,
            };
        }
        let text = String::from_utf8_lossy(&answer[..answer.len().min(300)])
            .trim()
            .to_owned();
        let why = if text.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {text}")
        };
        if retryable(&self.protocol, status) {
            Outcome::Retry { why, after }
        } else if status == StatusCode::UNSUPPORTED_MEDIA_TYPE
            && self.protocol
                == (Protocol::RemoteWrite {
                    version: RemoteWriteVersion::V2,
                })
        {
            // The specification's answer of a receiver that does not take
            // the message named in Content-Type: say what it means here.
            Outcome::Refused(format!(
                "{why} (the receiver does not take Remote-Write 2.0; \
                 push Remote-Write 1.0 to it instead)"
            ))
        } else {
            Outcome::Refused(why)
        }
    }

    fn reread_credentials(&mut self) {
        let Some(credentials) = &self.credentials else {
            return;
        };
        match authorization(credentials) {
            Ok(value) => {
                self.authorization = Some(value);
                self.unreadable = false;
            }
            Err(e) => {
                if !self.unreadable {
                    tracing::warn!("{e}; pushing with the credentials read before");
                }
                self.unreadable = true;
            }
        }
    }
}

/// The statuses worth sending again: OTLP/HTTP names 429, 502, 503 and
/// 504; Remote-Write every 5xx and 429.
fn retryable(protocol: &Protocol, status: StatusCode) -> bool {
    match protocol {
        Protocol::Otlp { .. } => matches!(status.as_u16(), 429 | 502 | 503 | 504),
        Protocol::RemoteWrite { .. } => status.is_server_error() || status.as_u16() == 429,
    }
}

/// `Retry-After` as seconds or an HTTP date, from `now`.
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(text).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// At most 64 KiB of an answer (OTLP's partial success, an error text).
async fn read_bounded(mut response: reqwest::Response) -> Vec<u8> {
    const LIMIT: usize = 64 << 10;
    let mut out = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = LIMIT - out.len();
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= LIMIT {
            break;
        }
    }
    out
}

/// What a request is authorised with.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Authorization {
    Bearer(String),
    Basic(String, String),
}

/// What `credentials`' files hold now (trimmed: a file ends with a newline).
fn authorization(credentials: &Credentials) -> Result<Authorization, PushSetupError> {
    let text = |path| {
        crate::config::read_file(path)
            .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
    };
    Ok(match credentials {
        Credentials::BearerTokenFile(path) => Authorization::Bearer(text(path)?),
        Credentials::BasicAuth {
            username,
            password_file,
        } => Authorization::Basic(username.clone(), text(password_file)?),
    })
}

/// What failed, in words, down to the cause (a TLS or DNS error is several
/// errors deep in reqwest's).
fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connect() {
        "cannot connect".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_or_a_date() {
        let mut headers = HeaderMap::new();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(retry_after(&headers, now), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(7)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:30 GMT"),
        );
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(30)));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers, now), None);
    }

    #[test]
    fn remote_write_headers_by_version() {
        let headers = |version| {
            let protocol = Protocol::RemoteWrite { version };
            let config = PushConfig::new(protocol, "http://localhost:9090/api/v1/write").unwrap();
            let sender = Sender::new(&config).unwrap();
            let get = |name: &str| {
                sender
                    .headers
                    .get(name)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned()
            };
            (
                get("content-type"),
                get("content-encoding"),
                get("x-prometheus-remote-write-version"),
            )
        };
        assert_eq!(
            headers(RemoteWriteVersion::V1),
            (
                "application/x-protobuf".to_owned(),
                "snappy".to_owned(),
                "0.1.0".to_owned()
            )
        );
        assert_eq!(
            headers(RemoteWriteVersion::V2),
            (
                "application/x-protobuf;proto=io.prometheus.write.v2.Request".to_owned(),
                "snappy".to_owned(),
                "2.0.0".to_owned()
            )
        );
    }

    #[test]
    fn retryable_statuses() {
        let otlp = Protocol::Otlp {
            temporality: crate::otlp::Temporality::Cumulative,
            resource: vec![],
            gzip: true,
        };
        for (status, otlp_retries, rw_retries) in [
            (429, true, true),
            (500, false, true),
            (502, true, true),
            (503, true, true),
            (504, true, true),
            (400, false, false),
            (401, false, false),
            (413, false, false),
        ] {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(retryable(&otlp, status), otlp_retries, "{status}");
            assert_eq!(
                retryable(
                    &Protocol::RemoteWrite {
                        version: RemoteWriteVersion::V1
                    },
                    status
                ),
                rw_retries,
                "{status}"
            );
        }
    }
}
