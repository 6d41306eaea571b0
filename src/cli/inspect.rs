//! `dfck inspect [THREAD] [--state …]`.

use super::{GlobalArgs, ReducerArg, output};
use crate::commands::inspect::{
    ConfiguredMode, ReducerChoice, SummaryOptions, state_report, thread_report,
};
use crate::commands::space::SortKey;
use crate::commands::summary::{summarize_each, summarize_with};
use crate::render::{self, TerminalProgress};
use clap::Args;
use dfck_core::error::Error;
use dfck_core::materialize::{Reducer, View};
use dfck_core::outcome::Outcome;

/// Arguments of `dfck inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// A thread id: list its checkpoints (or, with --state, show its state).
    pub thread: Option<String>,
    /// Show the materialized state at a checkpoint (default: the head).
    #[arg(long, requires = "thread")]
    pub state: bool,
    /// The checkpoint to materialize (with --state).
    #[arg(long, value_name = "ID", requires = "state")]
    pub checkpoint: Option<String>,
    /// Namespace (default: the root graph, "").
    #[arg(long, value_name = "NS", default_value = "", requires = "thread")]
    pub ns: String,
    /// Show the value stored at the checkpoint, without its own pending writes.
    #[arg(long, requires = "state")]
    pub stored: bool,
    /// Show the channel values exactly as stored (no delta replay; snapshots as `$delta_snapshot`).
    #[arg(long, requires = "state", conflicts_with = "stored")]
    pub raw: bool,
    /// Order of the summary's threads: by name, largest first, most checkpoints first, or
    /// least recently active first.
    #[arg(long, value_enum, default_value_t = SortKey::Name, conflicts_with = "thread")]
    pub sort: SortKey,
    /// List only the first N threads of the summary (in --sort order); counts and bytes stay
    /// the whole store's.
    #[arg(long, value_name = "N", conflicts_with = "thread")]
    pub top: Option<u64>,
    /// Add bytes per channel (stored values and pending writes) for each listed thread; on
    /// SQLite this reads every checkpoint of those threads.
    #[arg(long, conflicts_with = "thread")]
    pub channels: bool,
    /// Add what `prune` (duration-only leaves, --branches) and `migrate full-to-delta` would
    /// give back for each listed thread (their dry runs: reads every checkpoint of those
    /// threads).
    #[arg(long, conflicts_with = "thread")]
    pub savings: bool,
    /// Messages reducer for delta replay.
    #[arg(long, value_enum, default_value_t = ReducerArg::Auto)]
    pub reducer: ReducerArg,
    /// Show only the last N messages (with --state).
    #[arg(long, value_name = "N", requires = "state", conflicts_with = "message")]
    pub last: Option<usize>,
    /// Show only the message with this id (or a unique prefix of it) (with --state).
    #[arg(long, value_name = "ID", requires = "state")]
    pub message: Option<String>,
    /// Show every value whole: message content untruncated, tool calls with their arguments
    /// (with --state).
    #[arg(long, requires = "state")]
    pub full: bool,
}

/// Runs `dfck inspect`.
pub fn run(global: &GlobalArgs, args: &InspectArgs) -> Result<Outcome, Error> {
    let (target, discovered) = global.resolve()?;
    let store = target.open_read_only()?;
    let progress = TerminalProgress::stderr_quiet();
    let format = global.format();
    let checkpoint = match (&args.thread, &args.checkpoint) {
        (Some(thread), Some(c)) => Some(
            dfck_core::address::checkpoint_id(store.as_ref(), thread, &args.ns, c)
                .map_err(|e| dfck_core::address::with_thread_hint(store.as_ref(), e))?,
        ),
        _ => None,
    };
    let shown = show(
        store.as_ref(),
        &discovered,
        args,
        checkpoint.as_deref(),
        format,
        &progress,
    );
    shown.map_err(|e| dfck_core::address::hint_error(store.as_ref(), e))
}

