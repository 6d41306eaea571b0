//! DeerFlow config discovery: with no `--db`, find the checkpoint store the way DeerFlow does
//! (deerflow-semantics.md §6).
//!
//! 1. The config file: `--config`, else `DEER_FLOW_CONFIG_PATH` (must exist), else
//!    `config.yaml` in `DEER_FLOW_PROJECT_ROOT` (must be a directory) or the current directory,
//!    else the source-tree fallbacks `./backend/config.yaml` and, run from `backend/`,
//!    `../config.yaml`.
//! 2. The environment: the process environment, plus one `.env` file (`--env-file`, else the
//!    first of `.env` beside the config, at the project root, in the DeerFlow CWD) that never
//!    overrides a variable already set, as DeerFlow's `load_dotenv()`. A YAML string starting
//!    with `$` is replaced whole by that variable, in the sections dfck reads (`database`,
//!    `checkpointer`); a missing variable is an error naming it.
//! 3. The store: the legacy top-level `checkpointer:` wins; else `database.backend`.
//!
//! Library code: nothing here prints. Error messages are one line and never contain a
//! password (URLs go through [`redact_url`]).

use crate::redact::redact_url;
use crate::target::Target;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

/// Config discovery failed.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// No config file was found by any rule.
    #[error(
        "no store given: pass --db TARGET, set DFCK_DB, or point --config at a DeerFlow config.yaml (none found: looked for {searched})"
    )]
    NotFound {
        /// The candidate files, comma-separated.
        searched: String,
    },
    /// A config file named explicitly (`--config`, `DEER_FLOW_CONFIG_PATH`) does not exist.
    #[error("config file {path} (from {rule}) does not exist or is not a file")]
    ConfigMissing {
        /// The absolute path.
        path: String,
        /// Which rule named it.
        rule: &'static str,
    },
    /// `DEER_FLOW_PROJECT_ROOT` is set to something that is not a directory.
    #[error("DEER_FLOW_PROJECT_ROOT is set to '{value}', but {path} {problem}")]
    ProjectRoot {
        /// The variable's value.
        value: String,
        /// The absolute path.
        path: String,
        /// "does not exist" / "is not a directory".
        problem: &'static str,
    },
    /// `--deerflow-cwd` is not a directory.
    #[error("--deerflow-cwd {path} is not a directory")]
    DeerflowCwd {
        /// The absolute path.
        path: String,
    },
    /// `--env-file` does not exist.
    #[error("env file {path} (from --env-file) does not exist or is not a file")]
    EnvFileMissing {
        /// The absolute path.
        path: String,
    },
    /// A file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// The config file is not valid YAML.
    #[error("{path}: invalid YAML: {reason}")]
    Yaml {
        /// The config file.
        path: String,
        /// The parser's message.
        reason: String,
    },
    /// A `$VAR` value names a variable that is not set.
    #[error(
        "{path}: environment variable {var} (for {key}) is not set in the environment or in {env_file}"
    )]
    MissingEnv {
        /// The config file.
        path: String,
        /// The variable name (never its value).
        var: String,
        /// The dotted key holding `$VAR`.
        key: String,
        /// The `.env` file consulted, or "no .env file".
        env_file: String,
    },
    /// A value in the config is missing or wrong.
    #[error("{path}: {key}: {reason}")]
    Invalid {
        /// The config file.
        path: String,
        /// The dotted key.
        key: String,
        /// What is wrong (URLs redacted).
        reason: String,
    },
    /// The resolved SQLite store does not exist.
    #[error("sqlite store {path} does not exist (from {how} in {config}){hint}")]
    StoreMissing {
        /// The resolved store file.
        path: String,
        /// Which setting produced it.
        how: String,
        /// The config file.
        config: String,
        /// A hint about `--deerflow-cwd` / `DEER_FLOW_HOME`, or "".
        hint: String,
    },
}

/// What discovery found.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered {
    /// The config file read (absolute).
    pub config_path: PathBuf,
    /// Which rule chose it: `--config`, `DEER_FLOW_CONFIG_PATH`, `DEER_FLOW_PROJECT_ROOT`,
    /// `current directory` or `source-tree fallback`.
    pub config_rule: &'static str,
    /// The `.env` actually loaded.
    pub env_file: Option<PathBuf>,
    /// The directory taken as DeerFlow's process CWD (absolute).
    pub deerflow_cwd: PathBuf,
    /// `"sqlite"`, `"postgres"` or `"memory"`.
    pub backend: String,
    /// `"database"` or `"checkpointer (legacy)"`.
    pub source: &'static str,
    /// The store; `None` for the memory backend.
    pub target: Option<Target>,
    /// `database.checkpoint_channel_mode`: `"full"` or `"delta"`.
    pub checkpoint_channel_mode: String,
    /// `database.checkpoint_delta.snapshot_frequency`.
    pub snapshot_frequency: u64,
}

/// Inputs of [`discover`]; the environment is injected so tests never touch the process's.
pub struct DiscoverOptions<'a> {
    /// `--config FILE`.
    pub config: Option<&'a Path>,
    /// `--deerflow-cwd DIR`.
    pub deerflow_cwd: Option<&'a Path>,
    /// `--env-file FILE`.
    pub env_file: Option<&'a Path>,
    /// dfck's current directory (absolute); relative paths given to dfck resolve against it.
    pub cwd: &'a Path,
    /// The process environment.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// `source` of a store chosen by the legacy top-level `checkpointer:` section.
pub const SOURCE_LEGACY: &str = "checkpointer (legacy)";
/// `source` of a store chosen by the `database:` section.
pub const SOURCE_DATABASE: &str = "database";

const DEFAULT_SQLITE_DIR: &str = ".deer-flow/data";
const DEFAULT_SNAPSHOT_FREQUENCY: u64 = 10;

