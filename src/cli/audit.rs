//! `dfck audit [--thread ID …] [--jobs N] [--emit langgraph-json|python|env]`.

use super::{FormatArg, GlobalArgs, emit, output};
use crate::commands::audit::audit_store;
use crate::render::{self, TerminalProgress};
use clap::{Args, ValueEnum};
use dfck_core::error::Error;
use dfck_core::outcome::Outcome;

/// `--emit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EmitArg {
    /// The `langgraph.json` fragment `{"checkpointer": {"serde": {"allowed_msgpack_modules": …}}}`.
    LanggraphJson,
    /// `allowed_msgpack_modules = [("module", "Name"), …]` for `JsonPlusSerializer(…)`.
    Python,
    /// `LANGGRAPH_STRICT_MSGPACK=true`, when the safe set alone reads every value.
    Env,
}

/// Arguments of `dfck audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Audit only this thread (repeatable; default: every thread).
    #[arg(long = "thread", value_name = "ID")]
    pub threads: Vec<String>,
    /// Audit threads concurrently over N connections.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// Print only the allowlist strict mode needs, in this form, instead of the report.
    #[arg(long, value_enum, value_name = "FORM")]
    pub emit: Option<EmitArg>,
}

/// Runs `dfck audit`: exit 1 unless every value reads back under strict mode with the
/// allowlist (a value never allowed, or values that could not be audited).
pub fn run(global: &GlobalArgs, args: &AuditArgs) -> Result<Outcome, Error> {
    if args.emit.is_some() && global.format != FormatArg::Table {
        return Err(Error::Usage(
            "--emit prints the allowlist itself: leave --format out".into(),
        ));
    }
    let (target, _) = global.resolve()?;
    let store = target.open_read_only()?;
    let open = || target.open_read_only();
    let report = audit_store(
        store.as_ref(),
        &open,
        &args.threads,
        args.jobs as usize,
        &TerminalProgress::stderr(),
    )?;
    match args.emit {
        None => output(global.format(), &report, render::audit::audit_table)?,
        Some(form) => {
            let text = match form {
                EmitArg::Python => render::audit::emit_python(&report),
                EmitArg::LanggraphJson => render::audit::emit_langgraph_json(&report),
                EmitArg::Env => render::audit::emit_env(&report),
            };
            emit(&text)?;
            if form == EmitArg::Env {
                if let Some(why) = render::audit::env_refusal(&report) {
                    render::note(&why);
                }
            }
            if report.has_problems() {
                render::note(&format!(
                    "dfck: audit: {}",
                    render::audit::verdict_line(&report)
                ));
                for n in render::audit::notes(&report) {
                    render::note(&format!("dfck: audit: {}", render::escape::cell(&n)));
                }
            }
        }
    }
    Ok(if report.has_problems() {
        Outcome::Findings
    } else {
        Outcome::Clean
    })
}
