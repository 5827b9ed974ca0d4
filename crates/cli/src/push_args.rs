//! The push flags of `serve`, `run` and `demo`, and the pushers' settings
//! they make with the `OTEL_*` variables.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use multiprom_collector::MergedFamily;
use multiprom_http::SiblingReport;
use multiprom_push::otlp::Temporality;
use multiprom_push::{
    parse_header, push_families, read_file, Credentials, OtelEnv, Protocol, PushConfig,
    PushSetupError, PusherReport, RemoteWriteVersion, DEFAULT_OTLP_ENDPOINT,
};

use crate::http_service::parse_duration;

/// Flags of the pushers.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct PushArgs {
    /// Push the merged metrics by OTLP/HTTP (protobuf) to URL; without a
    /// URL to $OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, or
    /// $OTEL_EXPORTER_OTLP_ENDPOINT/v1/metrics, or
    /// http://localhost:4318/v1/metrics. The OTEL_EXPORTER_OTLP_* variables
    /// (headers, timeout, compression, certificate, temporality),
    /// OTEL_METRIC_EXPORT_INTERVAL, OTEL_SERVICE_NAME and
    /// OTEL_RESOURCE_ATTRIBUTES apply; flags override them.
    #[arg(long = "push.otlp", value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    pub otlp: Option<String>,
    /// Push the merged metrics by Prometheus Remote-Write to URL (e.g.
    /// http://prometheus:9090/api/v1/write).
    #[arg(long = "push.remote-write", value_name = "URL")]
    pub remote_write: Option<String>,
    /// The Remote-Write version: 1 (default; every receiver takes it) or
    /// 2 (also sends each counter's, histogram's and summary's start time
    /// and the metadata inline; the receiver must take 2.0).
    #[arg(
        long = "push.remote-write.version",
        value_name = "1|2",
        value_parser = parse_remote_write_version,
        requires = "remote_write"
    )]
    pub remote_write_version: Option<RemoteWriteVersion>,
    /// How often to push (default: $OTEL_METRIC_EXPORT_INTERVAL, else 60s).
    #[arg(long = "push.interval", value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// How long one push request may take (default:
    /// $OTEL_EXPORTER_OTLP_TIMEOUT for OTLP, else 10s).
    #[arg(long = "push.timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// A header sent with every push, NAME=VALUE (repeatable; e.g.
    /// X-Scope-OrgID=tenant).
    #[arg(long = "push.header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    /// Send `Authorization: Bearer` with the token in FILE (read at start
    /// and before every push, so a rotated token is used).
    #[arg(
        long = "push.bearer-token-file",
        value_name = "FILE",
        conflicts_with = "basic_auth_user"
    )]
    pub bearer_token_file: Option<PathBuf>,
    /// Basic authentication: the user (the password from
    /// --push.basic-auth-password-file).
    #[arg(
        long = "push.basic-auth-user",
        value_name = "NAME",
        requires = "basic_auth_password_file"
    )]
    pub basic_auth_user: Option<String>,
    /// Basic authentication: the file holding the password.
    #[arg(
        long = "push.basic-auth-password-file",
        value_name = "FILE",
        requires = "basic_auth_user"
    )]
    pub basic_auth_password_file: Option<PathBuf>,
    /// Trust the CA certificates (PEM) in FILE besides the system's roots
    /// (default for OTLP: $OTEL_EXPORTER_OTLP_CERTIFICATE).
    #[arg(long = "push.ca-file", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// OTLP sums and histograms as `cumulative` (default) or `delta`
    /// (default: $OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE).
    #[arg(long = "push.otlp.temporality", value_name = "cumulative|delta", value_parser = parse_temporality)]
    pub temporality: Option<Temporality>,
    /// OTLP body compression: `gzip` (default) or `none` (default:
    /// $OTEL_EXPORTER_OTLP_COMPRESSION).
    #[arg(long = "push.otlp.compression", value_name = "gzip|none", value_parser = ["gzip", "none"])]
    pub compression: Option<String>,
    /// An OTLP resource attribute, KEY=VALUE (repeatable; added to
    /// $OTEL_RESOURCE_ATTRIBUTES; service.name defaults to
    /// $OTEL_SERVICE_NAME, else unknown_service:multiprom).
    #[arg(long = "push.otlp.resource", value_name = "KEY=VALUE")]
    pub resource: Vec<String>,
    /// Serve no HTTP endpoint: only push (needs --push.otlp or
    /// --push.remote-write).
    #[arg(long)]
    pub no_listen: bool,
}

fn parse_remote_write_version(text: &str) -> Result<RemoteWriteVersion, String> {
    match text {
        "1" | "1.0" => Ok(RemoteWriteVersion::V1),
        "2" | "2.0" => Ok(RemoteWriteVersion::V2),
        _ => Err(format!("{text:?}: 1 or 2")),
    }
}

fn parse_temporality(text: &str) -> Result<Temporality, String> {
    match text {
        "cumulative" => Ok(Temporality::Cumulative),
        "delta" => Ok(Temporality::Delta),
        _ => Err(format!("{text:?}: cumulative or delta")),
    }
}

