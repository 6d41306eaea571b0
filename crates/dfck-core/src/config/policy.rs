//! `dfck maintain`'s retention policy: the `dfck:` section of DeerFlow's config.yaml, or a
//! file of its own whose top level is the policy. Every key is validated (an unknown key or
//! a wrong value is one error naming the key and its line); [`Policy::explain`] lists each
//! effective value with where it came from.

use super::yaml::{Node, get, parse_yaml};
use super::{invalid, line_of_key};
use crate::error::ConfigError;
use serde::Serialize;
use std::path::Path;

/// What to prune in every swept thread (`dfck prune`'s shapes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrunePolicy {
    /// `--branches`.
    pub branches: bool,
    /// `--keep-last-turns N`.
    pub keep_last_turns: Option<u32>,
}

/// The retention policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    /// Prune shapes; `None`: no prune step.
    pub prune: Option<PrunePolicy>,
    /// Delete threads untouched this long (seconds).
    pub delete_idle: Option<u64>,
    /// Delete threads whose first checkpoint is older than this (seconds).
    pub delete_older_than: Option<u64>,
    /// Convert full-mode threads of more stored bytes than this to delta mode.
    pub convert_over: Option<u64>,
    /// Reclaim when free pages (SQLite) or dead tuples (PostgreSQL) are at least this share.
    pub reclaim_free_over: Option<f64>,
    /// Reclaim when the SQLite WAL is at least this large.
    pub reclaim_wal_over: Option<u64>,
    /// Leave threads DeerFlow users pinned alone.
    pub exempt_pinned: bool,
    /// Thread ids never touched.
    pub exempt_threads: Vec<String>,
    /// Owners whose threads are never touched.
    pub exempt_users: Vec<String>,
    /// A `threads_meta.metadata_json` key that, when truthy, exempts the thread.
    pub exempt_metadata_key: Option<String>,
    /// Threads handled per run (refused ones do not count).
    pub sweep_limit: Option<u64>,
    /// No new thread is started after this many seconds.
    pub time_budget: Option<u64>,
    /// Run a verify pass after the sweep.
    pub verify: bool,
    /// The lease's lifetime unless renewed (seconds).
    pub lease_ttl: u64,
    /// Each key's value and where it came from, in key order ([`Policy::explain`]).
    #[serde(skip)]
    pub sources: Vec<Source>,
}

/// One effective value and its origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The dotted key (`prune.branches`).
    pub key: String,
    /// The value as shown.
    pub value: String,
    /// `config.yaml:12`, or `default`.
    pub from: String,
}

/// The keys, each with its default as shown.
const KEYS: &[(&str, &str)] = &[
    ("prune.branches", "false"),
    ("prune.keep_last_turns", "none"),
    ("delete.idle", "none"),
    ("delete.older_than", "none"),
    ("convert.full_to_delta_over", "none"),
    ("reclaim.free_over", "none"),
    ("reclaim.wal_over", "none"),
    ("exempt.pinned", "true"),
    ("exempt.threads", "[]"),
    ("exempt.users", "[]"),
    ("exempt.metadata_key", "none"),
    ("sweep.limit", "none"),
    ("sweep.time_budget", "none"),
    ("verify", "true"),
    ("lease_ttl", "120s"),
];

/// The sections and their keys.
const SECTIONS: &[(&str, &[&str])] = &[
    ("prune", &["branches", "keep_last_turns"]),
    ("delete", &["idle", "older_than"]),
    ("convert", &["full_to_delta_over"]),
    ("reclaim", &["free_over", "wal_over"]),
    ("exempt", &["pinned", "threads", "users", "metadata_key"]),
    ("sweep", &["limit", "time_budget"]),
];