/// Finds the DeerFlow config and resolves the checkpoint store it selects.
pub fn discover(opts: &DiscoverOptions) -> Result<Discovered, ConfigError> {
    let cwd = normalize(opts.cwd);
    let (config_path, config_rule) = find_config(opts, &cwd)?;
    let cfg = show(&config_path);
    let config_dir = config_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cwd.clone());

    let deerflow_cwd = match opts.deerflow_cwd {
        Some(d) => {
            let d = absolute(&cwd, d);
            if !d.is_dir() {
                return Err(ConfigError::DeerflowCwd { path: show(&d) });
            }
            d
        }
        None => {
            let backend = config_dir.join("backend");
            if backend.is_dir() {
                backend
            } else {
                config_dir.clone()
            }
        }
    };

    // The .env file: never overrides the process environment.
    let env_file = match opts.env_file {
        Some(f) => {
            let f = absolute(&cwd, f);
            if !f.is_file() {
                return Err(ConfigError::EnvFileMissing { path: show(&f) });
            }
            Some(f)
        }
        None => {
            let root = project_root_env(opts, &cwd)?.unwrap_or_else(|| cwd.clone());
            let mut found = None;
            for dir in [&config_dir, &root, &deerflow_cwd] {
                let f = dir.join(".env");
                if f.is_file() {
                    found = Some(f);
                    break;
                }
            }
            found
        }
    };
    let dotenv = match &env_file {
        Some(f) => parse_dotenv(&read(f)?, opts.env),
        None => HashMap::new(),
    };
    let lookup = |name: &str| (opts.env)(name).or_else(|| dotenv.get(name).cloned());
    let env_desc = env_file
        .as_ref()
        .map(|f| show(f))
        .unwrap_or_else(|| "no .env file".into());

    let text = read(&config_path)?;
    let doc = parse_yaml(&text).map_err(|reason| ConfigError::Yaml {
        path: cfg.clone(),
        reason: one_line(&reason),
    })?;
    let top = match doc {
        Node::Map(m) => m,
        Node::Null => Vec::new(),
        other => {
            return Err(invalid(
                &cfg,
                "(top level)",
                format!("expected a mapping, found {}", other.kind()),
            ));
        }
    };
    let subst = |node: Node, key: &str| -> Result<Node, ConfigError> {
        substitute(node, key, &|var, key| {
            lookup(var).ok_or_else(|| ConfigError::MissingEnv {
                path: cfg.clone(),
                var: var.to_owned(),
                key: key.to_owned(),
                env_file: env_desc.clone(),
            })
        })
    };

    // `database`: a missing or null section → {backend: sqlite, sqlite_dir: .deer-flow/data};
    // a dict lacking backend/sqlite_dir gets those two.
    let database = match get(&top, "database").cloned() {
        None | Some(Node::Null) => Vec::new(),
        Some(node) => match subst(node, "database")? {
            Node::Map(m) => m,
            Node::Null => Vec::new(),
            other => {
                return Err(invalid(
                    &cfg,
                    "database",
                    format!("expected a mapping, found {}", other.kind()),
                ));
            }
        },
    };

    // Mode keys: always from `database`.
    let checkpoint_channel_mode = match opt_str(&database, "checkpoint_channel_mode", &cfg)? {
        None => "full".to_owned(),
        Some(m) if m == "full" || m == "delta" => m,
        Some(m) => {
            return Err(invalid(
                &cfg,
                "database.checkpoint_channel_mode",
                format!("expected 'full' or 'delta', found '{m}'"),
            ));
        }
    };
    let nested = match get(&database, "checkpoint_delta") {
        None | Some(Node::Null) => None,
        Some(Node::Map(m)) => get(m, "snapshot_frequency")
            .filter(|n| **n != Node::Null)
            .map(|n| (n, "database.checkpoint_delta.snapshot_frequency")),
        Some(other) => {
            return Err(invalid(
                &cfg,
                "database.checkpoint_delta",
                format!("expected a mapping, found {}", other.kind()),
            ));
        }
    };
    let flat = get(&database, "checkpoint_delta_snapshot_frequency")
        .filter(|n| **n != Node::Null)
        .map(|n| (n, "database.checkpoint_delta_snapshot_frequency"));
    let snapshot_frequency = match nested.or(flat) {
        None => DEFAULT_SNAPSHOT_FREQUENCY,
        Some((node, key)) => positive_int(node).ok_or_else(|| {
            invalid(
                &cfg,
                key,
                format!("expected an integer >= 1, found {}", node.show()),
            )
        })?,
    };

    let mut out = Discovered {
        config_path: config_path.clone(),
        config_rule,
        env_file,
        deerflow_cwd: deerflow_cwd.clone(),
        backend: String::new(),
        source: SOURCE_DATABASE,
        target: None,
        checkpoint_channel_mode,
        snapshot_frequency,
    };

    // Where the sqlite file came from, for the "does not exist" error.
    let how: String;
    let legacy = match get(&top, "checkpointer").cloned() {
        None | Some(Node::Null) => None,
        Some(node) => Some(subst(node, "checkpointer")?),
    };
    if let Some(section) = legacy {
        out.source = SOURCE_LEGACY;
        let Node::Map(ck) = section else {
            return Err(invalid(
                &cfg,
                "checkpointer",
                format!("expected a mapping, found {}", section.kind()),
            ));
        };
        let kind = opt_str(&ck, "type", &cfg)?.ok_or_else(|| {
            invalid(
                &cfg,
                "checkpointer.type",
                "required (memory, sqlite or postgres)".into(),
            )
        })?;
        let conn = opt_str(&ck, "connection_string", &cfg)?.filter(|s| !s.is_empty());
        match kind.as_str() {
            "memory" => {
                out.backend = "memory".into();
                return Ok(out);
            }
            "sqlite" => {
                let conn = conn.unwrap_or_else(|| "store.db".to_owned());
                out.backend = "sqlite".into();
                if is_sqlite_memory(&conn) {
                    out.backend = "memory".into();
                    return Ok(out);
                }
                let path = if let Some(uri) = conn.strip_prefix("file:") {
                    // `file:` URIs are used as is: relative to DeerFlow's CWD.
                    absolute(&deerflow_cwd, Path::new(&sqlite_uri_path(uri)))
                } else {
                    let base = base_dir(opts, &cwd, &deerflow_cwd, &lookup)?;
                    absolute(&base, Path::new(&conn))
                };
                how = format!("checkpointer.connection_string '{conn}'");
                out.target = Some(Target::Sqlite(path));
            }
            "postgres" => {
                let conn = conn.ok_or_else(|| {
                    invalid(
                        &cfg,
                        "checkpointer.connection_string",
                        "required when checkpointer.type is postgres".into(),
                    )
                })?;
                let url = pg_url(&conn, &cfg, "checkpointer.connection_string")?;
                let schema = pg_schema(&ck, &cfg, "checkpointer.postgres_schema")?;
                out.backend = "postgres".into();
                out.target = Some(Target::Postgres { url, schema });
                return Ok(out);
            }
            other => {
                return Err(invalid(
                    &cfg,
                    "checkpointer.type",
                    format!("expected memory, sqlite or postgres, found '{other}'"),
                ));
            }
        }
    } else {
        let backend = opt_str(&database, "backend", &cfg)?.unwrap_or_else(|| "sqlite".to_owned());
        match backend.as_str() {
            "memory" => {
                out.backend = "memory".into();
                return Ok(out);
            }
            "sqlite" => {
                let dir = opt_str(&database, "sqlite_dir", &cfg)?
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| DEFAULT_SQLITE_DIR.to_owned());
                let path = absolute(&deerflow_cwd, &Path::new(&dir).join("deerflow.db"));
                how = format!(
                    "database.sqlite_dir '{dir}' relative to the DeerFlow cwd {}",
                    show(&deerflow_cwd)
                );
                out.backend = "sqlite".into();
                out.target = Some(Target::Sqlite(path));
            }
            "postgres" => {
                let raw = opt_str(&database, "postgres_url", &cfg)?
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| {
                        invalid(
                            &cfg,
                            "database.postgres_url",
                            "required when database.backend is postgres".into(),
                        )
                    })?;
                let url = pg_url(&raw, &cfg, "database.postgres_url")?;
                let schema = pg_schema(&database, &cfg, "database.postgres_schema")?;
                out.backend = "postgres".into();
                out.target = Some(Target::Postgres { url, schema });
                return Ok(out);
            }
            other => {
                return Err(invalid(
                    &cfg,
                    "database.backend",
                    format!("expected memory, sqlite or postgres, found '{other}'"),
                ));
            }
        }
    }

    // sqlite: the file must exist (the store layer checks its tables).
    let missing = match &out.target {
        Some(Target::Sqlite(p)) if !p.is_file() => Some(p.clone()),
        _ => None,
    };
    if let Some(p) = missing {
        let hint = if out.source == SOURCE_LEGACY {
            "; set DEER_FLOW_HOME to DeerFlow's data home".to_owned()
        } else if opts.deerflow_cwd.is_none() {
            "; pass --deerflow-cwd DIR if DeerFlow runs from another directory".to_owned()
        } else {
            String::new()
        };
        return Err(ConfigError::StoreMissing {
            path: show(&p),
            how,
            config: cfg,
            hint,
        });
    }
    Ok(out)
}

