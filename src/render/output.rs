//! Where rendered output goes: reports and text to stdout, notes to stderr. A closed pipe
//! (`dfck … | head`) ends the output quietly instead of failing the command.

use super::Format;
use dfck_core::error::Error;
use std::io::Write;
use std::os::fd::AsFd;

/// Whether stdout was closed when dfck was executed, as the binary saw it before Rust's
/// runtime reopened it (see `main.rs`).
static CLOSED_AT_EXEC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Tells the output layer that stdout was closed at exec (`dfck … >&-`): the binary calls
/// this first thing, with what it read before Rust's runtime put `/dev/null` there.
pub fn stdout_closed_at_exec(closed: bool) {
    CLOSED_AT_EXEC.store(closed, std::sync::atomic::Ordering::Relaxed);
}

/// Fails when dfck was started with stdout closed: every write would "succeed" into the
/// `/dev/null` Rust's runtime put there, with the output lost. A `/dev/null` the parent
/// opened on purpose (a shell's `> /dev/null`, Python's `subprocess.DEVNULL`, systemd's
/// `StandardOutput=null`) is an ordinary stdout.
fn stdout_open() -> Result<(), Error> {
    if CLOSED_AT_EXEC.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(Error::Io(std::io::Error::other(
            "standard output is closed: nowhere to write the output",
        )));
    }
    Ok(())
}

/// Writes command output to stdout; a closed pipe ends quietly.
pub fn emit(text: &str) -> Result<(), Error> {
    stdout_open()?;
    let mut out = std::io::stdout().lock();
    quiet_pipe(
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(Error::from),
    )
}

/// Writes a report: a table, one JSON document (compact on one line, indented with
/// `--pretty`), NDJSON (one row per line) or CSV (flat rows).
pub fn output<T: serde::Serialize>(
    format: Format,
    report: &T,
    table: impl FnOnce(&T) -> String,
) -> Result<(), Error> {
    match format {
        Format::Table => emit(&table(report)),
        Format::Json if super::records::style().pretty => {
            let mut s =
                serde_json::to_string_pretty(report).map_err(|e| Error::Render(e.to_string()))?;
            s.push('\n');
            emit(&s)
        }
        Format::Json => {
            stdout_open()?;
            // A duplicate of the stdout descriptor: large documents skip the line buffer of
            // `std::io::stdout()`, which searches every block for a newline.
            // The serializer hands the descriptor 64 KiB blocks itself.
            let out = std::io::stdout().lock();
            let mut w: Box<dyn Write> = match out.as_fd().try_clone_to_owned() {
                Ok(fd) => Box::new(std::fs::File::from(fd)),
                Err(_) => Box::new(out),
            };
            let r = super::json::to_writer(&mut w, report)
                .map_err(json_error)
                .and_then(|()| {
                    w.write_all(b"\n")?;
                    w.flush()?;
                    Ok(())
                });
            quiet_pipe(r)
        }
        Format::Ndjson | Format::Csv => {
            let doc = serde_json::to_value(report).map_err(|e| Error::Render(e.to_string()))?;
            let text = if format == Format::Csv {
                super::records::csv(&doc)?
            } else {
                super::records::ndjson(&doc)?
            };
            emit(&text)
        }
        // The command line lets only the store summary ask for it, which renders it itself.
        Format::Openmetrics => Err(Error::Usage(
            "--format openmetrics: this report has no metrics (only `dfck inspect` has)".into(),
        )),
    }
}

/// A JSON serializer's error as dfck's.
pub(crate) fn json_error(e: super::json::JsonError) -> Error {
    match e {
        super::json::JsonError::Io(e) => Error::Io(e),
        super::json::JsonError::Value(m) => Error::Render(m),
    }
}