fn show(
    store: &dyn dfck_core::store::Store,
    discovered: &Option<dfck_core::config::Discovered>,
    args: &InspectArgs,
    checkpoint: Option<&str>,
    format: crate::render::Format,
    progress: &TerminalProgress,
) -> Result<Outcome, Error> {
    match (&args.thread, args.state) {
        (None, _) => {
            let opts = SummaryOptions {
                sort: args.sort,
                top: args.top,
                channels: args.channels,
            };
            let config = discovered.as_ref().map(|d| ConfiguredMode {
                path: d.config_path.display().to_string(),
                checkpoint_channel_mode: d.checkpoint_channel_mode,
                snapshot_frequency: d.snapshot_frequency,
            });
            if streams(store, args, format) {
                return stream_summary(store, &opts, config, format, progress);
            }
            let mut s = summarize_with(store, &opts, progress)?;
            let metrics = format == render::Format::Openmetrics;
            // DeerFlow's view is not among the metrics.
            if !metrics {
                s.attach_deerflow(store)?;
            }
            if args.savings {
                let ids: Vec<String> = s.threads.iter().map(|t| t.thread_id.clone()).collect();
                let frequency = discovered.as_ref().map_or(10, |d| d.snapshot_frequency);
                s.savings = Some(crate::commands::savings::project(
                    store, &ids, frequency, progress,
                )?);
            }
            s.config = config;
            if metrics {
                let m = crate::commands::metrics::collect(store, &s, None)?;
                render::emit(&render::openmetrics::render(&m))?;
            } else {
                output(format, &s, render::summary_table)?;
            }
        }
        (Some(thread), false) => {
            let r = thread_report(store, thread, &args.ns, progress)?;
            output(format, &r, render::thread_table)?;
        }
        (Some(thread), true) => {
            let reducer = match args.reducer {
                ReducerArg::Auto => ReducerChoice::Auto,
                ReducerArg::Deerflow => ReducerChoice::Fixed(Reducer::Deerflow),
                ReducerArg::Langgraph => ReducerChoice::Fixed(Reducer::Langgraph),
            };
            let view = if args.raw {
                View::Raw
            } else if args.stored {
                View::Stored
            } else {
                View::State
            };
            let r = state_report(store, thread, &args.ns, checkpoint, view, reducer)?;
            let mut r = r;
            let selection = match (&args.last, &args.message) {
                (Some(n), _) => Some(crate::commands::conversation::MessageSelection::Last(*n)),
                (None, Some(id)) => Some(crate::commands::conversation::MessageSelection::Id(
                    id.clone(),
                )),
                (None, None) => None,
            };
            if let Some(sel) = &selection {
                crate::commands::conversation::select_messages(&mut r, sel)?;
            }
            let text = if args.full {
                render::conversation::state_full_text
            } else {
                render::state_table
            };
            output(format, &r, text)?;
            // A large state is freed by the process exit, not value by value.
            std::mem::forget(r);
        }
    }
    Ok(Outcome::Clean)
}

/// Whether the summary is written as its threads come (memory not growing with them): in
/// thread id order, as the store's scan gives them, without the options that need every
/// thread first (another `--sort`, `--channels`, `--savings`, metrics), in a format that
/// streams ([`render::SummaryStream::streams`]).
fn streams(
    store: &dyn dfck_core::store::Store,
    args: &InspectArgs,
    format: render::Format,
) -> bool {
    args.sort == SortKey::Name
        && !args.channels
        && !args.savings
        && render::SummaryStream::streams(format)
        && !dfck_core::failpoint::Failpoints::from_env("inspect").report_held()
        && store.scans_bytewise()
}

/// The store summary, each batch of threads rendered as it is finished.
fn stream_summary(
    store: &dyn dfck_core::store::Store,
    opts: &SummaryOptions,
    config: Option<ConfiguredMode>,
    format: render::Format,
    progress: &TerminalProgress,
) -> Result<Outcome, Error> {
    let app = crate::commands::deerflow_view::view_each(store)?;
    let mut out = render::SummaryStream::new(format, opts.top, app.is_some())?;
    let mut s = summarize_each(store, opts, progress, &mut |batch| {
        let mut apps = match &app {
            Some((_, data)) => {
                let ids: Vec<&str> = batch.iter().map(|t| t.thread_id.as_str()).collect();
                data.threads(store, &ids)?.into_iter().map(Some).collect()
            }
            None => Vec::new(),
        }
        .into_iter();
        for mut t in batch {
            t.deerflow = apps.next().flatten().map(Box::new);
            out.push(&t)?;
        }
        Ok(())
    })?;
    s.config = config;
    s.deerflow = app.map(|(summary, _)| summary);
    out.finish(&s)?;
    Ok(Outcome::Clean)
}