impl PushArgs {
    /// The pushers these flags and the environment ask for; reads the
    /// credentials and CA files once, so a bad one stops the binary at
    /// start (exit 2).
    pub(crate) fn configs(&self) -> Result<Vec<PushConfig>, PushSetupError> {
        let mut configs = Vec::new();
        if self.no_listen && self.otlp.is_none() && self.remote_write.is_none() {
            return Err(PushSetupError::BadEnv(
                "--no-listen needs --push.otlp or --push.remote-write: nothing would leave the host".into(),
            ));
        }
        let headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let credentials = match (
            &self.bearer_token_file,
            &self.basic_auth_user,
            &self.basic_auth_password_file,
        ) {
            (Some(file), _, _) => Some(Credentials::BearerTokenFile(file.clone())),
            (None, Some(user), Some(file)) => Some(Credentials::BasicAuth {
                username: user.clone(),
                password_file: file.clone(),
            }),
            _ => None,
        };
        if let Some(credentials) = &credentials {
            credentials.check()?;
        }
        let ca = self.ca_file.as_deref().map(read_file).transpose()?;
        if let Some(url) = &self.otlp {
            let env = OtelEnv::read(|name| std::env::var(name).ok())?;
            let url = if url.is_empty() {
                env.endpoint
                    .clone()
                    .unwrap_or_else(|| DEFAULT_OTLP_ENDPOINT.to_owned())
            } else {
                url.clone()
            };
            let mut resource = env.resource.clone();
            for pair in &self.resource {
                let (key, value) = pair.split_once('=').ok_or_else(|| {
                    PushSetupError::BadEnv(format!("--push.otlp.resource {pair:?}: KEY=VALUE"))
                })?;
                resource.retain(|(k, _)| k != key);
                resource.push((key.to_owned(), value.to_owned()));
            }
            if !resource.iter().any(|(k, _)| k == "service.name") {
                resource.push(("service.name".into(), "unknown_service:multiprom".into()));
            }
            let gzip = match self.compression.as_deref() {
                Some(c) => c == "gzip",
                None => env.gzip.unwrap_or(true),
            };
            let protocol = Protocol::Otlp {
                temporality: self.temporality.or(env.temporality).unwrap_or_default(),
                resource,
                gzip,
            };
            let mut config = PushConfig::new(protocol, &url)?;
            config.interval = self.interval.or(env.interval).unwrap_or(config.interval);
            config.timeout = self.timeout.or(env.timeout).unwrap_or(config.timeout);
            config.headers = env.headers.clone();
            for (name, value) in &headers {
                config
                    .headers
                    .retain(|(n, _)| !n.eq_ignore_ascii_case(name));
                config.headers.push((name.clone(), value.clone()));
            }
            config.credentials = credentials.clone();
            config.ca_pem = match (&ca, &env.certificate) {
                (Some(pem), _) => Some(pem.clone()),
                (None, Some(path)) => Some(read_file(path)?),
                (None, None) => None,
            };
            configs.push(config);
        }
        if let Some(url) = &self.remote_write {
            let version = self.remote_write_version.unwrap_or_default();
            let mut config = PushConfig::new(Protocol::RemoteWrite { version }, url)?;
            let env_interval = OtelEnv::read(|name| std::env::var(name).ok())
                .ok()
                .and_then(|env| env.interval);
            config.interval = self.interval.or(env_interval).unwrap_or(config.interval);
            config.timeout = self.timeout.unwrap_or(config.timeout);
            config.headers = headers;
            config.credentials = credentials;
            config.ca_pem = ca;
            configs.push(config);
        }
        for config in &configs {
            config.check()?;
        }
        Ok(configs)
    }
}

/// The pushers' self-metrics and status lines, reported through the HTTP
/// endpoint.
#[derive(Debug)]
pub(crate) struct PushersReport(pub Vec<PusherReport>);

impl SiblingReport for PushersReport {
    fn families(&self) -> Vec<MergedFamily> {
        push_families(&self.0)
    }

    fn status_line(&self) -> String {
        self.0
            .iter()
            .map(|p| {
                let state = match (p.stats.failing(), p.stats.last_success()) {
                    (Some(why), _) => format!("failing: {why}"),
                    (None, Some(_)) => "ok".to_owned(),
                    (None, None) => "no push yet".to_owned(),
                };
                format!(
                    "Pushing {} to {}: {} pushes, {} failed, {} bytes sent; {state}.",
                    p.protocol,
                    p.receiver,
                    p.stats.pushes(),
                    p.stats.failures(),
                    p.stats.bytes()
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The report of `pushers`, if there are any.
pub(crate) fn report(pushers: &[multiprom_push::Pusher]) -> Option<Arc<dyn SiblingReport>> {
    (!pushers.is_empty()).then(|| {
        Arc::new(PushersReport(
            pushers.iter().map(multiprom_push::Pusher::report).collect(),
        )) as Arc<dyn SiblingReport>
    })
}