impl Policy {
    /// Reads the policy from `text` (the file `path`): its `dfck` section when `section`,
    /// else its top level. `Ok(None)` when a config has no `dfck` section.
    pub fn parse(text: &str, path: &Path, section: bool) -> Result<Option<Policy>, ConfigError> {
        let shown = path.display().to_string();
        let doc = parse_yaml(text).map_err(|e| ConfigError::Invalid {
            path: shown.clone(),
            key: if section {
                "dfck".into()
            } else {
                "(policy)".into()
            },
            reason: format!("not valid YAML: {e}"),
        })?;
        let prefix = if section { "dfck." } else { "" };
        let root = if section {
            match &doc {
                Node::Map(m) => match get(m, "dfck") {
                    None | Some(Node::Null) => return Ok(None),
                    Some(n) => n.clone(),
                },
                _ => return Ok(None),
            }
        } else {
            doc
        };
        let at = |key: &str| {
            let full = format!("{prefix}{key}");
            match line_of_key(text, &full) {
                Some(n) => format!("{shown}:{n}"),
                None => shown.clone(),
            }
        };
        let bad = |key: &str, reason: String| invalid(&at(key), &format!("{prefix}{key}"), reason);
        let map = match &root {
            Node::Map(m) => m.clone(),
            Node::Null => Vec::new(),
            other => {
                return Err(bad(
                    prefix.trim_end_matches('.'),
                    format!("expected a mapping, found {}", other.kind()),
                ));
            }
        };
        // Unknown keys, at both levels, are errors naming the nearest known one.
        let mut values: Vec<(String, Node)> = Vec::new();
        for (k, v) in &map {
            let Node::Str(k) = k else {
                return Err(bad(
                    "",
                    format!("a key must be a string, found {}", k.kind()),
                ));
            };
            match SECTIONS.iter().find(|(s, _)| s == k) {
                Some((s, keys)) => match v {
                    Node::Null => {
                        values.push((s.to_string(), Node::Null));
                    }
                    Node::Map(inner) => {
                        values.push((s.to_string(), Node::Null));
                        for (ik, iv) in inner {
                            let Node::Str(ik) = ik else {
                                return Err(bad(s, "a key must be a string".into()));
                            };
                            if !keys.contains(&ik.as_str()) {
                                return Err(bad(&format!("{s}.{ik}"), unknown(ik, keys)));
                            }
                            values.push((format!("{s}.{ik}"), iv.clone()));
                        }
                    }
                    other => {
                        return Err(bad(
                            s,
                            format!("expected a mapping, found {}", other.kind()),
                        ));
                    }
                },
                None if k == "verify" || k == "lease_ttl" => values.push((k.clone(), v.clone())),
                None => {
                    let mut top: Vec<&str> = SECTIONS.iter().map(|(s, _)| *s).collect();
                    top.extend(["verify", "lease_ttl"]);
                    return Err(bad(k, unknown(k, &top)));
                }
            }
        }
        let find = |key: &str| values.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let mut p = Policy {
            prune: find("prune").map(|_| PrunePolicy {
                branches: false,
                keep_last_turns: None,
            }),
            ..Policy::default()
        };
        let mut sources = Vec::new();
        for (key, default) in KEYS {
            let Some(node) = find(key).filter(|n| **n != Node::Null) else {
                sources.push(Source {
                    key: (*key).into(),
                    value: (*default).into(),
                    from: "default".into(),
                });
                continue;
            };
            let e = |reason: String| bad(key, reason);
            let shown = apply(&mut p, key, node).map_err(e)?;
            sources.push(Source {
                key: (*key).into(),
                value: shown,
                from: at(key),
            });
        }
        p.sources = sources;
        Ok(Some(p))
    }

    /// Every key with its effective value and origin, in key order.
    pub fn explain(&self) -> &[Source] {
        &self.sources
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            prune: None,
            delete_idle: None,
            delete_older_than: None,
            convert_over: None,
            reclaim_free_over: None,
            reclaim_wal_over: None,
            exempt_pinned: true,
            exempt_threads: Vec::new(),
            exempt_users: Vec::new(),
            exempt_metadata_key: None,
            sweep_limit: None,
            time_budget: None,
            verify: true,
            lease_ttl: 120,
            sources: Vec::new(),
        }
    }
}

fn unknown(key: &str, known: &[&str]) -> String {
    let near = crate::suggest::nearest(key, known.iter().copied());
    match near.first() {
        Some(n) => format!("unknown key (did you mean {n}?)"),
        None => format!("unknown key (known: {})", known.join(", ")),
    }
}