/// Runs `f` on a buffered stdout (a duplicate of its descriptor, as compact JSON is
/// written), then flushes; a closed pipe ends quietly.
pub(crate) fn with_stdout(
    f: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Error> {
    stdout_open()?;
    let out: Box<dyn Write> = match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(_) => Box::new(std::io::stdout().lock()),
    };
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    let r = f(&mut w).and_then(|()| w.flush());
    if r.is_err() {
        // What is buffered goes nowhere: the write failed or the reader is gone.
        let _ = w.into_parts();
    }
    quiet_pipe(r.map_err(Error::from))
}

/// Writes one line (a newline is added) to stderr: notes about what a command did or found.
pub fn note(line: &str) {
    eprintln!("{line}");
}

fn quiet_pipe(r: Result<(), Error>) -> Result<(), Error> {
    match r {
        Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// NDJSON rows written to stdout as a command produces them (a streamed report), through a
/// buffer; each row exactly as [`output`] writes it. A closed pipe ends the output quietly.
pub struct RowWriter {
    out: Option<std::io::BufWriter<Box<dyn Write + Send>>>,
}

impl RowWriter {
    /// A writer on stdout (refused when stdout was closed at exec).
    pub fn stdout() -> Result<Self, Error> {
        stdout_open()?;
        let out: Box<dyn Write + Send> = match std::io::stdout().as_fd().try_clone_to_owned() {
            Ok(fd) => Box::new(std::fs::File::from(fd)),
            Err(_) => Box::new(std::io::stdout()),
        };
        Ok(RowWriter {
            out: Some(std::io::BufWriter::with_capacity(1 << 16, out)),
        })
    }

    /// Writes one row as one line.
    pub fn row<T: serde::Serialize>(&mut self, row: &T) -> Result<(), Error> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        // Straight into the buffer: the same bytes as through a `serde_json::Value`
        // (`preserve_order` keeps the fields' order), without building one per row.
        let mut line = Vec::with_capacity(512);
        super::json::to_writer(&mut line, row).map_err(json_error)?;
        line.push(b'\n');
        let r = out.write_all(&line).map_err(Error::from);
        self.settle(r)
    }

    /// Flushes what is buffered.
    pub fn finish(&mut self) -> Result<(), Error> {
        let r = match self.out.as_mut() {
            Some(out) => out.flush().map_err(Error::from),
            None => Ok(()),
        };
        self.settle(r)
    }

    /// After a broken pipe nothing more is written, quietly.
    fn settle(&mut self, r: Result<(), Error>) -> Result<(), Error> {
        if matches!(&r, Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe) {
            if let Some(out) = self.out.take() {
                // The buffered rest goes nowhere: the reader is gone.
                let _ = out.into_parts();
            }
        }
        quiet_pipe(r)
    }
}

/// Reports what the engine says during a run (backup written, WAL left).
pub fn write_event(e: dfck_core::write::WriteEvent<'_>) {
    match e {
        dfck_core::write::WriteEvent::BackupWritten(dest) => {
            note(&format!("dfck: backup written to {}", dest.display()));
        }
        dfck_core::write::WriteEvent::CacheNotPurged(thread, why) => note(&format!(
            "dfck: warning: {}: DeerFlow's history cache was not purged ({}); DeerFlow may show the old history until the keys expire, or restart it",
            super::escape::cell(thread),
            super::escape::cell(why)
        )),
        dfck_core::write::WriteEvent::WalLeft(left) if left.of_target => note(&format!(
            "dfck: warning: another connection holds a read transaction on the target, so its WAL could not be truncated; {:.1} MiB of WAL are left (everything committed is durable in it)",
            left.bytes as f64 / f64::from(1u32 << 20)
        )),
        dfck_core::write::WriteEvent::WalLeft(left) => note(&format!(
            "dfck: warning: another connection holds a read transaction (or the write lock) on the store, so the WAL could not be checkpointed and truncated; {:.1} MiB of WAL are left (everything committed is durable in it; SQLite folds it into the database once that reader is gone)",
            left.bytes as f64 / f64::from(1u32 << 20)
        )),
    }
}
