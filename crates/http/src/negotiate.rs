//! Content negotiation: `Accept` picks the format, `Accept-Encoding` gzip.
//!
//! Prometheus lists every format it can read with a q-value, e.g.
//! `application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1`,
//! so q-values decide, not the order. Python's `prometheus_client` ignores
//! q-values (any mention of OpenMetrics wins); this module follows RFC 9110:
//! the most specific range that matches a format gives its q, `q=0` means
//! "not acceptable", and the higher q wins. On a tie an explicit OpenMetrics
//! range wins (as in Python); a bare `*/*` gets text 0.0.4.
//!
//! The Prometheus protobuf format is served only to a client that names it
//! exactly (`application/vnd.google.protobuf` with
//! `proto=io.prometheus.client.MetricFamily` and `encoding=delimited`, as
//! Prometheus sends it when it scrapes native histograms) and gives it a
//! higher q than every text format: no wildcard stands for it, so a browser
//! or `curl` never gets binary, and on a tie text wins.

use multiprom_collector::Format;

/// What a `/metrics` answer is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exposition {
    /// A text format: Prometheus text 0.0.4 or OpenMetrics 1.0.0.
    Text(Format),
    /// The Prometheus protobuf format: length-delimited `MetricFamily`
    /// messages.
    Protobuf,
}

/// The media type of the Prometheus protobuf format.
const PROTOBUF_TYPE: &str = "application/vnd.google.protobuf";
/// Its `proto` parameter: the message type.
const PROTOBUF_MESSAGE: &str = "io.prometheus.client.MetricFamily";

/// One media range of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
struct MediaRange<'a> {
    /// `type/subtype`, as sent (compared case-insensitively).
    media_type: &'a str,
    /// The `version` parameter, if any.
    version: Option<&'a str>,
    /// The `proto` parameter (protobuf's message type), if any.
    proto: Option<&'a str>,
    /// The `encoding` parameter (protobuf's framing), if any.
    encoding: Option<&'a str>,
    /// The q-value, 0.0 to 1.0.
    q: f32,
}

/// Splits a header value into comma-separated elements, each into
/// `;`-separated parts. Ranges with an unparsable q-value are dropped.
fn parse_ranges(header: &str) -> impl Iterator<Item = MediaRange<'_>> {
    header.split(',').filter_map(|element| {
        let mut parts = element.split(';').map(str::trim);
        let media_type = parts.next().filter(|t| !t.is_empty())?;
        let mut range = MediaRange {
            media_type,
            version: None,
            proto: None,
            encoding: None,
            q: 1.0,
        };
        for param in parts {
            let Some((name, value)) = param.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            match name.trim().to_ascii_lowercase().as_str() {
                "q" => range.q = parse_q(value)?,
                "version" => range.version = Some(value),
                "proto" => range.proto = Some(value),
                "encoding" => range.encoding = Some(value),
                _ => {}
            }
        }
        Some(range)
    })
}

/// A q-value: a number from 0 to 1 (RFC 9110 allows at most three decimals;
/// more are accepted).
fn parse_q(value: &str) -> Option<f32> {
    let q: f32 = value.parse().ok()?;
    (0.0..=1.0).contains(&q).then_some(q)
}

/// How well a range matches a format: 3 exact type, 2 `type/*`, 1 `*/*`.
fn specificity(range: &MediaRange<'_>, format: Format) -> Option<u8> {
    let (kind, sub) = range.media_type.split_once('/')?;
    let (want_kind, want_sub) = match format {
        Format::Prometheus => ("text", "plain"),
        Format::OpenMetrics => ("application", "openmetrics-text"),
    };
    if kind == "*" && sub == "*" {
        return Some(1);
    }
    if !kind.eq_ignore_ascii_case(want_kind) {
        return None;
    }
    if sub == "*" {
        return Some(2);
    }
    if !sub.eq_ignore_ascii_case(want_sub) {
        return None;
    }
    let version_ok = match (format, range.version) {
        (_, None) => true,
        // Text 0.0.4 is also valid for readers of the newer text versions.
        (Format::Prometheus, Some(_)) => true,
        // 0.0.1 is the pre-1.0 name of the same format.
        (Format::OpenMetrics, Some(v)) => v == "1.0.0" || v == "0.0.1",
    };
    version_ok.then_some(3)
}

/// The q-value `header` gives `format`, with the specificity it came from,
/// or `None` if no range matches it.
fn quality(header: &str, format: Format) -> Option<(u8, f32)> {
    let mut best: Option<(u8, f32)> = None;
    for range in parse_ranges(header) {
        let Some(spec) = specificity(&range, format) else {
            continue;
        };
        best = match best {
            // A more specific range overrides; equally specific ones (say two
            // OpenMetrics versions) count with their best q.
            Some((s, q)) if s > spec => Some((s, q)),
            Some((s, q)) if s == spec => Some((s, q.max(range.q))),
            _ => Some((spec, range.q)),
        };
    }
    best
}

