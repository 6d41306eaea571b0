//! `dfck bench production`: flags and their validation, the matrix (or the replay of an
//! operator's threads with `--replay-from`), then the library's controller loop (one child per
//! case, rows streamed to `--output`, the cross-mode gate on the four-value signature over every
//! cadence) reporting through [`crate::render::bench_reporter`]. Children and the langgraph
//! production worker script: [`dfck_bench::launcher`].

use super::channels::{engine_parser, usage, warn};
use crate::cli::GlobalArgs;
use crate::error::Error;
use crate::render::bench_reporter::{
    StderrReporter, note, report_estimate, report_replay_aggregates,
};
use clap::Args;
use dfck_bench::case::{Backend, ChannelMode, Engine};
use dfck_bench::channels::{parse_choice_csv, parse_positive_int_csv};
use dfck_bench::controller::PlannedCase;
use dfck_bench::launcher::{
    LANGGRAPH_PRODUCTION_WORKER, LANGGRAPH_PRODUCTION_WORKER_ENV, Launcher, locate_script,
};
use dfck_bench::production::estimate::MatrixEstimate;
use dfck_bench::production::replay::replay_cases;
use dfck_bench::production::{
    ProductionCase, ProductionMatrix, WARMUP_TURNS, production_gate, progress_line, run_worker_case,
};
use dfck_bench::rows::ProductionRow;
use dfck_bench::summarize::Row;
use dfck_bench::summarize::replay::replay_aggregates;
use dfck_core::outcome::Outcome;
use std::path::PathBuf;

/// Arguments of `dfck bench production`.
#[derive(Debug, Args)]
pub struct ProductionArgs {
    /// Modes, comma-separated: full, delta.
    #[arg(long, default_value = "full,delta")]
    pub modes: String,
    /// Backends, comma-separated: sqlite, postgres.
    #[arg(long, default_value = "sqlite")]
    pub backends: String,
    /// Turn counts (each > 2: the first 2 turns are warm-up).
    #[arg(long, default_value = "10,100,500,1000,2000")]
    pub turns: String,
    /// Content bytes of each generated message text.
    #[arg(long, default_value = "128")]
    pub payload_bytes: String,
    /// Delta snapshot cadences (delta-only sweep; every cadence pairs with the group's full row).
    #[arg(long, default_value = "10,50,100,500,1000")]
    pub snapshot_frequencies: String,
    /// History limits (the Gateway clamps them to 100).
    #[arg(long, default_value = "10,50,200")]
    pub history_limits: String,
    /// Warm samples per state read and per history limit.
    #[arg(long, default_value_t = 25, allow_negative_numbers = true)]
    pub read_repetitions: i64,
    /// Passes over the matrix.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    pub repetitions: i64,
    /// Used in the thread id only.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: i64,
    /// Per-case child timeout.
    #[arg(long, default_value_t = 900.0, allow_negative_numbers = true)]
    pub timeout_seconds: f64,
    /// Safety cap: refuse the run when its largest full case is estimated to write more than
    /// this many bytes (the estimate is printed before the first case).
    #[arg(long, default_value_t = 1_073_741_824, allow_negative_numbers = true)]
    pub max_estimated_full_bytes: i64,
    /// Disable the safety cap.
    #[arg(long)]
    pub allow_large_cases: bool,
    /// JSONL output (parent directories created, file truncated).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// The system under test.
    #[arg(
        long,
        default_value_t = Engine::Native,
        value_parser = engine_parser(
            "dfck's own writer/reader of the LangGraph 1.2 format",
            "The real Python LangGraph: a production-shaped StateGraph with a scripted model and a real saver (needs --python with langgraph installed)",
        )
    )]
    pub engine: Engine,
    /// Python interpreter with langgraph installed (--engine langgraph).
    #[arg(long, value_name = "PATH", default_value = "python3")]
    pub python: PathBuf,
    /// The langgraph production worker script (default:
    /// scripts/bench_worker_langgraph_production.py of the dfck repository; env
    /// DFCK_BENCH_LANGGRAPH_PRODUCTION_WORKER).
    #[arg(long, value_name = "PATH")]
    pub worker_script: Option<PathBuf>,
    /// Alias of --db here: the PostgreSQL server for --backends postgres (default: --db /
    /// DFCK_DB, else TEST_POSTGRES_URI).
    #[arg(long, value_name = "URL")]
    pub pg_url: Option<String>,
    /// Replay real threads of this store (read-only; SQLite path or postgresql:// URL)
    /// instead of the generated workload; rows identify threads by SHA-256 only.
    #[arg(long, value_name = "STORE")]
    pub replay_from: Option<String>,
    /// With --replay-from: the threads to replay (repeatable; default: every thread).
    #[arg(long = "thread", value_name = "THREAD", requires = "replay_from")]
    pub threads: Vec<String>,
    /// With --replay-from: replay N threads picked deterministically.
    #[arg(
        long,
        value_name = "N",
        requires = "replay_from",
        conflicts_with = "threads",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub sample: Option<u32>,
    /// Child mode (internal).
    #[arg(long, hide = true)]
    pub worker_case: Option<String>,
}

