//! `dfck diff THREAD A B [--thread2 T] [--db2 TARGET]`: what changed between two states.

use super::{GlobalArgs, ReducerArg, output};
use crate::commands::inspect::{ReducerChoice, state_report};
use crate::render;
use clap::Args;
use dfck_core::error::Error;
use dfck_core::materialize::View;
use dfck_core::outcome::Outcome;
use dfck_core::target::Target;

/// Arguments of `dfck diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The thread of checkpoint A (and of B, unless --thread2).
    pub thread: String,
    /// Checkpoint A: an id or a unique prefix of one.
    pub a: String,
    /// Checkpoint B: an id or a unique prefix of one.
    pub b: String,
    /// The thread of checkpoint B.
    #[arg(long, value_name = "THREAD")]
    pub thread2: Option<String>,
    /// The store of checkpoint B (a SQLite path, postgresql:// URL or keyword DSN; default:
    /// the same store as A).
    #[arg(long, value_name = "TARGET")]
    pub db2: Option<String>,
    /// Namespace (default: the root graph, "").
    #[arg(long, value_name = "NS", default_value = "")]
    pub ns: String,
    /// Compare the values stored at the checkpoints, without their own pending writes.
    #[arg(long)]
    pub stored: bool,
    /// Messages reducer for delta replay.
    #[arg(long, value_enum, default_value_t = ReducerArg::Auto)]
    pub reducer: ReducerArg,
}

/// Runs `dfck diff`: exit 0 when the states are equal, 1 when they differ (like `diff`).
pub fn run(global: &GlobalArgs, args: &DiffArgs) -> Result<Outcome, Error> {
    let (target, _) = global.resolve()?;
    let store_a = target.open_read_only()?;
    let second = match &args.db2 {
        Some(db2) => {
            let t = Target::parse(db2).map_err(|e| Error::Usage(format!("--db2: {e}")))?;
            Some((t.open_read_only()?, t.display()))
        }
        None => None,
    };
    let (store_b, shown_b) = match &second {
        Some((s, shown)) => (s.as_ref(), shown.clone()),
        None => (store_a.as_ref(), target.display()),
    };
    let thread_b = args.thread2.as_deref().unwrap_or(&args.thread);
    let view = if args.stored {
        View::Stored
    } else {
        View::State
    };
    let reducer = match args.reducer.fixed() {
        Some(r) => ReducerChoice::Fixed(r),
        None => ReducerChoice::Auto,
    };
    let load = |store: &dyn dfck_core::store::Store, thread: &str, id: &str| {
        let id = dfck_core::address::checkpoint_id(store, thread, &args.ns, id)?;
        state_report(store, thread, &args.ns, Some(&id), view, reducer)
            .map_err(|e| dfck_core::address::hint_error(store, e))
    };
    let a = load(store_a.as_ref(), &args.thread, &args.a)?;
    let b = load(store_b, thread_b, &args.b)?;
    let report = crate::commands::diff::diff(&a, &target.display(), &b, &shown_b);
    output(global.format(), &report, render::conversation::diff_text)?;
    Ok(if report.identical {
        Outcome::Clean
    } else {
        Outcome::Findings
    })
}
