//! Logs for the long-running commands (`serve`, `run`, `demo`): tracing to
//! stderr, as text (default), logfmt or JSON lines, at `--log.level`, else
//! as `RUST_LOG` says, else `info`.

use std::io::{IsTerminal, Write};

use tracing_subscriber::EnvFilter;

/// `--log.level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Level {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        }
    }
}

/// `--log.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Format {
    /// For people: `2024-01-01T00:00:00.000000Z  INFO message`.
    #[default]
    Text,
    /// `ts=... level=info message="..."` (Prometheus's exporters
    /// name the text `msg`).
    Logfmt,
    /// One JSON object per line.
    Json,
}

/// The logging flags of the long-running commands.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LogArgs {
    /// Only log at this level or above (debug explains every scrape: files
    /// listed, read and skipped) [default: $RUST_LOG, else info]
    #[arg(long = "log.level", value_name = "LEVEL", value_enum)]
    pub level: Option<Level>,
    /// Log line layout on stderr.
    #[arg(
        long = "log.format",
        value_name = "FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub format: Format,
}

/// Installs the stderr logger. Colours only for text on a terminal. A bad
/// `RUST_LOG` is reported and the default used, rather than failing the
/// command.
pub(crate) fn init(args: &LogArgs) {
    let filter = match args.level {
        Some(level) => EnvFilter::new(level.as_str()),
        None => match EnvFilter::try_from_default_env() {
            Ok(filter) => filter,
            Err(err) => {
                if std::env::var_os(EnvFilter::DEFAULT_ENV).is_some() {
                    eprintln!("multiprom: warning: ignoring RUST_LOG: {err}");
                }
                EnvFilter::new("info")
            }
        },
    };
    let _ = match args.format {
        Format::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(|| OneLine(std::io::stderr()))
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .try_init(),
        Format::Json => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .json()
            .with_ansi(false)
            .with_target(false)
            .try_init(),
        Format::Logfmt => tracing_logfmt::builder()
            .with_target(false)
            .subscriber_builder()
            .with_env_filter(filter)
            .with_writer(|| Apostrophes(std::io::stderr()))
            .try_init(),
    };
}

/// A logfmt log's writer: tracing-logfmt quotes a value with Rust's
/// `escape_debug`, which also escapes `'` (`workers\' files`), an escape
/// logfmt does not have; this writes those apostrophes as they are. Other
/// escapes (`\"`, `\\`, `\n`) are logfmt's and stay.
struct Apostrophes<W>(W);

impl<W: Write> Write for Apostrophes<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !buf.windows(2).any(|pair| pair == b"\\'") {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut line = Vec::with_capacity(buf.len());
        let mut bytes = buf.iter().copied();
        while let Some(byte) = bytes.next() {
            if byte != b'\\' {
                line.push(byte);
                continue;
            }
            // An escape: the backslash and what it escapes, as a pair, so
            // an escaped backslash before an apostrophe stays one.
            match bytes.next() {
                Some(b'\'') => line.push(b'\''),
                Some(next) => line.extend_from_slice(&[byte, next]),
                None => line.push(byte),
            }
        }
        self.0.write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// A text log's writer: each event is one line, a line break inside it (a
/// file name, a header may hold one) written as `\n` or `\r`, so nothing
/// logged can forge a line of its own. logfmt and JSON quote their values.
/// The formatter writes each event, ending in its one `\n`, at once.
struct OneLine<W>(W);

impl<W: Write> Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let body = buf.strip_suffix(b"\n").unwrap_or(buf);
        if !body.iter().any(|&b| b == b'\n' || b == b'\r') {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut line = Vec::with_capacity(buf.len() + 8);
        for &byte in body {
            match byte {
                b'\n' => line.extend_from_slice(b"\\n"),
                b'\r' => line.extend_from_slice(b"\\r"),
                byte => line.push(byte),
            }
        }
        line.extend_from_slice(&buf[body.len()..]);
        self.0.write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_break_inside_an_event_is_escaped() {
        let mut out = OneLine(Vec::new());
        out.write_all(b"skipped counter_9\n2026-01-01T00:00:00Z  INFO forged.db\r: bad\n")
            .unwrap();
        out.write_all(b"plain\n").unwrap();
        assert_eq!(
            String::from_utf8(out.0).unwrap(),
            "skipped counter_9\\n2026-01-01T00:00:00Z  INFO forged.db\\r: bad\nplain\n"
        );
    }

    #[test]
    fn logfmt_apostrophes_are_not_escaped() {
        let mut out = Apostrophes(Vec::new());
        out.write_all(b"level=info message=\"compacting exited workers\\' files\"\n")
            .unwrap();
        // An escaped backslash before an apostrophe, and other escapes, stay.
        out.write_all(b"message=\"a\\\\\\'b \\\"c\\\" d\\ne\"\n")
            .unwrap();
        assert_eq!(
            String::from_utf8(out.0).unwrap(),
            "level=info message=\"compacting exited workers' files\"\nmessage=\"a\\\\'b \\\"c\\\" d\\ne\"\n"
        );
    }
}