/// Runs `dfck bench production`.
pub fn run(global: &GlobalArgs, args: &ProductionArgs) -> Result<Outcome, Error> {
    if let Some(case) = &args.worker_case {
        return super::print_worker_row(run_worker_case(case));
    }
    let modes = warn(parse_choice_csv(
        "--modes",
        &args.modes,
        &[ChannelMode::Full, ChannelMode::Delta],
    )?);
    let backends = warn(parse_choice_csv(
        "--backends",
        &args.backends,
        &[Backend::Sqlite, Backend::Postgres],
    )?);
    let turns = warn(parse_positive_int_csv("--turns", &args.turns)?);
    if args.replay_from.is_none() && turns.iter().any(|t| *t <= WARMUP_TURNS) {
        return Err(usage(format!(
            "--turns values must exceed the {WARMUP_TURNS}-turn warm-up"
        )));
    }
    let payloads = warn(parse_positive_int_csv(
        "--payload-bytes",
        &args.payload_bytes,
    )?);
    let frequencies = warn(parse_positive_int_csv(
        "--snapshot-frequencies",
        &args.snapshot_frequencies,
    )?);
    let history_limits = warn(parse_positive_int_csv(
        "--history-limits",
        &args.history_limits,
    )?);
    if args.repetitions <= 0
        || args.read_repetitions <= 0
        || args.timeout_seconds.is_nan()
        || args.timeout_seconds <= 0.0
    {
        return Err(usage("repetition and timeout values must be positive"));
    }
    if !args.allow_large_cases && args.max_estimated_full_bytes <= 0 {
        return Err(usage("--max-estimated-full-bytes must be positive"));
    }
    let Some(output) = args.output.clone() else {
        return Err(usage("--output is required"));
    };
    let engine = args.engine;
    let worker_script = match engine {
        Engine::Native => None,
        Engine::Langgraph => Some(locate_script(
            args.worker_script.as_deref(),
            LANGGRAPH_PRODUCTION_WORKER_ENV,
            LANGGRAPH_PRODUCTION_WORKER,
        )?),
    };
    let pg_url = super::pg_server(
        global,
        args.pg_url.as_deref(),
        backends.contains(&Backend::Postgres),
    )?;
    let matrix = ProductionMatrix {
        modes,
        backends,
        turns,
        payload_bytes: payloads,
        snapshot_frequencies: frequencies,
        history_limits,
        read_repetitions: args.read_repetitions as u64,
        repetitions: args.repetitions as u64,
        seed: args.seed,
        engine,
    };
    // Replays: one matrix per source thread (its turns and mean message size).
    let replay_dir = tempfile::Builder::new()
        .prefix("dfck-bench-replay-")
        .tempdir()?;
    let cases: Vec<ProductionCase> = match &args.replay_from {
        None => matrix.expand(),
        Some(src) => {
            let target = dfck_core::target::Target::parse(src)?;
            let store = target.open_read_only()?;
            let replay = replay_cases(
                store.as_ref(),
                &target.display(),
                &args.threads,
                args.sample.map(|n| n as usize),
                replay_dir.path(),
                &matrix,
            )?;
            for s in &replay.skipped {
                note(&format!("dfck: skipping {s}"));
            }
            for (hash, messages, turns) in &replay.replayed {
                note(&format!(
                    "dfck: replaying thread {} ({messages} messages, {turns} turns)",
                    &hash[..12],
                ));
            }
            replay.cases
        }
    };
    let estimate = MatrixEstimate::of(&cases);
    report_estimate(&estimate);
    let cap = if args.allow_large_cases {
        None
    } else {
        u128::try_from(args.max_estimated_full_bytes).ok()
    };
    if estimate.exceeds(cap) {
        return Err(usage(format!(
            "the largest full case is estimated to write {} bytes, above --max-estimated-full-bytes {}; pass --allow-large-cases to run it",
            estimate.largest_full_bytes, args.max_estimated_full_bytes
        )));
    }
    let launcher = Launcher::new(
        "production",
        &args.python,
        worker_script,
        pg_url.as_deref(),
        args.timeout_seconds,
    )?;
    let n = cases.len();
    let mut planned = Vec::with_capacity(n);
    for (i, case) in cases.iter().enumerate() {
        let case_json = serde_json::to_string(case).map_err(|e| Error::render(e.to_string()))?;
        planned.push(PlannedCase {
            spec: launcher.spec(case_json),
            base: Box::new(ProductionRow::new(case, &launcher.row_env)),
            progress: progress_line(i + 1, n, case),
        });
    }
    let done = launcher.run(
        planned,
        &output,
        &production_gate,
        &mut StderrReporter::new(),
    )?;
    drop(replay_dir);
    if args.replay_from.is_some() {
        let rows: Vec<Row> = done
            .rows
            .iter()
            .enumerate()
            .map(|(i, fields)| Row {
                input_index: 0,
                line: i + 1,
                fields: fields.clone(),
            })
            .collect();
        report_replay_aggregates(&replay_aggregates(&rows));
    }
    Ok(done.outcome())
}
