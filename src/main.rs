//! The `dfck` binary: parse, dispatch, and map outcomes and errors to exit codes in this one
//! place. Nothing else.

use clap::error::ErrorKind;
use dfck::cli::{help, run};
use dfck_core::outcome::Outcome;
use std::sync::atomic::{AtomicBool, Ordering};

/// mimalloc keeps freed memory for reuse: reading a store allocates and frees a buffer per
/// checkpoint, each larger than the last on a growing thread, which glibc's malloc serves
/// with a fresh mmap every time (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Whether stdout (fd 1) was closed when the process was executed (`dfck … >&-`), read
/// before Rust's runtime reopens a closed standard descriptor on `/dev/null` (read-write,
/// before `main`) — after that, a closed stdout looks exactly like a `/dev/null` a parent
/// opened read-write on purpose (Python's `subprocess.DEVNULL`, many supervisors).
static STDOUT_CLOSED_AT_EXEC: AtomicBool = AtomicBool::new(false);

/// Runs from the ELF `.init_array`, which the C runtime calls before `main` and so before
/// Rust's runtime touches the standard descriptors.
extern "C" fn probe_stdout() {
    use nix::errno::Errno;
    use nix::fcntl::{FcntlArg, fcntl};
    // SAFETY: fd 1 is only borrowed for this one `fcntl(F_GETFD)` call, which neither
    // closes nor otherwise changes it; nothing else runs in the process yet.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(1) };
    let closed = fcntl(fd, FcntlArg::F_GETFD) == Err(Errno::EBADF);
    STDOUT_CLOSED_AT_EXEC.store(closed, Ordering::Relaxed);
}

/// Registers [`probe_stdout`] as a constructor.
// SAFETY: a function pointer of the C ABI with no arguments is exactly what `.init_array`
// entries are; the function only reads fd 1's flags.
#[used]
#[unsafe(link_section = ".init_array")]
static PROBE_STDOUT: extern "C" fn() = probe_stdout;

fn main() {
    dfck::render::stdout_closed_at_exec(STDOUT_CLOSED_AT_EXEC.load(Ordering::Relaxed));
    let code = match help::parse() {
        Ok(cli) => match run(cli) {
            Ok(Outcome::Clean) => 0,
            Ok(Outcome::Findings | Outcome::Refused | Outcome::Failed) => 1,
            Ok(Outcome::Interrupted) => 130,
            Err(e) => fail(&e.to_string()),
        },
        Err(e) => match e.kind() {
            // --help and --version print in full, on stdout, and succeed.
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                let _ = e.print();
                0
            }
            _ => fail(&usage_line(&e)),
        },
    };
    std::process::exit(code);
}

/// Prints one error line on stderr; exit code 2.
fn fail(msg: &str) -> i32 {
    // One line, and no terminal control sequences from store data.
    let msg = msg.replace(['\n', '\r'], " ");
    let msg = dfck::render::escape::cell(&msg);
    eprintln!("dfck: error: {msg}");
    2
}

/// A clap usage error as one line: its message, its tips, and where to read more.
fn usage_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("Usage:") || line.starts_with("For more information")
        {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        parts.push(line.to_owned());
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        parts = vec!["a subcommand is required".to_owned()];
    }
    let mut out = parts.join("; ");
    if out.is_empty() {
        out = "invalid arguments".to_owned();
    }
    out.push_str(" (see dfck --help)");
    out
}
