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
//! A text format's range that names version 1.0.0 (text: 1.0.0 or later)
//! gets its `escaping` parameter honoured (`underscores` when it names
//! none), and the answer's `Content-Type` names both, as `prometheus_client`
//! 0.26 answers (the first `version` and `escaping` of a range count, as
//! there):
//! Prometheus 3 asks for `escaping=allow-utf-8`, under which a `:` stays in
//! OpenMetrics sample names (`vllm:num_requests_running`), where the default
//! `underscores` writes `_`.
//!
//! The Prometheus protobuf format is served only to a client that names it
//! exactly (`application/vnd.google.protobuf` with
//! `proto=io.prometheus.client.MetricFamily` and `encoding=delimited`, as
//! Prometheus sends it when it scrapes native histograms) and gives it a
//! higher q than every text format: no wildcard stands for it, so a browser
//! or `curl` never gets binary, and on a tie text wins. Its names are
//! escaped as its range's `escaping` says (Prometheus 3.0 adds
//! `escaping=allow-utf-8` to every range, protobuf's included, and
//! client_golang honours it there), `underscores` when it names none.

use super::PROTOBUF_CONTENT_TYPE;
use super::{Escaping, Format};

/// What a `/metrics` answer is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Exposition {
    /// A text format: Prometheus text or OpenMetrics 1.0.0.
    Text(Text),
    /// The Prometheus protobuf format: length-delimited `MetricFamily`
    /// messages.
    Protobuf(Protobuf),
}

/// A protobuf answer: how names are escaped, and whether its `Content-Type`
/// says so (the client named an `escaping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Protobuf {
    /// How names that are not legacy names are written.
    pub escaping: Escaping,
    /// Whether the `Content-Type` names the escaping scheme, as
    /// client_golang's does.
    pub named: bool,
}

impl Protobuf {
    /// The answer's `Content-Type`: client_golang's `expfmt.FmtProtoDelim`,
    /// with the escaping scheme when the client named one.
    ///
    /// ```
    /// use multiprom_collector::Escaping;
    /// use multiprom_collector::exposition::negotiate::Protobuf;
    /// let utf8 = Protobuf { escaping: Escaping::AllowUtf8, named: true };
    /// assert_eq!(utf8.content_type(), "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=allow-utf-8");
    /// assert_eq!(Protobuf::default().content_type(), "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited");
    /// ```
    #[must_use]
    pub const fn content_type(self) -> &'static str {
        if !self.named {
            return PROTOBUF_CONTENT_TYPE;
        }
        match self.escaping {
            Escaping::Underscores => "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=underscores",
            Escaping::AllowUtf8 => "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=allow-utf-8",
            Escaping::Dots => "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=dots",
            Escaping::Values => "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=values",
        }
    }
}

/// A text answer: its format, how names are escaped, and whether it names
/// both in its `Content-Type` (the client asked for version 1.0.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Text {
    /// Prometheus text or OpenMetrics.
    pub format: Format,
    /// How names that are not legacy names are written.
    pub escaping: Escaping,
    /// Whether the answer is version 1.0.0 with its escaping named (text
    /// format 1.0.0 when `format` is Prometheus text; 0.0.4 otherwise).
    pub versioned: bool,
}

impl Text {
    /// `format` as a client that names no version gets it: text 0.0.4 or
    /// OpenMetrics 1.0.0, names escaped with `underscores`.
    #[must_use]
    pub const fn plain(format: Format) -> Self {
        Text {
            format,
            escaping: Escaping::Underscores,
            versioned: false,
        }
    }

    /// The answer's `Content-Type`, as `prometheus_client` 0.26 writes it.
    ///
    /// ```
    /// use multiprom_collector::{Escaping, Format};
    /// use multiprom_collector::exposition::negotiate::Text;
    /// let utf8 = Text { format: Format::OpenMetrics, escaping: Escaping::AllowUtf8, versioned: true };
    /// assert_eq!(utf8.content_type(), "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8");
    /// assert_eq!(Text::plain(Format::Prometheus).content_type(), "text/plain; version=0.0.4; charset=utf-8");
    /// ```
    #[must_use]
    pub const fn content_type(self) -> &'static str {
        use Escaping::{AllowUtf8, Dots, Underscores, Values};
        use Format::{OpenMetrics, Prometheus};
        if !self.versioned {
            return self.format.content_type();
        }
        match (self.format, self.escaping) {
            (Prometheus, Underscores) => {
                "text/plain; version=1.0.0; charset=utf-8; escaping=underscores"
            }
            (Prometheus, AllowUtf8) => {
                "text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8"
            }
            (Prometheus, Dots) => "text/plain; version=1.0.0; charset=utf-8; escaping=dots",
            (Prometheus, Values) => "text/plain; version=1.0.0; charset=utf-8; escaping=values",
            (OpenMetrics, Underscores) => {
                "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"
            }
            (OpenMetrics, AllowUtf8) => {
                "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8"
            }
            (OpenMetrics, Dots) => {
                "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=dots"
            }
            (OpenMetrics, Values) => {
                "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=values"
            }
        }
    }
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
    /// The `escaping` parameter (how names are escaped), if any.
    escaping: Option<&'a str>,
    /// The q-value, 0.0 to 1.0.
    q: f32,
}

