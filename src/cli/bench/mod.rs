//! `dfck bench channels|production|summarize`: flags and dispatch. One file per subcommand.

mod channels;
mod production;
mod summarize;

use super::GlobalArgs;
use crate::error::Error;
use clap::{Args, Subcommand};

/// Arguments of `dfck bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The benchmark.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Paired full/delta benchmark of the `messages` channel, one child process per case.
    Channels(channels::ChannelsArgs),
    /// Production-shaped full/delta benchmark (DeerFlow turns, state and history reads).
    Production(Box<production::ProductionArgs>),
    /// Pair full/delta rows (DeerFlow v1 or dfck v2 JSONL) and print medians and delta/full ratios.
    Summarize(summarize::SummarizeArgs),
}

/// Runs `dfck bench …`.
pub fn run(global: &GlobalArgs, args: &BenchArgs) -> Result<crate::outcome::Outcome, Error> {
    let code = match &args.command {
        BenchCommand::Channels(a) => channels::run(global, a),
        BenchCommand::Production(a) => production::run(global, a),
        BenchCommand::Summarize(a) => summarize::run(global, a),
    }?;
    // TODO(bench library): commands return an Outcome themselves.
    Ok(match code {
        0 => crate::outcome::Outcome::Clean,
        130 => crate::outcome::Outcome::Interrupted,
        _ => crate::outcome::Outcome::Failed,
    })
}

/// How a benchmark controller starts its children: `dfck bench <subcommand> --worker-case
/// JSON` (native) or `<python> <script> --worker-case JSON` (langgraph), with the git SHA and
/// the PostgreSQL URL in the environment only; the Ctrl-C flag; the secrets to redact; the
/// identity of the controller's own failure rows (probed from the script for langgraph).
pub(super) struct Launcher {
    exe: std::path::PathBuf,
    subcommand: &'static str,
    python: std::path::PathBuf,
    script: Option<std::path::PathBuf>,
    env_set: Vec<(String, String)>,
    env_remove: Vec<String>,
    timeout: Option<std::time::Duration>,
    timeout_secs: f64,
    interrupt: std::sync::Arc<std::sync::atomic::AtomicBool>,
    secrets: Vec<String>,
    /// Identity of failure rows the controller builds itself.
    pub row_env: crate::bench::case::RowEnv,
}

/// Between SIGTERM and SIGKILL of a child's process group.
const GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// Limit of the langgraph engine's `--identity` probe.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Launcher {
    /// Sets up children of `dfck bench <subcommand>`; `script` selects the langgraph engine.
    pub(super) fn new(
        subcommand: &'static str,
        python: &std::path::Path,
        script: Option<std::path::PathBuf>,
        pg_url: Option<&str>,
        timeout_secs: f64,
    ) -> Result<Launcher, Error> {
        use crate::bench::{controller, env, worker};
        let interrupt = controller::interrupt_flag()?;
        let git_sha = env::git_sha();
        let secrets: Vec<String> = pg_url.into_iter().filter_map(env::url_password).collect();
        let mut env_set = vec![
            (env::GIT_SHA_ENV.to_string(), git_sha.clone()),
            (env::DEERFLOW_GIT_SHA_ENV.to_string(), git_sha.clone()),
        ];
        let mut env_remove = Vec::new();
        match pg_url {
            Some(u) => env_set.push((worker::PG_URL_ENV.to_string(), u.to_string())),
            None => env_remove.push(worker::PG_URL_ENV.to_string()),
        }
        let mut l = Launcher {
            exe: std::env::current_exe()?,
            subcommand,
            python: python.to_path_buf(),
            script,
            env_set,
            env_remove,
            timeout: std::time::Duration::try_from_secs_f64(timeout_secs).ok(),
            timeout_secs,
            interrupt,
            secrets,
            row_env: crate::bench::case::RowEnv::default(),
        };
        let probe = l
            .script
            .as_ref()
            .map(|s| l.child(s.clone().into_os_string(), "--identity", None));
        let engine = if probe.is_some() {
            crate::bench::case::Engine::Langgraph
        } else {
            crate::bench::case::Engine::Native
        };
        l.row_env = channels::controller_row_env(engine, &git_sha, probe.as_ref(), &l.interrupt);
        Ok(l)
    }

    fn child(
        &self,
        script: std::ffi::OsString,
        flag: &str,
        value: Option<String>,
    ) -> crate::bench::controller::ChildSpec {
        let mut args = vec![script, flag.into()];
        args.extend(value.map(Into::into));
        crate::bench::controller::ChildSpec {
            program: self.python.clone(),
            args,
            env_set: self.env_set.clone(),
            env_remove: self.env_remove.clone(),
            timeout: Some(PROBE_TIMEOUT),
            grace: GRACE,
        }
    }

    /// The child of one case.
    pub(super) fn spec(&self, case_json: String) -> crate::bench::controller::ChildSpec {
        let (program, mut args): (std::path::PathBuf, Vec<std::ffi::OsString>) = match &self.script
        {
            Some(script) => (self.python.clone(), vec![script.clone().into_os_string()]),
            None => (
                self.exe.clone(),
                vec!["bench".into(), self.subcommand.into()],
            ),
        };
        args.push("--worker-case".into());
        args.push(case_json.into());
        crate::bench::controller::ChildSpec {
            program,
            args,
            env_set: self.env_set.clone(),
            env_remove: self.env_remove.clone(),
            timeout: self.timeout,
            grace: GRACE,
        }
    }

    /// Runs the cases (shared controller loop), prints the summary line, returns the exit code.
    pub(super) fn run(
        &self,
        cases: Vec<crate::bench::controller::PlannedCase>,
        output: &std::path::Path,
        gate: &crate::bench::controller::Gate,
    ) -> Result<i32, Error> {
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        let outcome = crate::bench::controller::run_cases(
            cases,
            output,
            self.timeout_secs,
            &secrets,
            &self.interrupt,
            gate,
        )?;
        Ok(outcome.report(output))
    }
}

/// Prints a worker's row as one compact JSON line on stdout; returns the worker's exit code
/// (0 success, 1 failed or unusable case).
fn print_worker_row(out: crate::bench::worker::WorkerOutput) -> i32 {
    crate::render::bench::print_worker_row(&out.row);
    match out.outcome {
        crate::outcome::Outcome::Clean => 0,
        _ => 1,
    }
}
