//! The status page's exemplar column: the latest exemplar of a family (of
//! all its series), as a person reads it: its labels, its value, and how
//! long ago it was recorded.

use std::time::{SystemTime, UNIX_EPOCH};

use multiprom_collector::MergedFamily;
use multiprom_format::{float_to_go_string, Exemplar};

use crate::html::html_escape;

/// The exemplar of `family` with the latest timestamp, if any has one.
pub(crate) fn latest_exemplar(family: &MergedFamily) -> Option<&Exemplar> {
    family
        .samples
        .iter()
        .filter_map(|sample| sample.exemplar.as_deref())
        .fold(None, |latest: Option<&Exemplar>, exemplar| match latest {
            Some(kept) if exemplar.timestamp > kept.timestamp => Some(exemplar),
            None => Some(exemplar),
            kept => kept,
        })
}

/// `{trace_id="abc"} 0.25, 12 s ago`, HTML-escaped; the Unix time itself
/// in the cell's title.
pub(crate) fn exemplar_cell(exemplar: &Exemplar, now: SystemTime) -> String {
    let labels: Vec<String> = exemplar
        .labels
        .iter()
        .map(|(name, value)| {
            let value = value
                .replace('\\', "\\\\")
                .replace('\n', "\\n")
                .replace('"', "\\\"");
            format!("{name}=\"{value}\"")
        })
        .collect();
    let now = now
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64());
    format!(
        "<td title=\"recorded at Unix time {timestamp}\"><code>{{{labels}}}</code> {value}, {age}</td>",
        timestamp = exemplar.timestamp,
        labels = html_escape(&labels.join(",")),
        value = html_escape(&float_to_go_string(exemplar.value)),
        age = age(now - exemplar.timestamp),
    )
}

/// How long ago, in the largest unit that reads well.
fn age(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "at an unknown time".to_owned();
    }
    if seconds < 0.0 {
        return "in the future (clocks differ?)".to_owned();
    }
    let whole = seconds.round() as u64;
    match whole {
        0..120 => format!("{whole} s ago"),
        120..7_200 => format!("{} min ago", whole / 60),
        7_200..172_800 => format!("{} h ago", whole / 3_600),
        _ => format!("{} days ago", whole / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use multiprom_collector::{FamilyType, MergedSample};

    use super::*;

    fn sample(exemplar: Option<(&str, f64)>) -> MergedSample {
        MergedSample {
            name: "jobs_total".into(),
            labels: Arc::from([]),
            value: 1.0,
            exemplar: exemplar.map(|(trace, timestamp)| {
                Arc::new(Exemplar {
                    labels: vec![("trace_id".into(), trace.into())],
                    value: 0.5,
                    timestamp,
                })
            }),
        }
    }

    #[test]
    fn the_latest_of_a_family_shown_with_its_age() {
        let family = MergedFamily {
            name: "jobs".into(),
            help: "Jobs.".into(),
            family_type: FamilyType::Counter,
            gauge_mode: None,
            samples: vec![
                sample(Some(("old", 100.0))),
                sample(None),
                sample(Some(("<new>", 1_000.0))),
                sample(Some(("older", 50.0))),
            ],
        };
        let latest = latest_exemplar(&family).unwrap();
        assert_eq!(latest.labels[0].1, "<new>");
        let now = UNIX_EPOCH + Duration::from_secs(1_000 + 3 * 3_600);
        assert_eq!(
            exemplar_cell(latest, now),
            "<td title=\"recorded at Unix time 1000\"><code>{trace_id=&quot;&lt;new&gt;&quot;}</code> 0.5, 3 h ago</td>"
        );
        assert_eq!(age(59.6), "60 s ago");
        assert_eq!(age(600.0), "10 min ago");
        assert_eq!(age(3.0 * 86_400.0), "3 days ago");
        assert_eq!(age(-5.0), "in the future (clocks differ?)");
        let none = MergedFamily {
            samples: vec![sample(None)],
            ..family
        };
        assert!(latest_exemplar(&none).is_none());
    }
}
