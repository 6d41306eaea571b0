//! Where rendered output goes: reports and text to stdout, notes to stderr. A closed pipe
//! (`dfck … | head`) ends the output quietly instead of failing the command.

use super::Format;
use crate::error::Error;
use std::io::Write;
use std::os::fd::AsFd;

/// Fails when dfck was started with stdout closed (`dfck … >&-`). Rust's runtime reopens a
/// closed stdout on /dev/null read-write before `main`, so every write would "succeed" with
/// the output lost; a shell's `> /dev/null` opens it write-only, so the two differ.
fn stdout_open() -> Result<(), Error> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let out = std::io::stdout();
    let fd = out.as_fd();
    let closed_at_start = fcntl(fd, FcntlArg::F_GETFL)
        .is_ok_and(|fl| OFlag::from_bits_truncate(fl) & OFlag::O_ACCMODE == OFlag::O_RDWR)
        && nix::sys::stat::fstat(fd).is_ok_and(|st| {
            st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFCHR
                && nix::sys::stat::major(st.st_rdev) == 1
                && nix::sys::stat::minor(st.st_rdev) == 3
        });
    if closed_at_start {
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
                .map_err(|e| match e {
                    super::json::JsonError::Io(e) => Error::Io(e),
                    super::json::JsonError::Value(m) => Error::Render(m),
                })
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
    }
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

/// Reports what the engine says during a run (backup written, WAL left).
pub fn write_event(e: crate::write::WriteEvent<'_>) {
    match e {
        crate::write::WriteEvent::BackupWritten(dest) => {
            note(&format!("dfck: backup written to {}", dest.display()));
        }
        crate::write::WriteEvent::WalLeft(left) => note(&format!(
            "dfck: warning: another connection holds a read transaction (or the write lock) on the store, so the WAL could not be checkpointed and truncated; {:.1} MiB of WAL are left (everything committed is durable in it; SQLite folds it into the database once that reader is gone)",
            left.bytes as f64 / f64::from(1u32 << 20)
        )),
    }
}
