//! [`discover`]: the steps of config discovery in order — locate the config file, load the
//! environment, parse the YAML, read the mode keys, select the store — each a small function.

use super::backend::{self, Selection};
use super::dotenv::parse_dotenv;
use super::locate;
use super::paths::{normalize, read, show};
use super::yaml::{Node, get, opt_str, parse_yaml, positive_int, substitute};
use super::{DiscoverOptions, Discovered, SOURCE_DATABASE, SOURCE_LEGACY, invalid};
use crate::error::ConfigError;
use crate::model::ChannelMode;
use std::collections::HashMap;
use std::path::Path;

/// `database.checkpoint_delta.snapshot_frequency` when unset.
const DEFAULT_SNAPSHOT_FREQUENCY: u64 = 10;

/// A YAML mapping's entries.
type Map = Vec<(Node, Node)>;

/// Finds the DeerFlow config and resolves the checkpoint store it selects.
pub fn discover(opts: &DiscoverOptions) -> Result<Discovered, ConfigError> {
    let cwd = normalize(opts.cwd);
    let (config_path, config_rule) = locate::find_config(opts, &cwd)?;
    let cfg = show(&config_path);
    let config_dir = config_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cwd.clone());
    let deerflow_cwd = locate::deerflow_cwd(opts, &cwd, &config_dir)?;

    // The .env file: never overrides the process environment.
    let env_file = locate::env_file(opts, &cwd, &config_dir, &deerflow_cwd)?;
    let env = Environment::load(opts, env_file.as_deref(), &cfg)?;
    let subst = |node: Node, key: &str| env.substitute(node, key);

    let top = top_level(&config_path, &cfg)?;
    // `database`: a missing or null section → {backend: sqlite, sqlite_dir: .deer-flow/data};
    // a dict lacking backend/sqlite_dir gets those two.
    let database = match section(&top, "database") {
        None => Vec::new(),
        Some(node) => mapping(subst(node, "database")?, &cfg, "database")?,
    };
    // Mode keys: always from `database`, even when `checkpointer:` selects the store.
    let checkpoint_channel_mode = channel_mode(&database, &cfg)?;
    let snapshot_frequency = snapshot_frequency(&database, &cfg)?;

    let (source, selection) = match section(&top, "checkpointer") {
        Some(node) => {
            let ck = mapping(subst(node, "checkpointer")?, &cfg, "checkpointer")?;
            let lookup = |name: &str| env.get(name);
            let data_home = || locate::base_dir(opts, &cwd, &deerflow_cwd, &lookup);
            let selection = backend::legacy(&ck, &cfg, &deerflow_cwd, &data_home)?;
            (SOURCE_LEGACY, selection)
        }
        None => (
            SOURCE_DATABASE,
            backend::database(&database, &cfg, &deerflow_cwd)?,
        ),
    };

    let lookup = |name: &str| env.get(name);
    let base_dir = locate::base_dir(opts, &cwd, &deerflow_cwd, &lookup)?;
    let app = super::app::app_config(
        &database,
        &top,
        &cfg,
        &deerflow_cwd,
        base_dir,
        checkpoint_channel_mode,
        &lookup,
    )?;
    // sqlite: the file must exist (the store layer checks its tables).
    if let Selection::Sqlite { path, how } = &selection {
        if !path.is_file() {
            return Err(store_missing(opts, source, path, how, cfg));
        }
    }
    Ok(Discovered {
        config_path,
        config_rule,
        env_file,
        deerflow_cwd,
        backend: selection.backend(),
        source,
        target: selection.into_target(),
        checkpoint_channel_mode,
        snapshot_frequency,
        app,
    })
}

/// The variables `$VAR` values and `DEER_FLOW_HOME` read: the process environment, then the
/// `.env` file.
struct Environment<'a> {
    process: &'a dyn Fn(&str) -> Option<String>,
    dotenv: HashMap<String, String>,
    /// The `.env` file as named in errors, or "no .env file".
    desc: String,
    /// The config file, for errors.
    cfg: &'a str,
}

impl<'a> Environment<'a> {
    fn load(
        opts: &DiscoverOptions<'a>,
        env_file: Option<&Path>,
        cfg: &'a str,
    ) -> Result<Self, ConfigError> {
        let dotenv = match env_file {
            Some(f) => parse_dotenv(&read(f)?, opts.env),
            None => HashMap::new(),
        };
        Ok(Environment {
            process: opts.env,
            dotenv,
            desc: env_file.map_or_else(|| "no .env file".into(), show),
            cfg,
        })
    }