/// The prune section, created when a prune key is set.
fn prune(p: &mut Policy) -> &mut PrunePolicy {
    p.prune.get_or_insert(PrunePolicy {
        branches: false,
        keep_last_turns: None,
    })
}

/// Sets `key` from `node`; the value as shown.
fn apply(p: &mut Policy, key: &str, node: &Node) -> Result<String, String> {
    match key {
        "prune.branches" => {
            let b = boolean(node)?;
            prune(p).branches = b;
            Ok(b.to_string())
        }
        "prune.keep_last_turns" => {
            let n = count(node)?;
            let n = u32::try_from(n).map_err(|_| "too large".to_string())?;
            prune(p).keep_last_turns = Some(n);
            Ok(n.to_string())
        }
        "delete.idle" => duration(node).map(|d| {
            p.delete_idle = Some(d.0);
            d.1
        }),
        "delete.older_than" => duration(node).map(|d| {
            p.delete_older_than = Some(d.0);
            d.1
        }),
        "convert.full_to_delta_over" => size(node).map(|b| {
            p.convert_over = Some(b.0);
            b.1
        }),
        "reclaim.free_over" => share(node).map(|s| {
            p.reclaim_free_over = Some(s.0);
            s.1
        }),
        "reclaim.wal_over" => size(node).map(|b| {
            p.reclaim_wal_over = Some(b.0);
            b.1
        }),
        "exempt.pinned" => boolean(node).map(|b| {
            p.exempt_pinned = b;
            b.to_string()
        }),
        "exempt.threads" => strings(node).map(|v| {
            let shown = format!("[{}]", v.join(", "));
            p.exempt_threads = v;
            shown
        }),
        "exempt.users" => strings(node).map(|v| {
            let shown = format!("[{}]", v.join(", "));
            p.exempt_users = v;
            shown
        }),
        "exempt.metadata_key" => match node {
            Node::Str(s) if !s.is_empty() => {
                p.exempt_metadata_key = Some(s.clone());
                Ok(s.clone())
            }
            other => Err(format!("expected a key name, found {}", other.kind())),
        },
        "sweep.limit" => count(node).map(|n| {
            p.sweep_limit = Some(n);
            n.to_string()
        }),
        "sweep.time_budget" => duration(node).map(|d| {
            p.time_budget = Some(d.0);
            d.1
        }),
        "verify" => boolean(node).map(|b| {
            p.verify = b;
            b.to_string()
        }),
        "lease_ttl" => duration(node).and_then(|d| {
            if d.0 < 60 {
                return Err("must be at least 60s (the lease is renewed every 30 s)".into());
            }
            p.lease_ttl = d.0;
            Ok(d.1)
        }),
        _ => Err("unknown key".into()),
    }
}

fn boolean(node: &Node) -> Result<bool, String> {
    match node {
        Node::Bool(b) => Ok(*b),
        other => Err(format!("expected true or false, found {}", other.kind())),
    }
}

fn count(node: &Node) -> Result<u64, String> {
    super::yaml::positive_int(node).ok_or_else(|| {
        format!(
            "expected a whole number of at least 1, found {}",
            node.show()
        )
    })
}

fn duration(node: &Node) -> Result<(u64, String), String> {
    match node {
        Node::Str(s) => {
            let d = crate::time::parse_duration(s)?;
            if d == 0 {
                return Err(format!("'{s}' is zero"));
            }
            Ok((d, s.trim().to_owned()))
        }
        other => Err(format!(
            "expected a duration such as 90d or 12h, found {}",
            other.show()
        )),
    }
}

/// Bytes: a whole number, or one with a unit (KB, MB, GB, KiB, MiB, GiB, TiB).
fn size(node: &Node) -> Result<(u64, String), String> {
    let text = match node {
        Node::Int(i) if *i >= 0 => return Ok((*i as u64, format!("{i} B"))),
        Node::Str(s) => s.trim().to_owned(),
        other => {
            return Err(format!(
                "expected a size such as 64MiB, found {}",
                other.show()
            ));
        }
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!("invalid size '{text}': expected a number and a unit such as 64MiB")
    })?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        u => {
            return Err(format!(
                "invalid size unit '{u}' in '{text}': use B, KB, MB, GB, KiB, MiB, GiB or TiB"
            ));
        }
    };
    n.checked_mul(mult)
        .map(|b| (b, text.clone()))
        .ok_or_else(|| format!("size '{text}' is too large"))
}