/// Validates a PostgreSQL schema name as DeerFlow does: `[a-z_][a-z0-9_]{0,62}`.
pub fn valid_schema(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0] == b'_')
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

// ---------------------------------------------------------------------------------------
// Config file and paths

fn find_config(opts: &DiscoverOptions, cwd: &Path) -> Result<(PathBuf, &'static str), ConfigError> {
    if let Some(p) = opts.config {
        let p = absolute(cwd, p);
        if !p.is_file() {
            return Err(ConfigError::ConfigMissing {
                path: show(&p),
                rule: "--config",
            });
        }
        return Ok((p, "--config"));
    }
    if let Some(v) = (opts.env)("DEER_FLOW_CONFIG_PATH").filter(|v| !v.is_empty()) {
        let p = absolute(cwd, Path::new(&v));
        if !p.is_file() {
            return Err(ConfigError::ConfigMissing {
                path: show(&p),
                rule: "DEER_FLOW_CONFIG_PATH",
            });
        }
        return Ok((p, "DEER_FLOW_CONFIG_PATH"));
    }
    let (root, rule) = match project_root_env(opts, cwd)? {
        Some(r) => (r, "DEER_FLOW_PROJECT_ROOT"),
        None => (cwd.to_path_buf(), "current directory"),
    };
    let mut candidates = vec![(root.join("config.yaml"), rule)];
    candidates.push((cwd.join("backend/config.yaml"), "source-tree fallback"));
    let parent = cwd
        .parent()
        .filter(|_| cwd.file_name().is_some_and(|n| n == "backend"));
    if let Some(parent) = parent {
        candidates.push((parent.join("config.yaml"), "source-tree fallback"));
    }
    candidates.dedup_by(|a, b| a.0 == b.0);
    for (p, rule) in &candidates {
        if p.is_file() {
            return Ok((p.clone(), rule));
        }
    }
    Err(ConfigError::NotFound {
        searched: candidates
            .iter()
            .map(|(p, _)| show(p))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// `DEER_FLOW_PROJECT_ROOT`, validated (must exist and be a directory), if set.
fn project_root_env(opts: &DiscoverOptions, cwd: &Path) -> Result<Option<PathBuf>, ConfigError> {
    let Some(v) = (opts.env)("DEER_FLOW_PROJECT_ROOT").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let p = absolute(cwd, Path::new(&v));
    let problem = if !p.exists() {
        "does not exist"
    } else if !p.is_dir() {
        "is not a directory"
    } else {
        return Ok(Some(p));
    };
    Err(ConfigError::ProjectRoot {
        value: v,
        path: show(&p),
        problem,
    })
}

/// DeerFlow's `Paths.base_dir`: `DEER_FLOW_HOME`, else `<project_root>/.deer-flow`, where the
/// project root is `DEER_FLOW_PROJECT_ROOT` or DeerFlow's CWD (`--deerflow-cwd`).
fn base_dir(
    opts: &DiscoverOptions,
    cwd: &Path,
    deerflow_cwd: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, ConfigError> {
    if let Some(home) = lookup("DEER_FLOW_HOME").filter(|v| !v.is_empty()) {
        return Ok(absolute(deerflow_cwd, Path::new(&home)));
    }
    let root = project_root_env(opts, cwd)?.unwrap_or_else(|| deerflow_cwd.to_path_buf());
    Ok(root.join(".deer-flow"))
}

fn is_sqlite_memory(conn: &str) -> bool {
    conn == ":memory:"
        || conn.starts_with("file::memory:")
        || (conn.starts_with("file:") && conn.contains("mode=memory"))
}

/// The path of a `file:` SQLite URI (after `file:`): `///abs` → `/abs`, `//localhost/abs` →
/// `/abs`, query and fragment dropped, `%XX` decoded.
fn sqlite_uri_path(uri: &str) -> String {
    let uri = uri.split(['?', '#']).next().unwrap_or("");
    let path = match uri.strip_prefix("//") {
        Some(rest) => match rest.find('/') {
            Some(i) => &rest[i..],
            None => "",
        },
        None => uri,
    };
    percent_decode(path)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let pair = if b[i] == b'%' && i + 2 < b.len() {
            hex(b[i + 1]).zip(hex(b[i + 2]))
        } else {
            None
        };
        if let Some((hi, lo)) = pair {
            out.push(hi * 16 + lo);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// A PostgreSQL URL as psycopg takes it: a SQLAlchemy `+driver` suffix is stripped and
/// `postgres://` is accepted.
fn pg_url(raw: &str, cfg: &str, key: &str) -> Result<String, ConfigError> {
    let raw = raw.trim();
    let bad = |why: &str| invalid(cfg, key, format!("{why}: '{}'", redact_url(raw)));
    let Some((scheme, rest)) = raw.split_once("://") else {
        return Err(bad("expected a postgresql:// URL"));
    };
    let base = scheme.split('+').next().unwrap_or("").to_ascii_lowercase();
    match base.as_str() {
        "postgresql" | "postgres" => Ok(format!("{base}://{rest}")),
        _ => Err(bad("expected a postgresql:// or postgres:// URL")),
    }
}

fn pg_schema(
    section: &[(Node, Node)],
    cfg: &str,
    key: &str,
) -> Result<Option<String>, ConfigError> {
    let name = key.rsplit('.').next().unwrap_or(key);
    match opt_str(section, name, cfg)? {
        None => Ok(None),
        Some(s) if valid_schema(&s) => Ok(Some(s)),
        Some(s) => Err(invalid(
            cfg,
            key,
            format!("'{s}' is not a valid schema name (expected [a-z_][a-z0-9_]{{0,62}})"),
        )),
    }
}

/// `base.join(p)`, with `.` and `..` removed lexically (no symlink resolution).
fn absolute(base: &Path, p: &Path) -> PathBuf {
    normalize(&base.join(p))
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    out
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

fn read(p: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(p).map_err(|e| ConfigError::Read {
        path: show(p),
        reason: e.to_string(),
    })
}

fn invalid(cfg: &str, key: &str, reason: String) -> ConfigError {
    ConfigError::Invalid {
        path: cfg.to_owned(),
        key: key.to_owned(),
        reason,
    }
}

// ---------------------------------------------------------------------------------------
// YAML values

/// A YAML value, resolved like PyYAML's `safe_load` (YAML 1.1 booleans, last duplicate key
/// wins, `<<` merge keys).
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(String),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }

    /// A short rendering of a scalar, for error messages.
    fn show(&self) -> String {
        match self {
            Node::Null => "null".into(),
            Node::Bool(b) => b.to_string(),
            Node::Int(i) => i.to_string(),
            Node::Float(f) => f.clone(),
            Node::Str(s) => format!("'{s}'"),
            other => other.kind().into(),
        }
    }

    fn size(&self) -> usize {
        match self {
            Node::Seq(v) => 1 + v.iter().map(Node::size).sum::<usize>(),
            Node::Map(m) => 1 + m.iter().map(|(k, v)| k.size() + v.size()).sum::<usize>(),
            _ => 1,
        }
    }
}

fn get<'a>(map: &'a [(Node, Node)], key: &str) -> Option<&'a Node> {
    map.iter()
        .find(|(k, _)| matches!(k, Node::Str(s) if s == key))
        .map(|(_, v)| v)
}

/// A string-valued key: missing or null → `None`; numbers are taken as their text (pydantic's
/// lax mode); anything else is an error.
fn opt_str(map: &[(Node, Node)], key: &str, cfg: &str) -> Result<Option<String>, ConfigError> {
    match get(map, key) {
        None | Some(Node::Null) => Ok(None),
        Some(Node::Str(s)) => Ok(Some(s.clone())),
        Some(Node::Int(i)) => Ok(Some(i.to_string())),
        Some(Node::Float(f)) => Ok(Some(f.clone())),
        Some(other) => Err(invalid(
            cfg,
            key,
            format!("expected a string, found {}", other.kind()),
        )),
    }
}

fn positive_int(node: &Node) -> Option<u64> {
    let v = match node {
        Node::Int(i) => u64::try_from(*i).ok()?,
        Node::Str(s) => s.trim().parse::<u64>().ok()?,
        _ => return None,
    };
    (v >= 1).then_some(v)
}

/// Replaces every string starting with `$` by the variable it names (DeerFlow's
/// `resolve_env_variables`); `key` is the dotted path, for errors.
fn substitute(
    node: Node,
    key: &str,
    var: &dyn Fn(&str, &str) -> Result<String, ConfigError>,
) -> Result<Node, ConfigError> {
    Ok(match node {
        Node::Str(s) => match s.strip_prefix('$') {
            Some(name) => Node::Str(var(name, key)?),
            None => Node::Str(s),
        },
        Node::Seq(v) => Node::Seq(
            v.into_iter()
                .enumerate()
                .map(|(i, n)| substitute(n, &format!("{key}[{i}]"), var))
                .collect::<Result<_, _>>()?,
        ),
        Node::Map(m) => Node::Map(
            m.into_iter()
                .map(|(k, v)| {
                    let sub = match &k {
                        Node::Str(s) => format!("{key}.{s}"),
                        other => format!("{key}.{}", other.show()),
                    };
                    Ok((k, substitute(v, &sub, var)?))
                })
                .collect::<Result<_, ConfigError>>()?,
        ),
        other => other,
    })
}

/// Upper bound on nodes built, so alias expansion ("billion laughs") cannot exhaust memory.
const MAX_NODES: usize = 1_000_000;

/// Parses one YAML document (an empty stream is null).
fn parse_yaml(text: &str) -> Result<Node, String> {
    enum Frame {
        Seq(Vec<Node>, usize),
        Map(Vec<(Node, Node)>, Option<Node>, usize),
    }
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut doc: Option<Node> = None;
    let mut built = 0usize;
    loop {
        let (event, _mark) = parser.next_token().map_err(|e| e.to_string())?;
        let (node, anchor) = match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {
                continue;
            }
            Event::SequenceStart(aid, _) => {
                stack.push(Frame::Seq(Vec::new(), aid));
                continue;
            }
            Event::MappingStart(aid, _) => {
                stack.push(Frame::Map(Vec::new(), None, aid));
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(v, aid)) => (Node::Seq(v), aid),
                _ => return Err("unbalanced sequence".into()),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(m, _, aid)) => (Node::Map(merge_keys(m)), aid),
                _ => return Err("unbalanced mapping".into()),
            },
            Event::Scalar(v, style, aid, tag) => (scalar(v, style, tag.as_ref()), aid),
            Event::Alias(id) => {
                let n = anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| "alias to an unknown anchor".to_owned())?;
                built += n.size();
                (n, 0)
            }
        };
        built += 1;
        if built > MAX_NODES {
            return Err(format!(
                "document too large (over {MAX_NODES} nodes after aliases)"
            ));
        }
        if anchor > 0 {
            anchors.insert(anchor, node.clone());
        }
        match stack.last_mut() {
            None => {
                if doc.is_some() {
                    return Err("expected a single document, found several".into());
                }
                doc = Some(node);
            }
            Some(Frame::Seq(v, _)) => v.push(node),
            Some(Frame::Map(m, key, _)) => match key.take() {
                None => *key = Some(node),
                Some(k) => insert(m, k, node),
            },
        }
    }
    Ok(doc.unwrap_or(Node::Null))
}

