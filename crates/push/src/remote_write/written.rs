//! What a Remote-Write 2.0 receiver says it wrote: its
//! `X-Prometheus-Remote-Write-{Samples,Histograms,Exemplars}-Written`
//! headers, set against what the request carried.

use reqwest::header::HeaderMap;

use super::v2::Request;

/// Counts of samples, native histograms and exemplars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Written {
    pub(crate) samples: u64,
    pub(crate) histograms: u64,
    pub(crate) exemplars: u64,
}

impl Written {
    /// What `request` carries.
    pub(crate) fn sent(request: &Request) -> Written {
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        request
            .timeseries
            .iter()
            .fold(Written::default(), |sum, series| Written {
                samples: sum.samples + count(series.samples.len()),
                histograms: sum.histograms + count(series.histograms.len()),
                exemplars: sum.exemplars + count(series.exemplars.len()),
            })
    }

    /// What the answer's headers say was written; `None` when it has none
    /// of them (a receiver from before the specification required them:
    /// nothing is confirmed, nothing is known to be lost).
    pub(crate) fn answered(headers: &HeaderMap) -> Option<Written> {
        let header = |what: &str| {
            let name = format!("x-prometheus-remote-write-{what}-written");
            headers
                .get(name.as_str())
                .and_then(|value| value.to_str().ok())
                .and_then(|text| text.trim().parse::<u64>().ok())
        };
        let (samples, histograms, exemplars) =
            (header("samples"), header("histograms"), header("exemplars"));
        if samples.is_none() && histograms.is_none() && exemplars.is_none() {
            return None;
        }
        Some(Written {
            samples: samples.unwrap_or(0),
            histograms: histograms.unwrap_or(0),
            exemplars: exemplars.unwrap_or(0),
        })
    }

    /// Whether a receiver that wrote `self` of `sent` took the request
    /// for what it is: `Err` when it wrote no sample and no histogram of
    /// some sent. That is what a Remote-Write 1.0 receiver that ignores
    /// `Content-Type` answers: it reads the 2.0 body as an empty 1.0
    /// request (the fields of 1.0 are reserved in 2.0 for this), and the
    /// specification asks senders to take it as a failure.
    pub(crate) fn check(self, sent: Written) -> Result<(), String> {
        if sent.samples + sent.histograms > 0 && self.samples + self.histograms == 0 {
            return Err(format!(
                "the receiver answered 2xx but wrote none of {} samples and {} histograms \
                 (X-Prometheus-Remote-Write-*-Written): it seems to take only Remote-Write \
                 1.0, without checking Content-Type",
                sent.samples, sent.histograms
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use reqwest::header::HeaderValue;

    use super::*;

    fn written(samples: u64, histograms: u64, exemplars: u64) -> Written {
        Written {
            samples,
            histograms,
            exemplars,
        }
    }

    #[test]
    fn the_headers_or_none() {
        let mut headers = HeaderMap::new();
        assert_eq!(Written::answered(&headers), None);
        headers.insert(
            "X-Prometheus-Remote-Write-Samples-Written",
            HeaderValue::from_static("12"),
        );
        headers.insert(
            "X-Prometheus-Remote-Write-Exemplars-Written",
            HeaderValue::from_static("1"),
        );
        assert_eq!(Written::answered(&headers), Some(written(12, 0, 1)));
    }

    #[test]
    fn nothing_written_of_something_sent_is_a_failure() {
        assert!(written(0, 0, 0).check(written(3, 1, 0)).is_err());
        assert!(written(0, 0, 0).check(written(0, 0, 0)).is_ok());
        assert!(written(3, 0, 0).check(written(3, 1, 0)).is_ok());
    }
}