/// The format to answer with, or `None` if the client refuses both (406).
///
/// No `Accept` header, or one naming neither format, gets text 0.0.4, as
/// Prometheus' own client libraries do.
///
/// ```
/// use multiprom_collector::Format;
/// use multiprom_http::negotiate::choose_format;
///
/// let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1";
/// assert_eq!(choose_format(Some(prometheus)), Some(Format::OpenMetrics));
/// assert_eq!(choose_format(Some("text/plain;q=0.9,application/openmetrics-text;q=0.2")), Some(Format::Prometheus));
/// assert_eq!(choose_format(Some("*/*")), Some(Format::Prometheus));
/// assert_eq!(choose_format(None), Some(Format::Prometheus));
/// assert_eq!(choose_format(Some("text/plain;q=0,application/openmetrics-text;q=0")), None);
/// ```
#[must_use]
pub fn choose_format(accept: Option<&str>) -> Option<Format> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(Format::Prometheus);
    };
    let text = quality(accept, Format::Prometheus);
    let om = quality(accept, Format::OpenMetrics);
    let (text_q, om_q) = match (text, om) {
        (None, None) => return Some(Format::Prometheus),
        (t, o) => (t.map_or(0.0, |(_, q)| q), o.map_or(0.0, |(_, q)| q)),
    };
    let om_explicit = om.is_some_and(|(spec, _)| spec == 3);
    if om_q > 0.0 && (om_q > text_q || (om_q == text_q && om_explicit)) {
        Some(Format::OpenMetrics)
    } else if text_q > 0.0 {
        Some(Format::Prometheus)
    } else {
        None
    }
}

/// The q-value `header` gives the Prometheus protobuf format (delimited
/// `MetricFamily` messages): the best of the ranges that name it exactly,
/// `None` if none does.
fn protobuf_quality(header: &str) -> Option<f32> {
    parse_ranges(header)
        .filter(|range| {
            range.media_type.eq_ignore_ascii_case(PROTOBUF_TYPE)
                && range.proto == Some(PROTOBUF_MESSAGE)
                && range.encoding == Some("delimited")
        })
        .map(|range| range.q)
        .reduce(f32::max)
}

/// What to answer `/metrics` with, or `None` if the client refuses every
/// format (406): the protobuf format when the client names it with a q
/// above that of every text format, else [`choose_format`]'s text format.
///
/// ```
/// use multiprom_collector::Format;
/// use multiprom_http::negotiate::{choose_exposition, Exposition};
///
/// // Prometheus 2.x with native histograms on.
/// let native = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// assert_eq!(choose_exposition(Some(native)), Some(Exposition::Protobuf));
/// let default = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// assert_eq!(choose_exposition(Some(default)), Some(Exposition::Text(Format::OpenMetrics)));
/// assert_eq!(choose_exposition(Some("*/*")), Some(Exposition::Text(Format::Prometheus)));
/// ```
#[must_use]
pub fn choose_exposition(accept: Option<&str>) -> Option<Exposition> {
    let text = choose_format(accept);
    let Some(protobuf_q) = accept.and_then(protobuf_quality).filter(|&q| q > 0.0) else {
        return text.map(Exposition::Text);
    };
    let Some(format) = text else {
        return Some(Exposition::Protobuf);
    };
    let accept = accept.unwrap_or_default();
    // `choose_format` answers text 0.0.4 to a header that names no text
    // format; such a header gives text nothing.
    let text_q = quality(accept, format).map_or(0.0, |(_, q)| q);
    if protobuf_q > text_q {
        Some(Exposition::Protobuf)
    } else {
        Some(Exposition::Text(format))
    }
}