/// Inserts, the last duplicate key winning (PyYAML).
fn insert(map: &mut Vec<(Node, Node)>, key: Node, value: Node) {
    match map.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => map.push((key, value)),
    }
}

/// Applies a `<<` merge key: keys of the merged mapping(s) that the mapping lacks are added
/// (with a list, earlier mappings win).
fn merge_keys(map: Vec<(Node, Node)>) -> Vec<(Node, Node)> {
    let merge = Node::Str("<<".into());
    let Some(pos) = map.iter().position(|(k, _)| *k == merge) else {
        return map;
    };
    let mut map = map;
    let (_, value) = map.remove(pos);
    let sources = match value {
        Node::Map(m) => vec![m],
        Node::Seq(v) => v
            .into_iter()
            .filter_map(|n| match n {
                Node::Map(m) => Some(m),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    for src in sources {
        for (k, v) in src {
            if !map.iter().any(|(existing, _)| *existing == k) {
                map.push((k, v));
            }
        }
    }
    map
}

/// Resolves a scalar like PyYAML's SafeLoader (YAML 1.1 core types).
fn scalar(v: String, style: TScalarStyle, tag: Option<&Tag>) -> Node {
    if let Some(tag) = tag.filter(|t| t.handle == "tag:yaml.org,2002:") {
        return match tag.suffix.as_str() {
            "str" => Node::Str(v),
            "null" => Node::Null,
            _ => plain(v),
        };
    }
    if style != TScalarStyle::Plain {
        return Node::Str(v);
    }
    plain(v)
}

fn plain(v: String) -> Node {
    match v.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return Node::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Node::Bool(true);
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Node::Bool(false);
        }
        _ => {}
    }
    let digits: String = v.chars().filter(|c| *c != '_').collect();
    let (neg, body) = match digits.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, digits.strip_prefix('+').unwrap_or(&digits)),
    };
    let int = if let Some(hex) = body.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()
    } else if let Some(oct) = body.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()
    } else if body.len() > 1 && body.starts_with('0') && body.bytes().all(|b| b.is_ascii_digit()) {
        i64::from_str_radix(body, 8).ok()
    } else if !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit()) {
        body.parse::<i64>().ok()
    } else {
        None
    };
    if let Some(i) = int {
        return Node::Int(if neg { -i } else { i });
    }
    let lower = v.to_ascii_lowercase();
    if matches!(lower.as_str(), ".inf" | "+.inf" | "-.inf" | ".nan")
        || (v.bytes().any(|b| b.is_ascii_digit())
            && v.bytes().all(|b| {
                b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-' | b'_')
            })
            && digits.parse::<f64>().is_ok())
    {
        return Node::Float(v);
    }
    Node::Str(v)
}

