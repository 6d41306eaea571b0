//! The shape rules the project holds itself to, checked on the source tree of every crate
//! (`src/` of dfck, `crates/dfck-core/src/`, `crates/dfck-bench/src/`): the libraries never
//! print (only `src/render/` and `src/main.rs` do), no source file is over 700 lines, within
//! each crate the module import graph has no cycle (file level) and no import runs back up
//! between top-level modules (nor between the commands), and no comment cites a document that
//! is not in the repository. That no crate imports a layer above it (the core neither the
//! harness nor the command layer) is the compiler's to check: see the crates' manifests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source directories of the workspace's crates.
const CRATES: [&str; 3] = ["src", "crates/dfck-core/src", "crates/dfck-bench/src"];

/// Every source file of one crate (`src` relative to the repository), as (path relative to
/// the crate's `src`, text).
fn crate_files(src: &str) -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(&root().join(src), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(root().join(src))
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (format!("src/{rel}"), std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// Every source file of the workspace, as (path relative to the repository, text).
fn src_files() -> Vec<(String, String)> {
    CRATES
        .iter()
        .flat_map(|c| {
            crate_files(c)
                .into_iter()
                .map(move |(p, t)| (format!("{}{}", c.trim_end_matches("src"), p), t))
        })
        .collect()
}

#[test]
fn only_render_and_main_print() {
    let printers: Vec<String> = src_files()
        .into_iter()
        .filter(|(p, _)| !p.starts_with("src/render/") && p != "src/main.rs")
        .filter(|(_, text)| {
            ["print!(", "println!(", "eprint!(", "eprintln!("]
                .iter()
                .any(|m| {
                    text.lines()
                        .any(|l| l.contains(m) && !l.trim_start().starts_with("//"))
                })
        })
        .map(|(p, _)| p)
        .collect();
    assert!(
        printers.is_empty(),
        "library files that print: {printers:?}"
    );
}

#[test]
fn no_source_file_is_over_700_lines() {
    let mut files = Vec::new();
    for c in CRATES {
        rust_files(&root().join(c), &mut files);
    }
    rust_files(&root().join("tests"), &mut files);
    let big: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > 700).then(|| format!("{} ({n})", p.display()))
        })
        .collect();
    assert!(big.is_empty(), "files over 700 lines: {big:?}");
}

#[test]
fn comments_cite_only_the_repository() {
    let mut files = Vec::new();
    for c in CRATES {
        rust_files(&root().join(c), &mut files);
    }
    rust_files(&root().join("tests"), &mut files);
    let needles = [
        "\u{a7}".to_owned(),
        ["bench-harness", ".md"].concat(),
        ["deerflow-semantics", ".md"].concat(),
        ["langgraph-storage", ".md"].concat(),
        ["cli-contract", ".md"].concat(),
    ];
    let bad: Vec<String> = files
        .iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            needles.iter().any(|n| text.contains(n.as_str()))
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        bad.is_empty(),
        "files citing documents outside the repository: {bad:?}"
    );
}

/// The module path of a source file: `src/a/b.rs` and `src/a/b/mod.rs` → `a::b`.
fn module_of(path: &str) -> String {
    let p = path.trim_start_matches("src/").trim_end_matches(".rs");
    let p = p.trim_end_matches("/mod");
    if p == "lib" || p == "main" {
        return String::new();
    }
    p.replace('/', "::")
}

/// Edges of one crate's module graph: a file's module → the most specific module it names in
/// a `crate::…` or `super::…` path (test code left out).
fn module_edges(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().map(|(p, _)| module_of(p)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let me = module_of(path);
        // `super` names the parent of this file's module.
        let parent = me
            .rsplit_once("::")
            .map(|x| x.0.to_owned())
            .unwrap_or_default();
        let text: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for (prefix, base) in [("crate::", String::new()), ("super::", parent.clone())] {
            for (i, _) in text.match_indices(prefix) {
                if prefix == "crate::" && i >= 1 && text[..i].ends_with('$') {
                    continue;
                }
                let rest: String = text[i + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut target = base.clone();
                let mut best = None;
                for seg in rest.split("::").filter(|s| !s.is_empty()) {
                    target = if target.is_empty() {
                        seg.to_owned()
                    } else {
                        format!("{target}::{seg}")
                    };
                    if modules.contains(&target) {
                        best = Some(target.clone());
                    }
                }
                if let Some(t) = best.filter(|t| *t != me && !me.starts_with(&format!("{t}::"))) {
                    edges.entry(me.clone()).or_default().insert(t);
                }
            }
        }
    }
    edges
}

/// A cycle in `edges`, if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let at = path.iter().position(|x| x == n).unwrap_or(0);
                let mut cycle = path[at..].to_vec();
                cycle.push(n.to_owned());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(n.to_owned(), 1);
        path.push(n.to_owned());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in edges.keys() {
        let mut path = Vec::new();
        if let Some(cycle) = visit(m, edges, &mut state, &mut path) {
            return Some(cycle);
        }
    }
    None
}

/// `edges` between modules cut to their first `depth` segments under `within` (`""`: the
/// crate root), edges inside one such module left out.
fn collapsed(
    edges: &BTreeMap<String, BTreeSet<String>>,
    within: &str,
) -> BTreeMap<String, BTreeSet<String>> {
    let head = |m: &str| -> Option<String> {
        let rest = if within.is_empty() {
            m
        } else {
            m.strip_prefix(within)?.strip_prefix("::")?
        };
        let first = rest.split("::").next().filter(|s| !s.is_empty())?;
        Some(first.to_owned())
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in edges {
        for to in tos {
            if let (Some(a), Some(b)) = (head(from), head(to)) {
                if a != b {
                    out.entry(a).or_default().insert(b);
                }
            }
        }
    }
    out
}

#[test]
fn the_module_import_graph_has_no_cycles() {
    let mut read = 0;
    for c in CRATES {
        let edges = module_edges(&crate_files(c));
        read += edges.len();
        if let Some(cycle) = find_cycle(&edges) {
            panic!("import cycle in {c}: {}", cycle.join(" -> "));
        }
    }
    assert!(
        read > 20,
        "the graph was read ({read} modules with imports)"
    );
}

/// Layers: top-level modules of each crate (and the commands of the command layer) import
/// only downwards: their graph has no cycle, so no import runs back up.
#[test]
fn no_import_runs_back_up_between_top_level_modules() {
    for (c, within) in [
        ("src", ""),
        ("src", "commands"),
        ("crates/dfck-core/src", ""),
        ("crates/dfck-bench/src", ""),
    ] {
        let top = collapsed(&module_edges(&crate_files(c)), within);
        if let Some(cycle) = find_cycle(&top) {
            panic!(
                "an import runs back up in {c} {within}: {}",
                cycle.join(" -> ")
            );
        }
    }
}