/// Splits a header value into comma-separated elements, each into
/// `;`-separated parts. Ranges with an unparsable q-value are dropped. Of a
/// parameter named twice the first counts (as in `prometheus_client`).
fn parse_ranges(header: &str) -> impl Iterator<Item = MediaRange<'_>> {
    header.split(',').filter_map(|element| {
        let mut parts = element.split(';').map(str::trim);
        let media_type = parts.next().filter(|t| !t.is_empty())?;
        let mut range = MediaRange {
            media_type,
            version: None,
            proto: None,
            encoding: None,
            escaping: None,
            q: 1.0,
        };
        for param in parts {
            let Some((name, value)) = param.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            match name.trim().to_ascii_lowercase().as_str() {
                "q" => range.q = parse_q(value)?,
                "version" => _ = range.version.get_or_insert(value),
                "proto" => _ = range.proto.get_or_insert(value),
                "encoding" => _ = range.encoding.get_or_insert(value),
                "escaping" => _ = range.escaping.get_or_insert(value),
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
        // An empty version names none, as in `prometheus_client`.
        (_, None | Some("")) => true,
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
/// use multiprom_collector::exposition::negotiate::choose_format;
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

/// Whether `version` is 1.0.0 or later, as `prometheus_client` compares
/// versions (dot-separated numbers, `2` after `1.0.0`, `1.0` before it);
/// one with a part that is no number is not (`prometheus_client` fails
/// comparing it).
fn from_1_0_0(version: &str) -> bool {
    let mut parts = Vec::new();
    for part in version.split('.') {
        match part.parse::<u64>() {
            Ok(number) if part.bytes().all(|b| b.is_ascii_digit()) => parts.push(number),
            _ => return false,
        }
    }
    parts.as_slice() >= [1, 0, 0].as_slice()
}

/// `format` as `header` asks for it: the range that names its type exactly
/// with the best q (the first of equals) decides the version and escaping;
/// version 1.0.0 (of the text format, any version from 1.0.0 on, as
/// `prometheus_client` compares them) gets the range's escaping
/// (`underscores` when it names none, or one unknown) and says so in its
/// `Content-Type`.
///
/// ```
/// use multiprom_collector::{Escaping, Format};
/// use multiprom_collector::exposition::negotiate::{text_for, Text};
///
/// let prometheus_3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
/// let text = text_for(prometheus_3, Format::OpenMetrics);
/// assert_eq!(text, Text { format: Format::OpenMetrics, escaping: Escaping::AllowUtf8, versioned: true });
/// assert_eq!(text_for("*/*", Format::Prometheus), Text::plain(Format::Prometheus));
/// ```
#[must_use]
pub fn text_for(header: &str, format: Format) -> Text {
    let mut best: Option<MediaRange<'_>> = None;
    for range in parse_ranges(header) {
        if specificity(&range, format) == Some(3)
            && range.q > 0.0
            && best.as_ref().is_none_or(|b| range.q > b.q)
        {
            best = Some(range);
        }
    }
    let versioned = |version: &str| match format {
        Format::OpenMetrics => version == "1.0.0",
        Format::Prometheus => from_1_0_0(version),
    };
    match best {
        Some(range) if range.version.is_some_and(versioned) => Text {
            format,
            escaping: Escaping::from_param(range.escaping.unwrap_or_default()),
            versioned: true,
        },
        _ => Text::plain(format),
    }
}

/// The q-value `header` gives the Prometheus protobuf format (delimited
/// `MetricFamily` messages), from the best of the ranges that name it
/// exactly (the first of equals), with the answer that range asks for;
/// `None` if none names it.
fn protobuf_quality(header: &str) -> Option<(f32, Protobuf)> {
    let mut best: Option<(f32, Protobuf)> = None;
    for range in parse_ranges(header) {
        let exact = range.media_type.eq_ignore_ascii_case(PROTOBUF_TYPE)
            && range.proto == Some(PROTOBUF_MESSAGE)
            && range.encoding == Some("delimited");
        if exact && best.is_none_or(|(q, _)| range.q > q) {
            let answer = Protobuf {
                escaping: Escaping::from_param(range.escaping.unwrap_or_default()),
                named: range.escaping.is_some(),
            };
            best = Some((range.q, answer));
        }
    }
    best
}

/// What to answer `/metrics` with, or `None` if the client refuses every
/// format (406): the protobuf format when the client names it with a q
/// above that of every text format, else [`choose_format`]'s text format.
///
/// ```
/// use multiprom_collector::Format;
/// use multiprom_collector::exposition::negotiate::{choose_exposition, Exposition, Protobuf, Text};
///
/// // Prometheus 2.x with native histograms on.
/// let native = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// assert_eq!(choose_exposition(Some(native)), Some(Exposition::Protobuf(Protobuf::default())));
/// let default = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// let openmetrics = choose_exposition(Some(default));
/// assert!(matches!(openmetrics, Some(Exposition::Text(Text { format: Format::OpenMetrics, versioned: true, .. }))));
/// assert_eq!(choose_exposition(Some("*/*")), Some(Exposition::Text(Text::plain(Format::Prometheus))));
/// ```
#[must_use]
pub fn choose_exposition(accept: Option<&str>) -> Option<Exposition> {
    let text = choose_format(accept);
    let as_text = |format| Exposition::Text(text_for(accept.unwrap_or_default(), format));
    let Some((protobuf_q, protobuf)) = accept.and_then(protobuf_quality).filter(|&(q, _)| q > 0.0)
    else {
        return text.map(as_text);
    };
    let Some(format) = text else {
        return Some(Exposition::Protobuf(protobuf));
    };
    let accept = accept.unwrap_or_default();
    // `choose_format` answers text 0.0.4 to a header that names no text
    // format; such a header gives text nothing.
    let text_q = quality(accept, format).map_or(0.0, |(_, q)| q);
    if protobuf_q > text_q {
        Some(Exposition::Protobuf(protobuf))
    } else {
        Some(as_text(format))
    }
}

/// Whether `Accept-Encoding` allows gzip (`gzip`, `x-gzip` or `*` with a
/// q-value above 0; an explicit `gzip;q=0` refuses it even with `*`).
///
/// ```
/// use multiprom_collector::exposition::negotiate::accepts_gzip;
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
        assert_eq!(
            choose_exposition(Some(v2)),
            Some(Exposition::Protobuf(Protobuf::default()))
        );
        // Prometheus 3.x with protobuf first in scrape_protocols
        // (config.DefaultProtoFirstScrapeProtocols, scrape.acceptHeader).
        let v3 = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
        assert_eq!(
            choose_exposition(Some(v3)),
            Some(Exposition::Protobuf(Protobuf::default()))
        );
        // Protobuf alone, in another case and spacing.
        let alone = "Application/Vnd.Google.Protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
        assert_eq!(
            choose_exposition(Some(alone)),
            Some(Exposition::Protobuf(Protobuf::default()))
        );
        // Text refused, protobuf accepted.
        let only = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.1,text/plain;q=0,application/openmetrics-text;q=0";
        assert_eq!(
            choose_exposition(Some(only)),
            Some(Exposition::Protobuf(Protobuf::default()))
        );
    }

    #[test]
    fn protobuf_names_are_escaped_as_its_range_asks() {
        // Prometheus 3.0 (scrape.acceptHeader with UTF-8 validation) names
        // allow-utf-8 on every range.
        let v3_0 = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,text/plain;version=0.0.4;escaping=allow-utf-8;q=0.2,*/*;q=0.1";
        let utf8 = Protobuf {
            escaping: Escaping::AllowUtf8,
            named: true,
        };
        assert_eq!(
            choose_exposition(Some(v3_0)),
            Some(Exposition::Protobuf(utf8))
        );
        // Prometheus 3.5 names none there: underscores, not named.
        let v3_5 = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,*/*;q=0.1";
        assert_eq!(
            choose_exposition(Some(v3_5)),
            Some(Exposition::Protobuf(Protobuf::default()))
        );
        // An unknown scheme is underscores, named; the first one counts.
        let unknown = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=utf8;escaping=dots";
        assert_eq!(
            choose_exposition(Some(unknown)),
            Some(Exposition::Protobuf(Protobuf {
                escaping: Escaping::Underscores,
                named: true,
            }))
        );
        // The best protobuf range decides.
        let two = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=dots;q=0.2,application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=values;q=0.9";
        assert_eq!(
            choose_exposition(Some(two)),
            Some(Exposition::Protobuf(Protobuf {
                escaping: Escaping::Values,
                named: true,
            }))
        );
    }

    #[test]
    fn parameters_are_read_as_prometheus_client_reads_them() {
        let versioned = |format, escaping| Text {
            format,
            escaping,
            versioned: true,
        };
        // The first `escaping` and `version` of a range count.
        assert_eq!(
            text_for(
                "application/openmetrics-text;version=1.0.0;escaping=dots;escaping=allow-utf-8",
                Format::OpenMetrics
            ),
            versioned(Format::OpenMetrics, Escaping::Dots)
        );
        assert_eq!(
            text_for(
                "text/plain;version=0.0.4;version=1.0.0;escaping=dots",
                Format::Prometheus
            ),
            Text::plain(Format::Prometheus)
        );
        // Text from version 1.0.0 on is versioned (its Content-Type says
        // 1.0.0, as prometheus_client's); 1.0 or a version with a part
        // that is no number is not.
        for (version, answer) in [
            ("1.0.0", versioned(Format::Prometheus, Escaping::AllowUtf8)),
            ("2.0.0", versioned(Format::Prometheus, Escaping::AllowUtf8)),
            ("1.1", versioned(Format::Prometheus, Escaping::AllowUtf8)),
            ("2", versioned(Format::Prometheus, Escaping::AllowUtf8)),
            ("1.0", Text::plain(Format::Prometheus)),
            ("0.0.4", Text::plain(Format::Prometheus)),
            ("1.0.0-rc", Text::plain(Format::Prometheus)),
            ("", Text::plain(Format::Prometheus)),
        ] {
            let header = format!("text/plain;version={version};escaping=allow-utf-8");
            assert_eq!(
                choose_exposition(Some(&header)),
                Some(Exposition::Text(answer)),
                "{header}"
            );
        }
        // An empty OpenMetrics version names none: OpenMetrics, plain.
        assert_eq!(
            choose_exposition(Some("application/openmetrics-text;version=")),
            Some(Exposition::Text(Text::plain(Format::OpenMetrics)))
        );
    }

    #[test]
    fn protobuf_only_when_named_exactly_and_preferred() {
        let text = Some(Exposition::Text(Text::plain(Format::Prometheus)));
        let om = Some(Exposition::Text(Text::plain(Format::OpenMetrics)));
        let om_versioned = Some(Exposition::Text(Text {
            versioned: true,
            ..Text::plain(Format::OpenMetrics)
        }));
        // Prometheus's default header does not name it.
        let default = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(choose_exposition(Some(default)), om_versioned);
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
        assert_eq!(choose_exposition(Some(lower)), om_versioned);
        let tie = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,text/plain;q=0.5";
        assert_eq!(choose_exposition(Some(tie)), text);
        // Refused.
        let refused = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0,text/plain";
        assert_eq!(choose_exposition(Some(refused)), text);
        let nothing = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0,text/plain;q=0,application/openmetrics-text;q=0";
        assert_eq!(choose_exposition(Some(nothing)), None);
    }

    #[test]
    fn a_version_1_range_gets_its_escaping() {
        let text = |header: &str, format| text_for(header, format);
        let versioned = |format, escaping| Text {
            format,
            escaping,
            versioned: true,
        };
        // Prometheus 3: both text formats with allow-utf-8.
        let v3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(
            text(v3, Format::OpenMetrics),
            versioned(Format::OpenMetrics, Escaping::AllowUtf8)
        );
        assert_eq!(
            text(v3, Format::Prometheus),
            versioned(Format::Prometheus, Escaping::AllowUtf8)
        );
        // The better range decides: 0.0.4 preferred to 1.0.0.
        let old_first =
            "text/plain;version=0.0.4;q=0.9,text/plain;version=1.0.0;escaping=dots;q=0.5";
        assert_eq!(
            text(old_first, Format::Prometheus),
            Text::plain(Format::Prometheus)
        );
        // Each scheme by name; none, an unknown one or a bad case:
        // underscores, still versioned (as prometheus_client answers).
        for (param, escaping) in [
            (";escaping=dots", Escaping::Dots),
            (";escaping=values", Escaping::Values),
            (";escaping=underscores", Escaping::Underscores),
            ("", Escaping::Underscores),
            (";escaping=utf8", Escaping::Underscores),
            (";escaping=Allow-UTF-8", Escaping::Underscores),
        ] {
            let header = format!("application/openmetrics-text;version=1.0.0{param}");
            assert_eq!(
                text(&header, Format::OpenMetrics),
                versioned(Format::OpenMetrics, escaping),
                "{header}"
            );
        }
        // No version, 0.0.1 or 0.0.4, or a wildcard: plain.
        for header in [
            "application/openmetrics-text;escaping=allow-utf-8",
            "application/openmetrics-text;version=0.0.1;escaping=allow-utf-8",
            "application/*",
        ] {
            assert_eq!(
                text(header, Format::OpenMetrics),
                Text::plain(Format::OpenMetrics),
                "{header}"
            );
        }
        assert_eq!(
            text(
                "text/plain;version=0.0.4;escaping=allow-utf-8",
                Format::Prometheus
            ),
            Text::plain(Format::Prometheus)
        );
        // A refused range does not decide.
        let refused = "application/openmetrics-text;version=1.0.0;escaping=dots;q=0,application/openmetrics-text;q=0.5";
        assert_eq!(
            text(refused, Format::OpenMetrics),
            Text::plain(Format::OpenMetrics)
        );
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
