//! A warm collection of an unchanged directory reuses the merge plan, also
//! when the directory holds more label tuples than the interner's sweep
//! threshold (thousands of `gauge` files in mode `all`, each sample with its
//! own `pid` label).

use crate::support::maps::maps_of;
use multiprom_collector::DirCollector;
use multiprom_format::{encode_key, FileName, FileWriter, GaugeMode, MetricKind};

#[test]
fn unchanged_directory_reuses_the_plan() {
    let dir = tempfile::tempdir().expect("a temp dir");
    for pid in 0..600 {
        let name = FileName::new(MetricKind::Gauge(GaugeMode::All), pid.to_string()).unwrap();
        let mut writer = FileWriter::open(dir.path(), &name).unwrap();
        for route in 0..10 {
            let route = format!("/route{route}");
            let key = encode_key("busy", "busy", [("route", route.as_str())], "Busy.");
            writer.slot(&key).unwrap().set(f64::from(pid));
        }
    }
    let collector = DirCollector::new(dir.path());
    let first = collector.collect().unwrap();
    assert!(first.stats.planned, "the first collection works out a plan");
    assert_eq!(first.stats.series, 6_000);
    for collection in 2..=4 {
        let warm = collector.collect().unwrap();
        assert_eq!(warm.stats.series, 6_000);
        assert!(
            !warm.stats.planned,
            "collection {collection} of an unchanged directory planned the merge again"
        );
    }
}

/// A directory big enough that the values are copied out by several threads
/// still adds every sum's terms in listing order, as Python does: values
/// of about +-9e15 next to small ones make any other order give other bits.
#[test]
fn big_directory_sums_in_listing_order() {
    const FILES: usize = 240;
    const KEYS: usize = 500;
    let dir = tempfile::tempdir().expect("a temp dir");
    let value = |file: usize, key: usize| -> f64 {
        match (file * 7 + key) % 5 {
            0 => 9.0e15 + (file as f64),
            1 => -9.0e15 - (key as f64),
            2 => 0.1 * (file as f64 + 1.0),
            3 => 1.0 / (key as f64 + 3.0),
            _ => -0.7 * (file as f64),
        }
    };
    for file in 0..FILES {
        let name = FileName::new(MetricKind::Counter, (1000 + file).to_string()).unwrap();
        let mut writer = FileWriter::open(dir.path(), &name).unwrap();
        for key in 0..KEYS {
            let name = format!("c{key}");
            let sample = format!("c{key}_total");
            let key_text = encode_key(&name, &sample, [], "A counter.");
            writer.slot(&key_text).unwrap().set(value(file, key));
        }
    }
    // The expected sums, file by file in the order the directory lists them.
    let listing = multiprom_collector::scan_dir(dir.path()).unwrap();
    let mut expected = vec![0.0f64; KEYS];
    for path in &listing {
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let file: usize = stem
            .trim_start_matches("counter_")
            .parse::<usize>()
            .unwrap()
            - 1000;
        for (key, sum) in expected.iter_mut().enumerate() {
            *sum += value(file, key);
        }
    }
    for map in [true, false] {
        let collector = DirCollector::new(dir.path()).map_files(map);
        for _ in 0..2 {
            let scrape = collector.collect().unwrap();
            assert_eq!(scrape.families.len(), KEYS);
            for family in &scrape.families {
                let key: usize = family.name.trim_start_matches('c').parse().unwrap();
                let got = family.samples[0].value;
                assert_eq!(
                    got.to_bits(),
                    expected[key].to_bits(),
                    "{}: {got:e}, not {:e} (mapped: {map})",
                    family.name,
                    expected[key]
                );
            }
        }
    }
}

/// Files read ahead by other threads (a first collection of many files)
/// are reported exactly as a collector's second collection reports them,
/// which reads the good files through its maps and the bad ones again on
/// its own thread (too few to read ahead): the same families, the same
/// problems.
#[test]
fn read_ahead_reports_what_mapping_reports() {
    let dir = tempfile::tempdir().expect("a temp dir");
    for pid in 0..150 {
        let name = FileName::new(MetricKind::Counter, pid.to_string()).unwrap();
        let mut writer = FileWriter::open(dir.path(), &name).unwrap();
        let key = encode_key(
            "c",
            "c_total",
            [("pid_mod", (pid % 7).to_string().as_str())],
            "C.",
        );
        writer.slot(&key).unwrap().set(f64::from(pid));
    }
    // Damage: a header claiming more than the file holds, garbage after a
    // good header, a file too short for a header, a directory named *.db.
    let path = |pid: u32| dir.path().join(format!("counter_{pid}.db"));
    let mut bytes = std::fs::read(path(10)).unwrap();
    bytes[..4].copy_from_slice(&1_000_000i32.to_le_bytes());
    std::fs::write(path(10), &bytes).unwrap();
    let mut bytes = std::fs::read(path(20)).unwrap();
    bytes[8..16].copy_from_slice(&[0xff; 8]);
    std::fs::write(path(20), &bytes).unwrap();
    std::fs::write(path(30), [1u8, 2]).unwrap();
    std::fs::create_dir(dir.path().join("counter_99999.db")).unwrap();

    let read = DirCollector::new(dir.path())
        .map_files(false)
        .collect()
        .unwrap();
    let mapping = DirCollector::new(dir.path());
    mapping.collect().unwrap();
    let mapped = mapping.collect().unwrap();
    assert_eq!(maps_of(dir.path()), 147, "the good files are mapped");
    assert_eq!(read.files.len(), 151);
    assert_eq!(
        read.stats.files_bad,
        4,
        "{:#?}",
        read.problems().collect::<Vec<_>>()
    );
    assert_eq!(
        format!("{:?}", read.families),
        format!("{:?}", mapped.families)
    );
    let problems = |scrape: &multiprom_collector::Scrape| {
        scrape
            .problems()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(problems(&read), problems(&mapped));
}
