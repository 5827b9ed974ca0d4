//! The OpenTelemetry exporter's environment variables, as the OTLP
//! exporter and SDK specifications define them: what an OpenTelemetry user
//! has already set for every other exporter.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::PushSetupError;
use crate::otlp::Temporality;

/// Where OTLP/HTTP metrics go when nothing says.
pub const DEFAULT_OTLP_ENDPOINT: &str = "http://localhost:4318/v1/metrics";

/// What the `OTEL_*` variables say (each `None` or empty when unset).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct OtelEnv {
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` as it is, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/metrics` appended.
    pub endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_HEADERS`, then `_METRICS_HEADERS` (which win).
    pub headers: Vec<(String, String)>,
    /// `OTEL_EXPORTER_OTLP_METRICS_TIMEOUT` or `_TIMEOUT` (milliseconds).
    pub timeout: Option<Duration>,
    /// `OTEL_EXPORTER_OTLP_METRICS_COMPRESSION` or `_COMPRESSION`: gzip?
    pub gzip: Option<bool>,
    /// `OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE` or `_CERTIFICATE`.
    pub certificate: Option<PathBuf>,
    /// `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds).
    pub interval: Option<Duration>,
    /// `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`.
    pub temporality: Option<Temporality>,
    /// `OTEL_RESOURCE_ATTRIBUTES`, then `OTEL_SERVICE_NAME` as
    /// `service.name` (which wins).
    pub resource: Vec<(String, String)>,
}

impl OtelEnv {
    /// Reads the variables through `var` (`std::env::var(..).ok()` in a
    /// binary); an unparsable value is an error naming the variable.
    pub fn read(var: impl Fn(&str) -> Option<String>) -> Result<OtelEnv, PushSetupError> {
        let get = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let bad = |name: &str, value: &str, what: &str| {
            PushSetupError::BadEnv(format!("{name}={value:?}: {what}"))
        };
        let metrics_or = |suffix: &str| {
            let specific = format!("OTEL_EXPORTER_OTLP_METRICS_{suffix}");
            match get(&specific) {
                Some(v) => Some((specific, v)),
                None => {
                    let general = format!("OTEL_EXPORTER_OTLP_{suffix}");
                    get(&general).map(|v| (general, v))
                }
            }
        };
        let millis = |name: &str, value: &str| {
            value
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad(name, value, "not a whole number of milliseconds"))
        };
        let mut env = OtelEnv {
            endpoint: get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").or_else(|| {
                get("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .map(|base| format!("{}/v1/metrics", base.trim_end_matches('/')))
            }),
            ..OtelEnv::default()
        };
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
        ] {
            if let Some(value) = get(name) {
                let pairs = pairs(&value).ok_or_else(|| bad(name, &value, "not key=value,..."))?;
                for (key, value) in pairs {
                    env.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(&key));
                    env.headers.push((key, value));
                }
            }
        }
        if let Some((name, value)) = metrics_or("TIMEOUT") {
            env.timeout = Some(millis(&name, &value)?);
        }
        if let Some((name, value)) = metrics_or("COMPRESSION") {
            env.gzip = Some(match value.as_str() {
                "gzip" => true,
                "none" => false,
                _ => return Err(bad(&name, &value, "gzip or none")),
            });
        }
        env.certificate = metrics_or("CERTIFICATE").map(|(_, v)| PathBuf::from(v));
        if let Some(value) = get("OTEL_METRIC_EXPORT_INTERVAL") {
            env.interval =
                Some(millis("OTEL_METRIC_EXPORT_INTERVAL", &value)?).filter(|d| !d.is_zero());
        }
        let name = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE";
        if let Some(value) = get(name) {
            env.temporality = Some(match value.to_ascii_lowercase().as_str() {
                "cumulative" => Temporality::Cumulative,
                // Low memory is delta for counters and histograms, the
                // only cumulative kinds a Prometheus directory has
                // (up-down counters are gauges here).
                "delta" | "lowmemory" => Temporality::Delta,
                _ => return Err(bad(name, &value, "cumulative, delta or lowmemory")),
            });
        }
        if let Some(value) = get("OTEL_RESOURCE_ATTRIBUTES") {
            env.resource = pairs(&value)
                .ok_or_else(|| bad("OTEL_RESOURCE_ATTRIBUTES", &value, "not key=value,..."))?;
        }
        if let Some(service) = get("OTEL_SERVICE_NAME") {
            env.resource.retain(|(k, _)| k != "service.name");
            env.resource.push(("service.name".into(), service));
        }
        Ok(env)
    }
}

/// `key1=value1,key2=value2`, values percent-decoded (as the W3C Baggage
/// format the specification names for both variables).
fn pairs(text: &str) -> Option<Vec<(String, String)>> {
    text.split(',')
        .filter(|item| !item.trim().is_empty())
        .map(|item| {
            let (key, value) = item.split_once('=')?;
            let key = key.trim();
            let value = percent_encoding::percent_decode_str(value.trim())
                .decode_utf8()
                .ok()?;
            (!key.is_empty()).then(|| (key.to_owned(), value.into_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<OtelEnv, PushSetupError> {
        OtelEnv::read(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn nothing_set() {
        assert_eq!(read(&[]).unwrap(), OtelEnv::default());
    }

    #[test]
    fn the_specific_variable_wins_and_the_base_url_gains_its_path() {
        let env = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]).unwrap();
        assert_eq!(
            env.endpoint.as_deref(),
            Some("http://collector:4318/v1/metrics")
        );
        let env = read(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://m/ingest"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "none"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "15000"),
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "Delta"),
        ])
        .unwrap();
        assert_eq!(env.endpoint.as_deref(), Some("https://m/ingest"));
        assert_eq!(env.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(env.gzip, Some(false));
        assert_eq!(env.interval, Some(Duration::from_secs(15)));
        assert_eq!(env.temporality, Some(Temporality::Delta));
    }

    #[test]
    fn headers_and_resource_attributes_are_percent_decoded() {
        let env = read(&[
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x=1"),
            ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "X=2"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=ignored,deployment.environment=prod%2Ceu",
            ),
            ("OTEL_SERVICE_NAME", "checkout"),
        ])
        .unwrap();
        assert_eq!(
            env.headers,
            [("api-key".into(), "a b".into()), ("X".into(), "2".into())]
        );
        assert_eq!(
            env.resource,
            [
                ("deployment.environment".into(), "prod,eu".into()),
                ("service.name".into(), "checkout".into())
            ]
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
            (
                "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
                "sometimes",
            ),
        ] {
            let err = read(&[(name, value)]).unwrap_err().to_string();
            assert!(err.starts_with(name), "{err}");
        }
    }
}
