//! `dfck bench summarize FILE… [--metrics CSV] [--json | --csv] [--plot FILE.svg]`: flags,
//! loading errors, output and exit codes. The numbers come from [`dfck_bench::summarize`],
//! the text from [`crate::render::bench`], the picture from [`dfck_bench::plot`].
//!
//! Exit codes: 0 when at least one summary was produced; 1 when none was (every table section
//! then says `(no comparable full/delta pairs)`) or when an input line is malformed (the lines are
//! listed on stderr as `path:line: message` under `Malformed JSONL row(s):`); 2 for usage errors
//! and unreadable files.

use crate::cli::{FormatArg, GlobalArgs, emit};
use crate::error::Error;
use crate::render::Format;
use crate::render::bench as render;
use crate::render::bench_reporter::{note, report_replay_aggregates};
use clap::Args;
use dfck_bench::{plot, summarize};
use dfck_core::outcome::Outcome;
use std::path::PathBuf;

/// A parsed `--metrics` value: at least one field name.
#[derive(Debug, Clone)]
pub struct MetricList(pub Vec<String>);

fn metrics_list(s: &str) -> Result<MetricList, dfck_bench::error::BenchError> {
    summarize::parse_metrics(s).map(MetricList).ok_or_else(|| {
        dfck_bench::error::BenchError::Usage("--metrics must contain at least one field".into())
    })
}

/// Arguments of `dfck bench summarize`.
#[derive(Debug, Args)]
pub struct SummarizeArgs {
    /// JSONL result files (`bench channels` / `bench production`, DeerFlow v1 or dfck v2 rows).
    /// Rows of different files never pair with each other.
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
    /// Comma-separated metric fields (default: DeerFlow's list per row kind; for production rows
    /// the default also adds every history_limit_{L}_{cold_ms,warm_p50_ms} found).
    #[arg(long, value_name = "CSV", value_parser = metrics_list)]
    pub metrics: Option<MetricList>,
    /// Print the summaries as JSON indented by 2, byte for byte as DeerFlow's script does (a
    /// list; an object {"channels", "production"} when the input mixes both kinds);
    /// `--format json` prints it compact.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the summaries as CSV (header plus rows; nothing when there is no pair).
    #[arg(long)]
    pub csv: bool,
    /// One table per row kind, a row per group and every metric side by side (default: one
    /// group at a time, metrics down and full/delta/ratio across).
    #[arg(long)]
    pub wide: bool,
    /// Also draw the rows (medians per point, full vs every delta cadence) into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// Runs `dfck bench summarize`.
pub fn run(global: &GlobalArgs, args: &SummarizeArgs) -> Result<Outcome, Error> {
    // Refused when parsing already; kept here so no output is ever mislabelled.
    if global.format == FormatArg::Openmetrics {
        return Err(Error::usage(
            "--format openmetrics: only `dfck inspect` has metrics, not `dfck bench summarize`",
        ));
    }
    let rows = match summarize::load_jsonl(&args.inputs) {
        Ok(rows) => rows,
        Err(e @ summarize::LoadError::Malformed(_)) => {
            note(&e.to_string());
            return Ok(Outcome::Failed);
        }
        Err(e @ summarize::LoadError::Io { .. }) => return Err(Error::usage(e.to_string())),
    };
    let report = summarize::summarize(&rows, args.metrics.as_ref().map(|m| m.0.as_slice()));
    if report.profiled_channel_rows > 0 {
        note(&format!(
            "Skipping {} profiled row(s); profiled timings are excluded from baseline summaries.",
            report.profiled_channel_rows
        ));
    }
    if let Some(path) = &args.plot {
        let svg = plot::to_svg(&plot::figure(&rows));
        std::fs::write(path, svg)
            .map_err(|e| Error::usage(format!("cannot write plot {}: {e}", path.display())))?;
        note(&format!("dfck: plot written to {}", path.display()));
    }
    // `--json`/`--csv` are `--format json`/`--format csv` (a different --format beside them is
    // refused when parsing).
    let format = match (args.json, args.csv, global.format) {
        (true, _, _) => Format::Json,
        (_, true, _) => Format::Csv,
        (_, _, FormatArg::Table | FormatArg::Openmetrics) => Format::Table,
        (_, _, FormatArg::Json) => Format::Json,
        (_, _, FormatArg::Ndjson) => Format::Ndjson,
        (_, _, FormatArg::Csv) => Format::Csv,
    };
    let text = match format {
        Format::Csv => render::summary_csv(&report),
        // `--json` is DeerFlow's flag and keeps its indented bytes; `--format json` is compact
        // like every command's unless --pretty.
        Format::Json => render::summary_json(&report, args.json || global.pretty)?,
        Format::Ndjson => render::summary_ndjson(&report)?,
        // (openmetrics was refused above)
        Format::Table | Format::Openmetrics => render::summary_text(&report, args.wide),
    };
    emit(&text)?;
    report_replay_aggregates(&summarize::replay::replay_aggregates(&rows));
    Ok(if report.is_empty() {
        Outcome::Failed
    } else {
        Outcome::Clean
    })
}
