//! How a benchmark controller starts its children: the [`Launcher`] (`dfck bench <subcommand>
//! --worker-case JSON` for the native engine, `<python> <script> --worker-case JSON` for the
//! langgraph engine), the langgraph worker's `--identity` probe that gives the controller's own
//! failure rows their identity, and the lookup of the worker scripts shipped with dfck.
//!
//! Script lookup: `--worker-script PATH` or the script's environment variable when given (it
//! must exist), else the first `scripts/<script>.py` found in the directories above the dfck
//! executable (`<repo>/target/release/dfck` → `<repo>/scripts/…`), else in the source tree dfck
//! was built from, else under the current directory. The PostgreSQL URL reaches children only
//! through `DFCK_BENCH_PG_URL`; the git SHA through `DFCK_BENCH_GIT_SHA` (and DeerFlow's
//! `DEERFLOW_CHECKPOINT_BENCH_GIT_SHA`).

use crate::case::{Engine, RowEnv};
use crate::controller::{
    CasesOutcome, ChildEnd, ChildSpec, Gate, PlannedCase, Reporter, run_cases, run_child,
};
use crate::error::BenchError;
use crate::error::RunError as Error;
use crate::{controller, env, worker};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// The worker script of the langgraph channel engine, relative to the repository.
pub const LANGGRAPH_WORKER: &str = "scripts/bench_worker_langgraph.py";
/// Environment variable naming the langgraph channel worker script.
pub const LANGGRAPH_WORKER_ENV: &str = "DFCK_BENCH_LANGGRAPH_WORKER";
/// The production worker script of the langgraph engine, relative to the repository.
pub const LANGGRAPH_PRODUCTION_WORKER: &str = "scripts/bench_worker_langgraph_production.py";
/// Environment variable naming the langgraph production worker script.
pub const LANGGRAPH_PRODUCTION_WORKER_ENV: &str = "DFCK_BENCH_LANGGRAPH_PRODUCTION_WORKER";

/// How a benchmark controller starts its children: `dfck bench <subcommand> --worker-case
/// JSON` (native) or `<python> <script> --worker-case JSON` (langgraph), with the git SHA and
/// the PostgreSQL URL in the environment only; the Ctrl-C flag; the secrets to redact; the
/// identity of the controller's own failure rows (probed from the script for langgraph).
pub struct Launcher {
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
    pub row_env: crate::case::RowEnv,
}

/// Between SIGTERM and SIGKILL of a child's process group.
const GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// Limit of the langgraph engine's `--identity` probe.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Launcher {
    /// Sets up children of `dfck bench <subcommand>`; `script` selects the langgraph engine.
    pub fn new(
        subcommand: &'static str,
        python: &std::path::Path,
        script: Option<std::path::PathBuf>,
        pg_url: Option<&str>,
        timeout_secs: f64,
    ) -> Result<Launcher, Error> {
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
            row_env: crate::case::RowEnv::default(),
        };
        let probe = l
            .script
            .as_ref()
            .map(|s| l.child(s.clone().into_os_string(), "--identity", None));
        let engine = if probe.is_some() {
            crate::case::Engine::Langgraph
        } else {
            crate::case::Engine::Native
        };
        l.row_env = controller_row_env(engine, &git_sha, probe.as_ref(), &l.interrupt);
        Ok(l)
    }

    fn child(
        &self,
        script: std::ffi::OsString,
        flag: &str,
        value: Option<String>,
    ) -> crate::controller::ChildSpec {
        let mut args = vec![script, flag.into()];
        args.extend(value.map(Into::into));
        crate::controller::ChildSpec {
            program: self.python.clone(),
            args,
            env_set: self.env_set.clone(),
            env_remove: self.env_remove.clone(),
            timeout: Some(PROBE_TIMEOUT),
            grace: GRACE,
        }
    }

    /// The child of one case.
    pub fn spec(&self, case_json: String) -> crate::controller::ChildSpec {
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
        crate::controller::ChildSpec {
            program,
            args,
            env_set: self.env_set.clone(),
            env_remove: self.env_remove.clone(),
            timeout: self.timeout,
            grace: GRACE,
        }
    }

    /// Runs the cases (the shared controller loop), telling `reporter` what happens.
    pub fn run(
        &self,
        cases: Vec<PlannedCase>,
        output: &Path,
        gate: &Gate,
        reporter: &mut dyn Reporter,
    ) -> Result<CasesOutcome, Error> {
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        run_cases(
            cases,
            output,
            self.timeout_secs,
            &secrets,
            &self.interrupt,
            gate,
            reporter,
        )
    }
}

/// Finds the langgraph worker script (see the module header for the search order).
pub fn locate_worker_script(explicit: Option<&Path>) -> Result<PathBuf, BenchError> {
    locate_script(explicit, LANGGRAPH_WORKER_ENV, LANGGRAPH_WORKER)
}

/// Finds a worker script shipped with dfck: `explicit` or the non-empty env var `env_var`
/// when given (it must exist), else the first `relative` (a path relative to the repository,
/// e.g. `scripts/x.py`) in the directories above the dfck executable, in the source tree dfck
/// was built from, or under the current directory.
pub fn locate_script(
    explicit: Option<&Path>,
    env_var: &str,
    relative: &str,
) -> Result<PathBuf, BenchError> {
    let from_env = std::env::var_os(env_var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    if let Some(p) = explicit.map(Path::to_path_buf).or(from_env) {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(BenchError::MissingScript(p))
        };
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|d| d.join(relative)));
    }
    candidates.push(env::build_dir().join(relative));
    if let Ok(cwd) = std::env::current_dir() {
        candidates.push(cwd.join(relative));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| BenchError::ScriptNotFound {
            relative: relative.to_string(),
            env_var: env_var.to_string(),
        })
}

/// The identity the controller gives its own failure rows: the native engine's own, or what
/// `<python> <worker script> --identity` reports (`unknown`/null when that probe fails).
fn controller_row_env(
    engine: Engine,
    git_sha: &str,
    probe: Option<&ChildSpec>,
    interrupt: &AtomicBool,
) -> RowEnv {
    match engine {
        Engine::Native => RowEnv {
            git_sha: git_sha.to_string(),
            ..worker::native_row_env()
        },
        Engine::Langgraph => {
            let reported = probe
                .and_then(|spec| run_child(spec, interrupt).ok())
                .filter(|r| r.end == ChildEnd::Exited(0))
                .and_then(|r| {
                    let last = r.stdout.lines().rev().find(|l| !l.trim().is_empty())?;
                    match serde_json::from_str::<Value>(last.trim()) {
                        Ok(Value::Object(m)) => Some(m),
                        _ => None,
                    }
                })
                .unwrap_or_default();
            let text = |k: &str| reported.get(k).and_then(Value::as_str).map(str::to_string);
            RowEnv {
                git_sha: git_sha.to_string(),
                python_version: text("python_version"),
                langgraph_version: text("langgraph_version"),
                platform: text("platform").unwrap_or_else(env::platform),
                engine_version: text("engine_version").unwrap_or_else(|| "unknown".into()),
                runtime_version: text("runtime_version").unwrap_or_else(|| "unknown".into()),
            }
        }
    }
}
