//! A settled file's exemplar file (its writer is gone) is read once and
//! kept: a warm collection reads only the live writers' exemplar files, and
//! reads a settled one again as soon as something opens its `*.db` file (a
//! new process taking the identifier over must, before it writes an
//! exemplar).

#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::path::Path;

use multiprom_collector::{DirCollector, Format};
use multiprom_format::{encode_key, ExemplarWriter, FileName, FileWriter, MetricKind};

fn requests(code: &str) -> String {
    encode_key("requests", "requests_total", [("code", code)], "Requests.")
}

/// Stores an exemplar with `trace` at `timestamp` on `key` in the exemplar
/// file of `pid`'s counter file.
fn store(dir: &Path, pid: &str, key: &str, trace: &str, timestamp: f64) {
    let name = FileName::new(MetricKind::Counter, pid).unwrap();
    ExemplarWriter::open(dir, &name)
        .unwrap()
        .slot(key)
        .unwrap()
        .store([("trace_id", trace)], 1.0, timestamp)
        .unwrap();
}

/// Adds 1 to `key` in `pid`'s counter file.
fn add_one(dir: &Path, pid: &str, key: &str) {
    let name = FileName::new(MetricKind::Counter, pid).unwrap();
    FileWriter::open(dir, &name)
        .unwrap()
        .slot(key)
        .unwrap()
        .add(1.0);
}

/// Asserts that `text` serves `requests_total{code}` with the exemplar
/// whose trace is `trace`.
fn assert_trace(text: &str, code: &str, trace: &str) {
    let sample = format!("requests_total{{code=\"{code}\"}}");
    assert!(
        line(text, &sample).contains(&format!("trace_id=\"{trace}\"")),
        "{text}"
    );
}

/// Replaces the file at `path` with bytes that are no exemplar file: a
/// collection that reads it again reports it.
fn spoil(path: &Path) {
    std::fs::write(path, b"not an exemplar file").unwrap();
}

fn line<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no {start:?} in\n{text}"))
}

#[test]
fn a_settled_file_s_exemplars_are_kept_until_its_file_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, failed) = (requests("200"), requests("500"));
    for pid in ["1", "2"] {
        let name = FileName::new(MetricKind::Counter, pid).unwrap();
        let mut file = FileWriter::open(dir.path(), &name).unwrap();
        file.slot(&ok).unwrap().add(1.0);
        file.slot(&failed).unwrap().add(1.0);
    }
    // "1" is gone: its exemplar is the later one of `code="200"`.
    store(dir.path(), "1", &ok, "gone", 20.0);
    store(dir.path(), "2", &ok, "live", 10.0);
    store(dir.path(), "2", &failed, "live", 10.0);
    let collector =
        DirCollector::new(dir.path()).settle_exited_writers(|name: &FileName| name.id() == "1");
    // As in the settled files' tests: from the fifth collection on, "1" is
    // settled.
    for _ in 0..5 {
        collector.collect().unwrap();
    }
    let exemplars = dir.path().join("exemplars");
    let text = collector.collect().unwrap().encode(Format::OpenMetrics);
    assert_trace(&text, "200", "gone");

    // The settled file's exemplar file is not read again: replaced by
    // bytes that are no exemplar file, nothing changes and nothing is
    // reported. (Nothing but a writer of its `*.db` file writes it.)
    let kept = std::fs::read(exemplars.join("counter_1.exemplars")).unwrap();
    spoil(&exemplars.join("counter_1.exemplars"));
    let scrape = collector.collect().unwrap();
    assert!(scrape.warnings.is_empty(), "{:?}", scrape.warnings);
    let text = scrape.encode(Format::OpenMetrics);
    assert_trace(&text, "200", "gone");
    std::fs::write(exemplars.join("counter_1.exemplars"), kept).unwrap();
    // The live writer's file is read every time.
    store(dir.path(), "2", &failed, "live-later", 30.0);
    let text = collector.collect().unwrap().encode(Format::OpenMetrics);
    assert_trace(&text, "500", "live-later");

    // A new process with the identifier opens the `*.db` file, then
    // records a later exemplar: it is read.
    drop(File::open(dir.path().join("counter_1.db")).unwrap());
    store(dir.path(), "1", &ok, "back", 40.0);
    let text = collector.collect().unwrap().encode(Format::OpenMetrics);
    assert_trace(&text, "200", "back");
    // And kept again once settled anew, equal to what a fresh collector
    // shows.
    for _ in 0..5 {
        collector.collect().unwrap();
    }
    let fresh = DirCollector::new(dir.path())
        .collect()
        .unwrap()
        .encode(Format::OpenMetrics);
    assert_eq!(
        collector.collect().unwrap().encode(Format::OpenMetrics),
        fresh
    );
}

