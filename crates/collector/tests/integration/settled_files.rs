//! Files of writers that are gone are read once more and then settled:
//! left out of the reading until a directory event names them.

use std::fs::File;

use multiprom_collector::{DirCollector, Format, NameFilter};
use multiprom_format::{encode_key, FileName, FileWriter, MetricKind};

fn value_of(text: &str, line_start: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(line_start))
        .unwrap_or_else(|| panic!("no {line_start} in\n{text}"))
        .to_owned()
}

#[test]
fn a_gone_writer_s_file_is_read_again_only_when_an_event_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = |pid: &str| encode_key(&format!("c{pid}"), &format!("c{pid}_total"), [], "C.");
    let mut gone = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, "1").unwrap(),
    )
    .unwrap();
    let mut live = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, "2").unwrap(),
    )
    .unwrap();
    gone.slot(&key("1")).unwrap().add(1.0);
    live.slot(&key("2")).unwrap().add(1.0);

    // "1" is a writer that is gone, "2" one that lives.
    let collector =
        DirCollector::new(dir.path()).settle_exited_writers(|name: &FileName| name.id() == "1");
    // The first collection reads with pread, the second maps and sets the
    // watch (opening every file, which raises events), the third and
    // fourth read whole what these left unsettled; from then on "1" is
    // settled.
    for _ in 0..4 {
        collector.collect().unwrap();
    }
    // Both change through their maps, which raises no event.
    gone.slot(&key("1")).unwrap().add(10.0);
    live.slot(&key("2")).unwrap().add(10.0);
    let text = collector.collect().unwrap().encode(Format::Prometheus);
    assert_eq!(
        value_of(&text, "c2_total"),
        "c2_total 11.0",
        "a live writer's file is read"
    );
    assert_eq!(
        value_of(&text, "c1_total"),
        "c1_total 1.0",
        "a settled file is not read (its writer is gone: nothing can change it)"
    );
    // A filtered collection reuses the settled values too.
    let only = NameFilter::new(["c1_total"]);
    let text = collector
        .collect_only(&only)
        .unwrap()
        .encode(Format::Prometheus);
    assert_eq!(value_of(&text, "c1_total"), "c1_total 1.0");

    // Someone opens it (a new process with the same pid would): read again.
    drop(File::open(dir.path().join("counter_1.db")).unwrap());
    let text = collector.collect().unwrap().encode(Format::Prometheus);
    assert_eq!(value_of(&text, "c1_total"), "c1_total 11.0");

    // A collector not told which writers are gone reads every file always.
    let plain = DirCollector::new(dir.path());
    for _ in 0..4 {
        plain.collect().unwrap();
    }
    gone.slot(&key("1")).unwrap().add(100.0);
    let text = plain.collect().unwrap().encode(Format::Prometheus);
    assert_eq!(value_of(&text, "c1_total"), "c1_total 111.0");
}

#[test]
fn a_filtered_collection_settles_files_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut gone = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, "1").unwrap(),
    )
    .unwrap();
    gone.slot(&encode_key("a", "a_total", [], "A."))
        .unwrap()
        .add(1.0);
    gone.slot(&encode_key("b", "b_total", [], "B."))
        .unwrap()
        .add(1.0);
    let collector = DirCollector::new(dir.path()).settle_exited_writers(|_: &FileName| true);
    let only = NameFilter::new(["a_total"]);
    for _ in 0..4 {
        collector.collect_only(&only).unwrap();
    }
    gone.slot(&encode_key("b", "b_total", [], "B."))
        .unwrap()
        .add(5.0);
    // Settled by filtered collections, read whole: "b" is as it was then.
    let text = collector.collect().unwrap().encode(Format::Prometheus);
    assert_eq!(value_of(&text, "b_total"), "b_total 1.0");
}