/// Whether `Accept-Encoding` allows gzip (`gzip`, `x-gzip` or `*` with a
/// q-value above 0; an explicit `gzip;q=0` refuses it even with `*`).
///
/// ```
/// use multiprom_http::negotiate::accepts_gzip;
/// assert!(accepts_gzip(Some("gzip, deflate")));
/// assert!(accepts_gzip(Some("*")));
/// assert!(!accepts_gzip(Some("gzip;q=0, *")));
/// assert!(!accepts_gzip(Some("identity")));
/// assert!(!accepts_gzip(None));
/// ```
#[must_use]
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    let Some(header) = accept_encoding else {
        return false;
    };
    let mut explicit: Option<f32> = None;
    let mut wildcard: Option<f32> = None;
    for range in parse_ranges(header) {
        let coding = range.media_type;
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            explicit = Some(explicit.map_or(range.q, |q| q.max(range.q)));
        } else if coding == "*" {
            wildcard = Some(wildcard.map_or(range.q, |q| q.max(range.q)));
        }
    }
    explicit.or(wildcard).is_some_and(|q| q > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_headers_get_their_preferred_format() {
        // Prometheus 2.x default scrape_protocols.
        let v2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(choose_format(Some(v2)), Some(Format::OpenMetrics));
        // Prometheus 3.x with UTF-8 escaping parameters.
        let v3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(choose_format(Some(v3)), Some(Format::OpenMetrics));
        // Text preferred.
        let text_first = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1";
        assert_eq!(choose_format(Some(text_first)), Some(Format::Prometheus));
        // Protobuf first: the best text format is text 0.0.4.
        let proto = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(choose_format(Some(proto)), Some(Format::Prometheus));
    }

    #[test]
    fn prometheus_scraping_native_histograms_gets_protobuf() {
        // Prometheus 2.x with `--enable-feature=native-histograms`
        // (scrape/scrape.go, scrapeAcceptHeaderWithProtobuf).
        let v2 = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(choose_exposition(Some(v2)), Some(Exposition::Protobuf));
        // Prometheus 3.x with protobuf first in scrape_protocols
        // (config.DefaultProtoFirstScrapeProtocols, scrape.acceptHeader).
        let v3 = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
        assert_eq!(choose_exposition(Some(v3)), Some(Exposition::Protobuf));
        // Protobuf alone, in another case and spacing.
        let alone = "Application/Vnd.Google.Protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
        assert_eq!(choose_exposition(Some(alone)), Some(Exposition::Protobuf));
        // Text refused, protobuf accepted.
        let only = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.1,text/plain;q=0,application/openmetrics-text;q=0";
        assert_eq!(choose_exposition(Some(only)), Some(Exposition::Protobuf));
    }

    #[test]
    fn protobuf_only_when_named_exactly_and_preferred() {
        let text = Some(Exposition::Text(Format::Prometheus));
        let om = Some(Exposition::Text(Format::OpenMetrics));
        // Prometheus's default header does not name it.
        let default = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(choose_exposition(Some(default)), om);
        // Wildcards never stand for it.
        assert_eq!(choose_exposition(Some("*/*")), text);
        assert_eq!(choose_exposition(Some("application/*")), om);
        assert_eq!(choose_exposition(None), text);
        // Another message, another framing, or none named: not ours.
        for other in [
            "application/vnd.google.protobuf;proto=io.prometheus.client.Metric;encoding=delimited",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily",
            "application/vnd.google.protobuf",
        ] {
            assert_eq!(choose_exposition(Some(other)), text, "{other}");
        }
        // A text format preferred, or tied, wins.
        let lower = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.8";
        assert_eq!(choose_exposition(Some(lower)), om);
        let tie = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,text/plain;q=0.5";
        assert_eq!(choose_exposition(Some(tie)), text);
        // Refused.
        let refused = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0,text/plain";
        assert_eq!(choose_exposition(Some(refused)), text);
        let nothing = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0,text/plain;q=0,application/openmetrics-text;q=0";
        assert_eq!(choose_exposition(Some(nothing)), None);
    }

    #[test]
    fn q_zero_means_not_acceptable() {
        assert_eq!(
            choose_format(Some("application/openmetrics-text;q=0, text/plain")),
            Some(Format::Prometheus)
        );
        assert_eq!(
            choose_format(Some("text/plain;q=0, */*;q=0.1")),
            Some(Format::OpenMetrics)
        );
        assert_eq!(
            choose_format(Some("application/openmetrics-text;q=0, text/plain;q=0")),
            None
        );
        assert_eq!(choose_format(Some("*/*;q=0")), None);
        // More specific beats less specific, even when lower.
        assert_eq!(choose_format(Some("text/plain;q=0, text/*;q=1")), None);
    }

    #[test]
    fn unknown_or_odd_headers_fall_back_to_text() {
        assert_eq!(
            choose_format(Some("application/json")),
            Some(Format::Prometheus)
        );
        assert_eq!(choose_format(Some("")), Some(Format::Prometheus));
        assert_eq!(choose_format(Some(",,;")), Some(Format::Prometheus));
        assert_eq!(
            choose_format(Some("text/html,application/xhtml+xml,*/*;q=0.8")),
            Some(Format::Prometheus)
        );
        // An OpenMetrics version we do not produce is not a match.
        assert_eq!(
            choose_format(Some("application/openmetrics-text;version=2.0.0")),
            Some(Format::Prometheus)
        );
        // Case-insensitive types, quoted parameters, stray spaces.
        assert_eq!(
            choose_format(Some(
                " Application/OpenMetrics-Text ; version=\"1.0.0\" ; q=0.5 "
            )),
            Some(Format::OpenMetrics)
        );
        // An invalid q drops the range.
        assert_eq!(
            choose_format(Some("application/openmetrics-text;q=2, text/plain;q=0.1")),
            Some(Format::Prometheus)
        );
    }

    #[test]
    fn ties_go_to_explicit_openmetrics() {
        assert_eq!(
            choose_format(Some("application/openmetrics-text, text/plain")),
            Some(Format::OpenMetrics)
        );
        assert_eq!(
            choose_format(Some("application/*")),
            Some(Format::OpenMetrics)
        );
    }

    #[test]
    fn gzip_q_values() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, GZIP;q=0.5")));
        assert!(accepts_gzip(Some("x-gzip")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("gzip;q=0.000")));
        assert!(!accepts_gzip(Some("*;q=0")));
        assert!(!accepts_gzip(Some("br, deflate")));
        assert!(!accepts_gzip(Some("")));
    }
}
