//! Debug logs that explain a scrape: what was listed, read and skipped, so
//! `--log.level debug` answers "why is this series missing?" without a
//! debugger. Trace level adds one line per file.

use multiprom_collector::{FileState, Scrape};

/// Logs `scrape` of `dir` at debug (summary and every skipped file) and
/// trace (every file) level. Cheap when those levels are off.
/// `number` counts the endpoint's collections from 1.
pub(crate) fn log_scrape(dir: &std::path::Path, scrape: &Scrape, number: u64) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let stats = &scrape.stats;
    let left_out = stats.files_left_out;
    tracing::debug!(
        "scrape {}: listed {} *.db files in {} ({left_out} left out as exited processes' live gauges); read {} ok{}, skipped {} bad and {} vanished; {} bytes read, {} samples, {:.1} ms; {}; {}",
        number,
        scrape.files.len() + left_out,
        dir.display(),
        stats.files_ok,
        if stats.files_settled > 0 {
            format!(" ({} of them settled: writer gone, left unread)", stats.files_settled)
        } else {
            String::new()
        },
        stats.files_bad,
        stats.files_vanished,
        stats.bytes_read,
        stats.series,
        stats.duration.as_secs_f64() * 1000.0,
        // What makes one scrape slower than the last: a new merge plan
        // (files came or went, or gained keys), a look at every file.
        if stats.planned {
            "merge plan rebuilt"
        } else {
            "merge plan reused"
        },
        if stats.full_look {
            "looked at every file"
        } else {
            "looked only at files the directory watch named"
        },
    );
    for file in scrape.files.iter() {
        match (&file.problem, file.state()) {
            (Some(problem), FileState::Bad) => tracing::debug!("skipped (bad): {problem}"),
            (Some(problem), _) => tracing::debug!("skipped (vanished): {problem}"),
            (None, _) => tracing::trace!(
                "read {}: {} entries, {} of {} bytes used",
                file.path.display(),
                file.entries,
                file.used,
                file.file_size
            ),
        }
    }
}