#[test]
fn a_collection_for_text_attaches_no_exemplar_and_reads_no_exemplar_file() {
    use multiprom_collector::{Exemplars, Natives};
    let dir = tempfile::tempdir().unwrap();
    let ok = requests("200");
    add_one(dir.path(), "1", &ok);
    store(dir.path(), "1", &ok, "t", 10.0);
    let collector = DirCollector::new(dir.path());
    let for_text = || {
        collector
            .collect_for(|_| Default::default(), None, Natives::Skip, Exemplars::Skip)
            .unwrap()
    };
    let scrape = for_text();
    assert!(scrape.families[0].samples[0].exemplar.is_none());
    // A damaged exemplar file is not even read.
    spoil(&dir.path().join("exemplars/counter_1.exemplars"));
    assert!(for_text().warnings.is_empty());
    // A collection that attaches them reads it, and reports it.
    let scrape = collector.collect().unwrap();
    assert_eq!(scrape.warnings.len(), 1, "{:?}", scrape.warnings);
}

#[test]
fn kept_exemplars_win_as_a_fresh_collection_picks_them_in_merge_order() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, failed) = (requests("200"), requests("500"));
    for pid in 1..=6 {
        let name = FileName::new(MetricKind::Counter, pid.to_string()).unwrap();
        let mut file = FileWriter::open(dir.path(), &name).unwrap();
        file.slot(&ok).unwrap().add(1.0);
        file.slot(&failed).unwrap().add(1.0);
    }
    // The merge order is the directory's: the files' identifiers in it.
    let ids: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            Some(
                name.strip_prefix("counter_")?
                    .strip_suffix(".db")?
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(ids.len(), 6);
    // The third and the sixth are live: the others make two runs of two
    // settled files, [0, 1] and [3, 4].
    let live = [ids[2].clone(), ids[5].clone()];
    // `ok`: a tie inside the first run (its first file keeps the series)
    // and with the live file after it. `failed`: a timestamp that is not a
    // number inside the second run, before a later one: in merge order the
    // NaN never wins against what came before it, and the later one does.
    let stamps = [
        (20.0, 1.0),
        (20.0, 0.5),
        (15.0, 0.7),
        (5.0, f64::NAN),
        (10.0, 50.0),
        (20.0, 2.0),
    ];
    for (at, (stamp_ok, stamp_failed)) in stamps.into_iter().enumerate() {
        let id = &ids[at];
        store(dir.path(), id, &ok, &format!("ok-{at}"), stamp_ok);
        store(
            dir.path(),
            id,
            &failed,
            &format!("failed-{at}"),
            stamp_failed,
        );
    }
    let collector = DirCollector::new(dir.path())
        .settle_exited_writers(move |name: &FileName| !live.iter().any(|id| id == name.id()));
    let fresh = || {
        DirCollector::new(dir.path())
            .collect()
            .unwrap()
            .encode(Format::OpenMetrics)
    };
    let warm = || collector.collect().unwrap().encode(Format::OpenMetrics);
    let expected = fresh();
    assert!(
        line(&expected, "requests_total{code=\"200\"}").contains("ok-0"),
        "{expected}"
    );
    assert!(
        line(&expected, "requests_total{code=\"500\"}").contains("failed-4"),
        "{expected}"
    );
    for round in 0..6 {
        assert_eq!(warm(), expected, "round {round}");
    }
    // A live writer overtakes the settled files' winner, then another ties.
    store(dir.path(), &ids[2], &ok, "ok-2-later", 40.0);
    assert_eq!(warm(), fresh());
    store(dir.path(), &ids[5], &ok, "ok-5-tie", 40.0);
    assert_eq!(warm(), fresh());
}

#[test]
fn what_a_look_at_every_file_reads_of_a_settled_file_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let ok = requests("200");
    add_one(dir.path(), "1", &ok);
    store(dir.path(), "1", &ok, "gone", 20.0);
    let collector =
        DirCollector::new(dir.path()).settle_exited_writers(|name: &FileName| name.id() == "1");
    for _ in 0..5 {
        collector.collect().unwrap();
    }
    // More events than the kernel queues for a watch
    // (`fs.inotify.max_queued_events`, 16,384 by default): the next
    // collection looks at every file, as the periodic resync does, and
    // trusts nothing kept. Each round raises two events.
    let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|limit| limit.trim().parse().ok())
        .unwrap_or(16_384);
    let other = dir.path().join("other.tmp");
    for _ in 0..queued {
        File::create(&other).unwrap();
        std::fs::remove_file(&other).unwrap();
    }
    let scrape = collector.collect().unwrap();
    assert!(scrape.stats.full_look, "the events overflowed");
    let text = scrape.encode(Format::OpenMetrics);
    assert_trace(&text, "200", "gone");
    // What it read of the settled file's exemplar file is kept: the next
    // collection does not read it again (replaced by bytes that are no
    // exemplar file, nothing changes and nothing is reported). Thousands
    // of settled exemplar files are read in one collection, not two.
    let exemplars = dir.path().join("exemplars");
    spoil(&exemplars.join("counter_1.exemplars"));
    let scrape = collector.collect().unwrap();
    assert!(!scrape.stats.full_look);
    assert!(
        scrape.warnings.is_empty(),
        "read again: {:?}",
        scrape.warnings
    );
    let text = scrape.encode(Format::OpenMetrics);
    assert_trace(&text, "200", "gone");
}
