//! `multiprom scrape`: merge a directory once and print it.
//!
//! Exit codes: 0 printed (bad files are skipped and reported on stderr), 1
//! with `--strict` when a file was bad (an exemplar or native histogram file
//! read for the output included), 2 when there is no usable directory
//! (or `--no-accumulate` was asked with `--format protobuf`).
//! A directory with no `*.db` files prints nothing (or only `# EOF`) and
//! exits 0, as it is a normal state before the first worker starts, but says
//! so on stderr: a cron job publishing the output should not publish an
//! empty file unnoticed.
//! A file that vanished while being read (a worker reaped by
//! `mark_process_dead` mid-scrape) is reported but is not "bad": it is the
//! normal race Python also tolerates for live gauges, so `--strict` ignores it.

use multiprom_collector::exposition::encode_protobuf;
use multiprom_collector::{
    CollectOptions, DirCollector, Escaping, Exemplars, FileState, Format, Natives, Scrape,
    ServedView, Warning,
};
use std::io::Write;
use std::path::PathBuf;

use crate::dir_resolution;
use crate::exit_code::ExitCode;

/// Exposition format of `multiprom scrape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
// No doc comments on the values: clap would then list them one per
// paragraph and switch all of `--help` to the sparse long layout.
pub(crate) enum FormatArg {
    Prometheus,
    Openmetrics,
    Protobuf,
}

/// How `multiprom scrape` escapes names that are not legacy Prometheus
/// names: `prometheus_client`'s `generate_latest(registry, escaping)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum EscapingArg {
    Underscores,
    #[value(name = "allow-utf-8")]
    AllowUtf8,
    Dots,
    Values,
}

impl From<EscapingArg> for Escaping {
    fn from(arg: EscapingArg) -> Self {
        match arg {
            EscapingArg::Underscores => Escaping::Underscores,
            EscapingArg::AllowUtf8 => Escaping::AllowUtf8,
            EscapingArg::Dots => Escaping::Dots,
            EscapingArg::Values => Escaping::Values,
        }
    }
}

/// Arguments of `multiprom scrape`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The directory is --dir, else $PROMETHEUS_MULTIPROC_DIR, else (only when that is unset) the \
deprecated $prometheus_multiproc_dir, as prometheus_client reads them: a variable set but empty \
names no directory.

Exit status: 0 when printed (bad files are skipped with a warning on stderr; a directory with \
no *.db files prints nothing and warns), 1 with --strict when a file was bad, 2 when there is \
no usable directory (or --no-accumulate was given with --format protobuf).")]
pub(crate) struct Args {
    /// The multiprocess directory [default: $PROMETHEUS_MULTIPROC_DIR]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Prometheus text 0.0.4, OpenMetrics 1.0.0 (ends with # EOF), or the Prometheus protobuf format (length-delimited MetricFamily messages)
    #[arg(long, value_enum, default_value = "prometheus")]
    format: FormatArg,
    /// Raw histogram buckets, no _count (Python's accumulate=False; not with --format protobuf, whose buckets are cumulative)
    #[arg(long)]
    no_accumulate: bool,
    /// How names that are not legacy Prometheus names are written, as prometheus_client's generate_latest(registry, escaping); allow-utf-8 is what Prometheus 3 asks for (protobuf: names never quoted)
    #[arg(long, value_enum, default_value = "underscores")]
    escaping: EscapingArg,
    /// Exit 1 if a file was bad (still skipped, the rest still printed), an exemplar or native histogram file read for the output included
    #[arg(long)]
    strict: bool,
}

/// Runs `multiprom scrape`.
pub(crate) fn main(args: Args) -> ExitCode {
    if args.no_accumulate && args.format == FormatArg::Protobuf {
        // A histogram message holds cumulative counts only: raw buckets
        // would be read as cumulative ones, silently wrong.
        eprintln!("multiprom scrape: --no-accumulate cannot be used with --format protobuf (its histogram buckets are cumulative)");
        return ExitCode::from(2);
    }
    let dir = match dir_resolution::resolve(args.dir) {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("multiprom scrape: {err}");
            return ExitCode::from(2);
        }
    };
    let options = CollectOptions::default().accumulate(!args.no_accumulate);
    // One collection: reading the files costs less than mapping them (no
    // maps to set up and tear down), and the RSS holds no file pages.
    let view = ServedView::new(DirCollector::with_options(&dir, options).map_files(false));
    // Native histograms are shown by the protobuf format only.
    let natives = match args.format {
        FormatArg::Protobuf => Natives::Merge,
        FormatArg::Prometheus | FormatArg::Openmetrics => Natives::Skip,
    };
    // Exemplars by OpenMetrics and protobuf only.
    let exemplars = match args.format {
        FormatArg::Prometheus => Exemplars::Skip,
        FormatArg::Protobuf | FormatArg::Openmetrics => Exemplars::Attach,
    };
    let scrape = match view.collect(None, natives, exemplars) {
        Ok(scrape) => scrape,
        Err(err) => {
            // Listed as a directory a moment ago, now unreadable or gone.
            eprintln!("multiprom scrape: {err}");
            return ExitCode::from(2);
        }
    };
    // The process ends right after this one collection: freeing the
    // collector's tables (a key table and an index entry per file) one
    // allocation at a time would only delay the exit.
    let body = match args.format {
        FormatArg::Prometheus => text(&scrape, Format::Prometheus, args.escaping.into()),
        FormatArg::Openmetrics => text(&scrape, Format::OpenMetrics, args.escaping.into()),
        FormatArg::Protobuf => {
            // With each cumulative series' start, as `serve` gives it.
            let started = view.start_times(&scrape, true);
            let mut out = Vec::with_capacity(64 * scrape.stats.series + 1024);
            let escaping = args.escaping.into();
            encode_protobuf(
                &scrape.families,
                &scrape.natives,
                Some(&started),
                escaping,
                &mut out,
            );
            out
        }
    };
    std::mem::forget(view);
    // The body first, in one write: stderr warnings then never interleave
    // with a half-written body in a terminal.
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&body).and_then(|()| stdout.flush()) {
        Ok(()) => {}
        // `multiprom scrape | head`: the reader is gone, which is not our error.
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(err) => {
            eprintln!("multiprom scrape: cannot write to stdout: {err}");
            return ExitCode::from(1);
        }
    }
    drop(stdout);
    let mut stderr = std::io::stderr().lock();
    if scrape.files.is_empty() {
        let _ = writeln!(
            stderr,
            "multiprom scrape: warning: {}: no *.db files, nothing to merge",
            dir.display()
        );
    }
    for warning in &scrape.warnings {
        let _ = writeln!(stderr, "multiprom scrape: warning: {warning}");
    }
    let bad = scrape
        .files
        .iter()
        .filter(|f| f.state() == FileState::Bad)
        .count();
    // A bad exemplar or native histogram file read for this output is a bad
    // file too (the samples of its `*.db` file were served without them).
    let bad_companions = scrape
        .warnings
        .iter()
        .filter(|w| matches!(w, Warning::Exemplars(_) | Warning::NativeHistograms(_)))
        .count();
    if args.strict && bad + bad_companions > 0 {
        let _ = writeln!(
            stderr,
            "multiprom scrape: {} bad file(s) skipped (--strict)",
            bad + bad_companions
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// `scrape`'s families in a text `format`.
fn text(scrape: &Scrape, format: Format, escaping: Escaping) -> Vec<u8> {
    let mut out = String::with_capacity(128 * scrape.stats.series + 4096);
    format.encode_all(&[&scrape.families], escaping, &mut out);
    out.into_bytes()
}