#[test]
fn a_sum_with_a_live_fraction_is_added_in_python_s_order() {
    // 2^52 + 0.5 rounds back to 2^52, so with a fraction between +2^52 and
    // -2^52 the sum is 0.0 in listing order, and 0.5 if the fraction came
    // last: a merge that adds the settled integers first would say 0.5.
    let dir = tempfile::tempdir().unwrap();
    let key = encode_key("c", "c_total", [], "C.");
    let mut writers: Vec<FileWriter> = ["1", "2", "3"]
        .iter()
        .map(|pid| {
            let mut file = FileWriter::open(
                dir.path(),
                &FileName::new(MetricKind::Counter, *pid).unwrap(),
            )
            .unwrap();
            file.slot(&key).unwrap().add(0.0);
            file
        })
        .collect();
    // Which file comes where in the merge: the directory's own order.
    let listing = multiprom_collector::scan_dir(dir.path()).unwrap();
    let place = |pid: &str| {
        listing
            .iter()
            .position(|p| p.ends_with(format!("counter_{pid}.db")))
            .unwrap()
    };
    let mut by_place: Vec<(usize, usize)> =
        (0..3).map(|i| (place(&(i + 1).to_string()), i)).collect();
    by_place.sort_unstable();
    let (first, middle, last) = (by_place[0].1, by_place[1].1, by_place[2].1);
    let live = (middle + 1).to_string();
    let collector = DirCollector::new(dir.path())
        .settle_exited_writers(move |name: &FileName| name.id() != live);
    writers[first]
        .slot(&key)
        .unwrap()
        .add(4_503_599_627_370_496.0);
    writers[last]
        .slot(&key)
        .unwrap()
        .add(-4_503_599_627_370_496.0);
    for _ in 0..4 {
        collector.collect().unwrap();
    }
    // The live writer adds a fraction through its map.
    writers[middle].slot(&key).unwrap().add(0.5);
    let text = collector.collect().unwrap().encode(Format::Prometheus);
    let fresh = DirCollector::new(dir.path())
        .collect()
        .unwrap()
        .encode(Format::Prometheus);
    assert_eq!(value_of(&fresh, "c_total"), "c_total 0.0");
    assert_eq!(text, fresh);
}

#[test]
fn a_live_writer_s_new_series_shows_in_a_quiet_collection() {
    // Among settled files, a live writer adds a series through its map (no
    // event): the next collection, which looks only at files not settled,
    // merges it and reports the file's new entry count.
    let dir = tempfile::tempdir().unwrap();
    let mut gone = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, "1").unwrap(),
    )
    .unwrap();
    gone.slot(&encode_key("c", "c_total", [("w", "1")], "C."))
        .unwrap()
        .add(1.0);
    let mut live = FileWriter::open(
        dir.path(),
        &FileName::new(MetricKind::Counter, "2").unwrap(),
    )
    .unwrap();
    live.slot(&encode_key("c", "c_total", [("w", "2")], "C."))
        .unwrap()
        .add(1.0);
    let collector =
        DirCollector::new(dir.path()).settle_exited_writers(|name: &FileName| name.id() == "1");
    for _ in 0..4 {
        collector.collect().unwrap();
    }
    let before = collector.collect().unwrap();
    assert_eq!(before.stats.files_settled, 1);
    live.slot(&encode_key("c", "c_total", [("w", "3")], "C."))
        .unwrap()
        .add(7.0);
    let after = collector.collect().unwrap();
    let text = after.encode(Format::Prometheus);
    assert!(text.contains("c_total{w=\"3\"} 7.0\n"), "{text}");
    let entries = |scrape: &multiprom_collector::Scrape| {
        scrape
            .files
            .iter()
            .find(|f| f.path.ends_with("counter_2.db"))
            .map(|f| f.entries)
    };
    assert_eq!((entries(&before), entries(&after)), (Some(1), Some(2)));
    let fresh = DirCollector::new(dir.path()).collect().unwrap();
    assert_eq!(text, fresh.encode(Format::Prometheus));
}
