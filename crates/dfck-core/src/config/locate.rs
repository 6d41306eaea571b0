//! Where things are: the config file (by priority rule), DeerFlow's project root and working
//! directory, the `.env` file, and DeerFlow's data home (`Paths.base_dir`).

use super::DiscoverOptions;
use super::paths::{absolute, show};
use crate::error::ConfigError;
use std::path::{Path, PathBuf};

/// The config file and the rule that chose it.
pub(super) fn find_config(
    opts: &DiscoverOptions,
    cwd: &Path,
) -> Result<(PathBuf, &'static str), ConfigError> {
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
pub(super) fn project_root_env(
    opts: &DiscoverOptions,
    cwd: &Path,
) -> Result<Option<PathBuf>, ConfigError> {
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
pub(super) fn base_dir(
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

/// DeerFlow's process CWD: `--deerflow-cwd` (must be a directory), else `<config dir>/backend`
/// when it exists, else the config's directory.
pub(super) fn deerflow_cwd(
    opts: &DiscoverOptions,
    cwd: &Path,
    config_dir: &Path,
) -> Result<PathBuf, ConfigError> {
    if let Some(d) = opts.deerflow_cwd {
        let d = absolute(cwd, d);
        if !d.is_dir() {
            return Err(ConfigError::DeerflowCwd { path: show(&d) });
        }
        return Ok(d);
    }
    let backend = config_dir.join("backend");
    Ok(if backend.is_dir() {
        backend
    } else {
        config_dir.to_path_buf()
    })
}

/// The `.env` file to load: `--env-file` (must exist), else the first `.env` beside the
/// config, at the project root, in DeerFlow's CWD.
pub(super) fn env_file(
    opts: &DiscoverOptions,
    cwd: &Path,
    config_dir: &Path,
    deerflow_cwd: &Path,
) -> Result<Option<PathBuf>, ConfigError> {
    if let Some(f) = opts.env_file {
        let f = absolute(cwd, f);
        if !f.is_file() {
            return Err(ConfigError::EnvFileMissing { path: show(&f) });
        }
        return Ok(Some(f));
    }
    let root = project_root_env(opts, cwd)?.unwrap_or_else(|| cwd.to_path_buf());
    Ok([config_dir, &root, deerflow_cwd]
        .into_iter()
        .map(|dir| dir.join(".env"))
        .find(|f| f.is_file()))
}