// ---------------------------------------------------------------------------------------
// .env files

/// Parses a `.env` file like python-dotenv: `KEY=VALUE` lines, an optional `export ` prefix,
/// `#` comments, single quotes (literal), double quotes (escapes), and `${VAR}` /
/// `${VAR:-default}` expansion in unquoted and double-quoted values, where the process
/// environment wins over earlier keys of the file. Malformed lines are skipped.
pub fn parse_dotenv(text: &str, env: &dyn Fn(&str) -> Option<String>) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let n = chars.len();
    while i < n {
        // Skip blank space and comment lines.
        while i < n && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= n {
            break;
        }
        if chars[i] == '#' {
            while i < n && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let rest: String = chars[i..n.min(i + 7)].iter().collect();
        if rest == "export " || rest == "export\t" {
            i += 7;
            while i < n && (chars[i] == ' ' || chars[i] == '\t') {
                i += 1;
            }
        }
        // Key: up to '=' on this line.
        let key_start = i;
        while i < n && chars[i] != '=' && chars[i] != '\n' {
            i += 1;
        }
        if i >= n || chars[i] == '\n' {
            // No '=': python-dotenv yields a key without a value, which load_dotenv skips.
            continue;
        }
        let mut key: String = chars[key_start..i]
            .iter()
            .collect::<String>()
            .trim()
            .to_owned();
        if key.len() >= 2
            && ((key.starts_with('\'') && key.ends_with('\''))
                || (key.starts_with('"') && key.ends_with('"')))
        {
            key = key[1..key.len() - 1].to_owned();
        }
        i += 1; // '='
        while i < n && (chars[i] == ' ' || chars[i] == '\t') {
            i += 1;
        }
        let (value, expand) = if i < n && (chars[i] == '\'' || chars[i] == '"') {
            let quote = chars[i];
            i += 1;
            let mut v = String::new();
            let mut closed = false;
            while i < n {
                let c = chars[i];
                if c == quote {
                    closed = true;
                    i += 1;
                    break;
                }
                if c == '\\' && i + 1 < n {
                    let next = chars[i + 1];
                    if quote == '\'' {
                        if next == '\'' || next == '\\' {
                            v.push(next);
                            i += 2;
                            continue;
                        }
                    } else {
                        let esc = match next {
                            'n' => Some('\n'),
                            't' => Some('\t'),
                            'r' => Some('\r'),
                            '\\' => Some('\\'),
                            '"' => Some('"'),
                            '\'' => Some('\''),
                            '0' => Some('\0'),
                            'a' => Some('\x07'),
                            'b' => Some('\x08'),
                            'f' => Some('\x0c'),
                            'v' => Some('\x0b'),
                            _ => None,
                        };
                        if let Some(e) = esc {
                            v.push(e);
                            i += 2;
                            continue;
                        }
                    }
                }
                v.push(c);
                i += 1;
            }
            // Skip the rest of the line (a trailing comment).
            while i < n && chars[i] != '\n' {
                i += 1;
            }
            if !closed {
                continue; // malformed: unterminated quote
            }
            (v, quote == '"')
        } else {
            let start = i;
            while i < n && chars[i] != '\n' {
                i += 1;
            }
            let raw: String = chars[start..i].iter().collect();
            // An inline comment starts at whitespace followed by '#'.
            let mut cut = raw.len();
            let bytes = raw.as_bytes();
            for (j, b) in bytes.iter().enumerate() {
                if *b == b'#' && j > 0 && (bytes[j - 1] == b' ' || bytes[j - 1] == b'\t') {
                    cut = j;
                    break;
                }
            }
            (raw[..cut].trim().to_owned(), true)
        };
        if key.is_empty() {
            continue;
        }
        let value = if expand {
            expand_vars(&value, &|name| env(name).or_else(|| out.get(name).cloned()))
        } else {
            value
        };
        out.insert(key, value);
    }
    out
}