    fn get(&self, name: &str) -> Option<String> {
        (self.process)(name).or_else(|| self.dotenv.get(name).cloned())
    }

    /// `node` with every `$VAR` string replaced; a missing variable is an error.
    fn substitute(&self, node: Node, key: &str) -> Result<Node, ConfigError> {
        substitute(node, key, &|var, key| {
            self.get(var).ok_or_else(|| ConfigError::MissingEnv {
                path: self.cfg.to_owned(),
                var: var.to_owned(),
                key: key.to_owned(),
                env_file: self.desc.clone(),
            })
        })
    }
}

/// The config file's top-level mapping (an empty file is an empty mapping).
fn top_level(config_path: &Path, cfg: &str) -> Result<Map, ConfigError> {
    let text = read(config_path)?;
    let doc = parse_yaml(&text).map_err(|reason| ConfigError::Yaml {
        path: cfg.to_owned(),
        reason: one_line(&reason),
    })?;
    match doc {
        Node::Map(m) => Ok(m),
        Node::Null => Ok(Vec::new()),
        other => Err(not_a_mapping(cfg, "(top level)", &other)),
    }
}

/// A top-level section, unless missing or null.
fn section(top: &[(Node, Node)], key: &str) -> Option<Node> {
    get(top, key).filter(|n| **n != Node::Null).cloned()
}

/// A section's entries: a mapping, or null as an empty one.
fn mapping(node: Node, cfg: &str, key: &str) -> Result<Map, ConfigError> {
    match node {
        Node::Map(m) => Ok(m),
        Node::Null => Ok(Vec::new()),
        other => Err(not_a_mapping(cfg, key, &other)),
    }
}

fn not_a_mapping(cfg: &str, key: &str, found: &Node) -> ConfigError {
    invalid(
        cfg,
        key,
        format!("expected a mapping, found {}", found.kind()),
    )
}

/// `database.checkpoint_channel_mode`: `full` (the default) or `delta`.
fn channel_mode(database: &[(Node, Node)], cfg: &str) -> Result<ChannelMode, ConfigError> {
    match opt_str(database, "checkpoint_channel_mode", cfg)? {
        None => Ok(ChannelMode::Full),
        Some(m) => ChannelMode::parse(&m).ok_or_else(|| {
            invalid(
                cfg,
                "database.checkpoint_channel_mode",
                format!("expected 'full' or 'delta', found '{m}'"),
            )
        }),
    }
}

/// `database.checkpoint_delta.snapshot_frequency`, else the legacy flat
/// `database.checkpoint_delta_snapshot_frequency`, else 10; an integer ≥ 1.
fn snapshot_frequency(database: &[(Node, Node)], cfg: &str) -> Result<u64, ConfigError> {
    let nested = match get(database, "checkpoint_delta") {
        None | Some(Node::Null) => None,
        Some(Node::Map(m)) => get(m, "snapshot_frequency")
            .filter(|n| **n != Node::Null)
            .map(|n| (n, "database.checkpoint_delta.snapshot_frequency")),
        Some(other) => return Err(not_a_mapping(cfg, "database.checkpoint_delta", other)),
    };
    let flat = get(database, "checkpoint_delta_snapshot_frequency")
        .filter(|n| **n != Node::Null)
        .map(|n| (n, "database.checkpoint_delta_snapshot_frequency"));
    match nested.or(flat) {
        None => Ok(DEFAULT_SNAPSHOT_FREQUENCY),
        Some((node, key)) => positive_int(node).ok_or_else(|| {
            invalid(
                cfg,
                key,
                format!("expected an integer >= 1, found {}", node.show()),
            )
        }),
    }
}

/// The error for a SQLite store file that does not exist, with a hint on where it was looked.
fn store_missing(
    opts: &DiscoverOptions,
    source: &str,
    path: &Path,
    how: &str,
    cfg: String,
) -> ConfigError {
    let hint = if source == SOURCE_LEGACY {
        "; set DEER_FLOW_HOME to DeerFlow's data home".to_owned()
    } else if opts.deerflow_cwd.is_none() {
        "; pass --deerflow-cwd DIR if DeerFlow runs from another directory".to_owned()
    } else {
        String::new()
    };
    ConfigError::StoreMissing {
        path: show(path),
        how: how.to_owned(),
        config: cfg,
        hint,
    }
}

/// A parser message on one line.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}