/// A share: `20%` or a number between 0 and 1 (`0%`: every run).
fn share(node: &Node) -> Result<(f64, String), String> {
    let (v, shown) = match node {
        Node::Str(s) if s.trim().ends_with('%') => {
            let t = s.trim().trim_end_matches('%').trim();
            let v: f64 = t
                .parse()
                .map_err(|_| format!("invalid share '{s}': expected e.g. 20%"))?;
            (v / 100.0, s.trim().to_owned())
        }
        Node::Float(f) => (
            f.parse::<f64>()
                .map_err(|_| format!("invalid share '{f}'"))?,
            f.clone(),
        ),
        Node::Int(i) => (*i as f64, i.to_string()),
        other => {
            return Err(format!(
                "expected a share such as 20%, found {}",
                other.show()
            ));
        }
    };
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("'{shown}' is not a share between 0 and 100%"));
    }
    Ok((v, shown))
}

fn strings(node: &Node) -> Result<Vec<String>, String> {
    match node {
        Node::Seq(items) => items
            .iter()
            .map(|n| match n {
                Node::Str(s) if !s.is_empty() => Ok(s.clone()),
                Node::Int(i) => Ok(i.to_string()),
                other => Err(format!(
                    "expected a list of ids, found {} in it",
                    other.kind()
                )),
            })
            .collect(),
        other => Err(format!("expected a list of ids, found {}", other.kind())),
    }
}

#[cfg(test)]
mod tests {
    use super::Policy;
    use std::path::Path;

    #[test]
    fn a_section_with_every_key() {
        let text = "database:\n  backend: sqlite\ndfck:\n  prune:\n    branches: true\n  delete:\n    idle: 90d\n  convert:\n    full_to_delta_over: 64MiB\n  reclaim:\n    free_over: 20%\n    wal_over: 1GiB\n  exempt:\n    users: [u-1]\n  sweep:\n    limit: 10\n    time_budget: 5m\n  lease_ttl: 90s\n";
        let p = Policy::parse(text, Path::new("c.yaml"), true)
            .unwrap()
            .unwrap();
        assert!(p.prune.as_ref().unwrap().branches);
        assert_eq!(p.delete_idle, Some(90 * 86_400));
        assert_eq!(p.convert_over, Some(64 << 20));
        assert_eq!(p.reclaim_free_over, Some(0.2));
        assert_eq!(p.reclaim_wal_over, Some(1 << 30));
        assert_eq!(p.exempt_users, vec!["u-1".to_string()]);
        assert_eq!(p.sweep_limit, Some(10));
        assert_eq!(p.time_budget, Some(300));
        assert_eq!(p.lease_ttl, 90);
        let idle = p.explain().iter().find(|s| s.key == "delete.idle").unwrap();
        assert_eq!(
            (idle.value.as_str(), idle.from.as_str()),
            ("90d", "c.yaml:7")
        );
        let pinned = p
            .explain()
            .iter()
            .find(|s| s.key == "exempt.pinned")
            .unwrap();
        assert_eq!(pinned.from, "default");
    }

    #[test]
    fn errors_name_the_key_and_line() {
        let e = Policy::parse(
            "dfck:\n  prune:\n    brances: true\n",
            Path::new("c.yaml"),
            true,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "c.yaml:3: dfck.prune.brances: unknown key (did you mean branches?)"
        );
        let e = Policy::parse("delete:\n  idle: 90\n", Path::new("p.yaml"), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("p.yaml:2: delete.idle: expected a duration"),
            "{e}"
        );
        assert!(
            Policy::parse("database: {}\n", Path::new("c.yaml"), true)
                .unwrap()
                .is_none()
        );
    }
}