/// python-dotenv's `${NAME}` / `${NAME:-default}` expansion.
fn expand_vars(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        let inner = &rest[start + 2..start + end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if name.contains(':') {
            // Not a variable reference python-dotenv recognizes: keep literally.
            out.push_str(&rest[..start + end + 1]);
            rest = &rest[start + end + 1..];
            continue;
        }
        out.push_str(&rest[..start]);
        out.push_str(&lookup(name).unwrap_or_else(|| default.unwrap_or("").to_owned()));
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A temp "DeerFlow install" and an injected environment.
    struct Env {
        dir: tempfile::TempDir,
        vars: HashMap<String, String>,
    }

    impl Env {
        fn new() -> Env {
            Env {
                dir: tempfile::tempdir().unwrap(),
                vars: HashMap::new(),
            }
        }
        fn root(&self) -> PathBuf {
            normalize(self.dir.path())
        }
        fn write(&self, rel: &str, text: &str) -> PathBuf {
            let p = self.root().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, text).unwrap();
            p
        }
        fn set(mut self, k: &str, v: &str) -> Env {
            self.vars.insert(k.into(), v.into());
            self
        }
        fn run(
            &self,
            config: Option<&Path>,
            dcwd: Option<&Path>,
        ) -> Result<Discovered, ConfigError> {
            self.run_in(&self.root(), config, dcwd, None)
        }
        fn run_in(
            &self,
            cwd: &Path,
            config: Option<&Path>,
            dcwd: Option<&Path>,
            env_file: Option<&Path>,
        ) -> Result<Discovered, ConfigError> {
            let vars = self.vars.clone();
            let env = move |k: &str| vars.get(k).cloned();
            discover(&DiscoverOptions {
                config,
                deerflow_cwd: dcwd,
                env_file,
                cwd,
                env: &env,
            })
        }
    }

    fn sqlite(d: &Discovered) -> PathBuf {
        match &d.target {
            Some(Target::Sqlite(p)) => p.clone(),
            other => panic!("expected sqlite, got {other:?}"),
        }
    }

    const DB: &str = "backend/.deer-flow/data/deerflow.db";

    #[test]
    fn config_priority_explicit_then_env_then_project_root_then_cwd() {
        let e = Env::new();
        e.write(DB, "x");
        let a = e.write(
            "a/config.yaml",
            "database:\n  sqlite_dir: ../backend/.deer-flow/data\n",
        );
        let b = e.write(
            "b/config.yaml",
            "database:\n  sqlite_dir: ../backend/.deer-flow/data\n",
        );
        let c = e.write(
            "c/config.yaml",
            "database:\n  sqlite_dir: ../backend/.deer-flow/data\n",
        );
        let cwd_cfg = e.write("config.yaml", "{}\n");
        let e = e.set("DEER_FLOW_CONFIG_PATH", b.to_str().unwrap()).set(
            "DEER_FLOW_PROJECT_ROOT",
            c.parent().unwrap().to_str().unwrap(),
        );

        // 1. explicit
        let d = e.run(Some(&a), None).unwrap();
        assert_eq!((d.config_path, d.config_rule), (a.clone(), "--config"));
        // 2. DEER_FLOW_CONFIG_PATH
        let d = e.run(None, None).unwrap();
        assert_eq!(
            (d.config_path, d.config_rule),
            (b.clone(), "DEER_FLOW_CONFIG_PATH")
        );
        // 3. DEER_FLOW_PROJECT_ROOT
        let mut e = e;
        e.vars.remove("DEER_FLOW_CONFIG_PATH");
        let d = e.run(None, None).unwrap();
        assert_eq!(
            (d.config_path, d.config_rule),
            (c.clone(), "DEER_FLOW_PROJECT_ROOT")
        );
        // 4. the current directory
        e.vars.remove("DEER_FLOW_PROJECT_ROOT");
        let d = e.run(None, None).unwrap();
        assert_eq!(
            (d.config_path.clone(), d.config_rule),
            (cwd_cfg, "current directory")
        );
        assert_eq!(sqlite(&d), e.root().join(DB));
    }

    #[test]
    fn config_errors_and_fallbacks() {
        let e = Env::new().set("DEER_FLOW_CONFIG_PATH", "nope.yaml");
        let err = e.run(None, None).unwrap_err();
        assert!(matches!(
            err,
            ConfigError::ConfigMissing {
                rule: "DEER_FLOW_CONFIG_PATH",
                ..
            }
        ));
        assert!(err.to_string().contains("nope.yaml"), "{err}");

        let err = Env::new()
            .run(Some(Path::new("missing.yaml")), None)
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::ConfigMissing {
                rule: "--config",
                ..
            }
        ));

        let e = Env::new().set("DEER_FLOW_PROJECT_ROOT", "no/such/dir");
        let err = e.run(None, None).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let e = Env::new();
        let f = e.write("file", "");
        let e = e.set("DEER_FLOW_PROJECT_ROOT", f.to_str().unwrap());
        assert!(
            e.run(None, None)
                .unwrap_err()
                .to_string()
                .contains("not a directory")
        );

        // Nothing anywhere.
        let e = Env::new();
        let err = e.run(None, None).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("no store given: pass --db TARGET, set DFCK_DB, or point --config"),
            "{err}"
        );

        // Source-tree fallbacks: ./backend/config.yaml, and ../config.yaml from backend/.
        let e = Env::new();
        e.write(DB, "x");
        let cfg = e.write("backend/config.yaml", "database: {}\n");
        let d = e.run(None, None).unwrap();
        assert_eq!(
            (d.config_path.clone(), d.config_rule),
            (cfg, "source-tree fallback")
        );
        // Config in backend/, no backend/backend: DeerFlow's cwd is backend/.
        assert_eq!(sqlite(&d), e.root().join(DB));
        let e = Env::new();
        e.write(DB, "x");
        let cfg = e.write("config.yaml", "");
        let d = e
            .run_in(&e.root().join("backend"), None, None, None)
            .unwrap();
        assert_eq!(
            (d.config_path.clone(), d.config_rule),
            (cfg, "source-tree fallback")
        );
    }

    #[test]
    fn database_defaults_and_deerflow_cwd() {
        // Missing section, null section, and a dict lacking backend/sqlite_dir: all sqlite
        // at .deer-flow/data relative to <config dir>/backend.
        for text in [
            "",
            "models: []\n",
            "database:\n",
            "database: ~\n",
            "database:\n  checkpoint_channel_mode: delta\n",
        ] {
            let e = Env::new();
            e.write(DB, "x");
            let cfg = e.write("config.yaml", text);
            let d = e.run(Some(&cfg), None).unwrap();
            assert_eq!(d.backend, "sqlite", "{text:?}");
            assert_eq!(d.source, SOURCE_DATABASE);
            assert_eq!(d.deerflow_cwd, e.root().join("backend"));
            assert_eq!(sqlite(&d), e.root().join(DB), "{text:?}");
        }
        // No backend/ dir: the config's dir is DeerFlow's cwd.
        let e = Env::new();
        e.write(".deer-flow/data/deerflow.db", "x");
        let cfg = e.write("config.yaml", "database: {backend: sqlite}\n");
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!(sqlite(&d), e.root().join(".deer-flow/data/deerflow.db"));
        // Explicit --deerflow-cwd and a relative sqlite_dir.
        let e = Env::new();
        e.write("srv/app/state/deerflow.db", "x");
        let cfg = e.write(
            "config.yaml",
            "database:\n  backend: sqlite\n  sqlite_dir: ./state\n",
        );
        let d = e.run(Some(&cfg), Some(Path::new("srv/app"))).unwrap();
        assert_eq!(sqlite(&d), e.root().join("srv/app/state/deerflow.db"));
        // Absolute sqlite_dir ignores the cwd.
        let abs = e.root().join("srv/app/state");
        let cfg = e.write(
            "abs.yaml",
            &format!("database:\n  sqlite_dir: '{}'\n", abs.display()),
        );
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!(sqlite(&d), abs.join("deerflow.db"));
        // A missing store file is an error naming the path.
        let cfg = e.write("missing.yaml", "database:\n  sqlite_dir: nowhere\n");
        let err = e.run(Some(&cfg), None).unwrap_err();
        assert!(matches!(err, ConfigError::StoreMissing { .. }));
        assert!(
            err.to_string()
                .contains(&e.root().join("nowhere/deerflow.db").display().to_string()),
            "{err}"
        );
        // --deerflow-cwd must be a directory.
        assert!(matches!(
            e.run(Some(&cfg), Some(Path::new("no-such"))).unwrap_err(),
            ConfigError::DeerflowCwd { .. }
        ));
        // A bad backend.
        let cfg = e.write("bad.yaml", "database:\n  backend: mysql\n");
        assert!(
            e.run(Some(&cfg), None)
                .unwrap_err()
                .to_string()
                .contains("database.backend")
        );
    }

    #[test]
    fn dollar_substitution() {
        let e = Env::new().set("DF_DATA", "state");
        e.write("backend/state/deerflow.db", "x");
        let cfg = e.write(
            "config.yaml",
            "models:\n  - api_key: $UNSET_KEY\ndatabase:\n  sqlite_dir: $DF_DATA\n",
        );
        // Unrelated sections are not resolved (dfck does not need model keys).
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!(sqlite(&d), e.root().join("backend/state/deerflow.db"));
        // Only a value that starts with $ is replaced, and entirely.
        let cfg = e.write("c2.yaml", "database:\n  sqlite_dir: state$DF_DATA\n");
        let err = e.run(Some(&cfg), None).unwrap_err();
        assert!(err.to_string().contains("state$DF_DATA"), "{err}");
        // Missing variable: an error naming it (and the key), never a value.
        let cfg = e.write(
            "c3.yaml",
            "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n",
        );
        let err = e.run(Some(&cfg), None).unwrap_err();
        assert!(
            matches!(&err, ConfigError::MissingEnv { var, key, .. } if var == "DATABASE_URL" && key == "database.postgres_url")
        );
        assert!(err.to_string().contains("DATABASE_URL"));
    }

    #[test]
    fn dotenv_loading_does_not_override() {
        let e = Env::new().set("DF_DIR", "from-process");
        e.write("backend/from-process/deerflow.db", "x");
        e.write("backend/from-dotenv/deerflow.db", "x");
        e.write(
            ".env",
            "# comment\nexport DF_DIR=from-dotenv\nDF_OTHER='from-dotenv'  # c\n",
        );
        let cfg = e.write("config.yaml", "database:\n  sqlite_dir: $DF_DIR\n");
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!(d.env_file, Some(e.root().join(".env")));
        assert_eq!(
            sqlite(&d),
            e.root().join("backend/from-process/deerflow.db")
        );
        let cfg = e.write("c2.yaml", "database:\n  sqlite_dir: $DF_OTHER\n");
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!(sqlite(&d), e.root().join("backend/from-dotenv/deerflow.db"));
        // --env-file, relative to dfck's cwd; must exist.
        e.write("other.env", "DF_OTHER=from-process\n");
        let d = e
            .run_in(&e.root(), Some(&cfg), None, Some(Path::new("other.env")))
            .unwrap();
        assert_eq!(
            sqlite(&d),
            e.root().join("backend/from-process/deerflow.db")
        );
        assert!(matches!(
            e.run_in(&e.root(), Some(&cfg), None, Some(Path::new("nope.env")))
                .unwrap_err(),
            ConfigError::EnvFileMissing { .. }
        ));
    }

    #[test]
    fn dotenv_parser() {
        let text = "A=1\nexport B = two words # comment\nC=\"x\\ny\" # c\nD='lit ${A}'\nE=${A}-${NOPE:-dflt}-${P}\nbad line\nF=\"multi\nline\"\n  # indented comment\nG=a#b\n";
        let env = |k: &str| (k == "P").then(|| "proc".to_owned());
        let m = parse_dotenv(text, &env);
        assert_eq!(m["A"], "1");
        assert_eq!(m["B"], "two words");
        assert_eq!(m["C"], "x\ny");
        assert_eq!(m["D"], "lit ${A}");
        assert_eq!(m["E"], "1-dflt-proc");
        assert_eq!(m["F"], "multi\nline");
        assert_eq!(m["G"], "a#b");
        assert!(!m.contains_key("bad line"));
    }

    #[test]
    fn legacy_checkpointer_sqlite() {
        // Relative to DEER_FLOW_HOME.
        let e = Env::new().set("DEER_FLOW_HOME", "/nonexistent-home-for-test");
        let cfg = e.write("config.yaml", "checkpointer:\n  type: sqlite\n");
        let err = e.run(Some(&cfg), None).unwrap_err();
        assert!(
            err.to_string()
                .contains("/nonexistent-home-for-test/store.db"),
            "{err}"
        );
        let home = e.root().join("home");
        e.write("home/ck.db", "x");
        let e = e.set("DEER_FLOW_HOME", home.to_str().unwrap());
        let cfg = e.write(
            "c2.yaml",
            "database:\n  backend: postgres\n  checkpoint_channel_mode: delta\ncheckpointer:\n  type: sqlite\n  connection_string: ck.db\n",
        );
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!((d.backend.as_str(), d.source), ("sqlite", SOURCE_LEGACY));
        assert_eq!(sqlite(&d), home.join("ck.db"));
        // Mode keys still come from `database`.
        assert_eq!(d.checkpoint_channel_mode, "delta");
        // DEER_FLOW_HOME from the .env beside the config.
        let e = Env::new();
        e.write("h2/store.db", "x");
        e.write(
            ".env",
            &format!("DEER_FLOW_HOME={}\n", e.root().join("h2").display()),
        );
        let cfg = e.write("config.yaml", "checkpointer: {type: sqlite}\n");
        assert_eq!(
            sqlite(&e.run(Some(&cfg), None).unwrap()),
            e.root().join("h2/store.db")
        );

        // No DEER_FLOW_HOME: <project root>/.deer-flow, project root = DEER_FLOW_PROJECT_ROOT
        // else DeerFlow's cwd.
        let e = Env::new();
        e.write("backend/.deer-flow/store.db", "x");
        let cfg = e.write(
            "config.yaml",
            "checkpointer:\n  type: sqlite\n  connection_string: store.db\n",
        );
        assert_eq!(
            sqlite(&e.run(Some(&cfg), None).unwrap()),
            e.root().join("backend/.deer-flow/store.db")
        );
        e.write("proj/.deer-flow/store.db", "x");
        let proj = e.root().join("proj");
        let e = e.set("DEER_FLOW_PROJECT_ROOT", proj.to_str().unwrap());
        assert_eq!(
            sqlite(&e.run(Some(&cfg), None).unwrap()),
            e.root().join("proj/.deer-flow/store.db")
        );
        // Absolute paths and file: URIs are used as is; :memory: is memory.
        let abs = e.root().join("proj/.deer-flow/store.db");
        let cfg = e.write(
            "abs.yaml",
            &format!(
                "checkpointer:\n  type: sqlite\n  connection_string: {}\n",
                abs.display()
            ),
        );
        assert_eq!(sqlite(&e.run(Some(&cfg), None).unwrap()), abs);
        let cfg = e.write(
            "uri.yaml",
            &format!(
                "checkpointer:\n  type: sqlite\n  connection_string: 'file://{}?mode=ro'\n",
                abs.display()
            ),
        );
        assert_eq!(sqlite(&e.run(Some(&cfg), None).unwrap()), abs);
        let cfg = e.write(
            "mem.yaml",
            "checkpointer:\n  type: sqlite\n  connection_string: ':memory:'\n",
        );
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!((d.backend.as_str(), d.target.clone()), ("memory", None));
        let cfg = e.write("mem2.yaml", "checkpointer:\n  type: memory\n");
        assert_eq!(e.run(Some(&cfg), None).unwrap().backend, "memory");
        let cfg = e.write("pg.yaml", "checkpointer:\n  type: postgres\n");
        assert!(
            e.run(Some(&cfg), None)
                .unwrap_err()
                .to_string()
                .contains("checkpointer.connection_string")
        );
        let cfg = e.write("pg2.yaml", "checkpointer:\n  type: postgres\n  connection_string: postgres://u:pw@h/db\n  postgres_schema: ck\n");
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!(
            d.target,
            Some(Target::Postgres {
                url: "postgres://u:pw@h/db".into(),
                schema: Some("ck".into())
            })
        );
    }

    #[test]
    fn postgres_url_and_schema() {
        let e = Env::new().set(
            "DATABASE_URL",
            "postgresql+asyncpg://deer:s3cret@db:5432/deerflow",
        );
        let cfg = e.write(
            "config.yaml",
            "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n  postgres_schema: deerflow_ck\n",
        );
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!(d.backend, "postgres");
        assert_eq!(
            d.target,
            Some(Target::Postgres {
                url: "postgresql://deer:s3cret@db:5432/deerflow".into(),
                schema: Some("deerflow_ck".into())
            })
        );
        // postgres:// accepted; no schema.
        let cfg = e.write(
            "c2.yaml",
            "database:\n  backend: postgres\n  postgres_url: postgres://h/db\n",
        );
        assert_eq!(
            e.run(Some(&cfg), None).unwrap().target,
            Some(Target::Postgres {
                url: "postgres://h/db".into(),
                schema: None
            })
        );
        // Invalid schema.
        for bad in ["Public", "1abc", "a-b", &"a".repeat(64)] {
            let cfg = e.write("c3.yaml", &format!("database:\n  backend: postgres\n  postgres_url: postgres://h/db\n  postgres_schema: '{bad}'\n"));
            let err = e.run(Some(&cfg), None).unwrap_err();
            assert!(
                err.to_string().contains("database.postgres_schema"),
                "{bad}: {err}"
            );
        }
        assert!(valid_schema("_a1") && valid_schema(&"a".repeat(63)));
        // Missing URL; a wrong scheme is reported without the password.
        let cfg = e.write("c4.yaml", "database:\n  backend: postgres\n");
        assert!(
            e.run(Some(&cfg), None)
                .unwrap_err()
                .to_string()
                .contains("postgres_url")
        );
        let cfg = e.write(
            "c5.yaml",
            "database:\n  backend: postgres\n  postgres_url: mysql://u:hunter2@h/db\n",
        );
        let err = e.run(Some(&cfg), None).unwrap_err().to_string();
        assert!(!err.contains("hunter2") && err.contains("u:***@h"), "{err}");
    }

    #[test]
    fn memory_backend() {
        let e = Env::new();
        let cfg = e.write("config.yaml", "database:\n  backend: memory\n");
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!(
            (d.backend.as_str(), d.source, d.target),
            ("memory", SOURCE_DATABASE, None)
        );
    }

    #[test]
    fn mode_keys() {
        let e = Env::new();
        e.write(DB, "x");
        let run = |text: &str| {
            let cfg = e.write("config.yaml", text);
            e.run(Some(&cfg), None)
        };
        let d = run("database: {}\n").unwrap();
        assert_eq!(
            (d.checkpoint_channel_mode.as_str(), d.snapshot_frequency),
            ("full", 10)
        );
        let d = run("database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta:\n    snapshot_frequency: 3\n").unwrap();
        assert_eq!(
            (d.checkpoint_channel_mode.as_str(), d.snapshot_frequency),
            ("delta", 3)
        );
        let d = run("database:\n  checkpoint_delta_snapshot_frequency: 7\n").unwrap();
        assert_eq!(d.snapshot_frequency, 7);
        // Nested wins over the legacy flat key.
        let d = run("database:\n  checkpoint_delta_snapshot_frequency: 7\n  checkpoint_delta: {snapshot_frequency: 5}\n").unwrap();
        assert_eq!(d.snapshot_frequency, 5);
        assert!(
            run("database:\n  checkpoint_channel_mode: partial\n")
                .unwrap_err()
                .to_string()
                .contains("checkpoint_channel_mode")
        );
        assert!(
            run("database:\n  checkpoint_delta: {snapshot_frequency: 0}\n")
                .unwrap_err()
                .to_string()
                .contains("snapshot_frequency")
        );
    }

    #[test]
    fn yaml_like_pyyaml() {
        let n = parse_yaml("a: 1\na: 2\nb: yes\nc: '010'\nd: 010\ne: ~\nbase: &b {x: 1, y: 2}\nf:\n  <<: *b\n  y: 3\n").unwrap();
        let Node::Map(m) = n else { panic!() };
        assert_eq!(get(&m, "a"), Some(&Node::Int(2)));
        assert_eq!(get(&m, "b"), Some(&Node::Bool(true)));
        assert_eq!(get(&m, "c"), Some(&Node::Str("010".into())));
        assert_eq!(get(&m, "d"), Some(&Node::Int(8)));
        assert_eq!(get(&m, "e"), Some(&Node::Null));
        let Some(Node::Map(f)) = get(&m, "f") else {
            panic!()
        };
        assert_eq!(get(f, "x"), Some(&Node::Int(1)));
        assert_eq!(get(f, "y"), Some(&Node::Int(3)));
        assert!(parse_yaml("a: [1\n").is_err());
        assert!(parse_yaml("--- 1\n--- 2\n").is_err());
        // Alias bombs are bounded.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            bomb.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
        }
        assert!(parse_yaml(&bomb).unwrap_err().contains("too large"));
    }
}
