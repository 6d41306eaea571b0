//! dfck describes itself: examples in every `--help`, only the options a command uses,
//! completions that load in bash, man pages, `--version`, and `dfck explain` for every code.

use crate::common::assert_clean_failure;
use std::process::{Command, Output};

fn dfck(args: &[&str]) -> Output {
    crate::common::dfck_command()
        .args(args)
        .env_remove("DFCK_DB")
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "dfck failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Every command path (`["bench", "channels"]`), from clap's own definition.
fn command_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut p = path.clone();
            p.push(sub.get_name().to_owned());
            walk(sub, p.clone(), out);
            out.push(p);
        }
    }
    let mut out = vec![Vec::new()];
    walk(&dfck::cli::help::command(), Vec::new(), &mut out);
    out
}

#[test]
fn every_command_help_has_examples() {
    let paths = command_paths();
    assert!(paths.len() >= 12, "{paths:?}");
    for path in paths {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let text = stdout(&dfck(&args));
        let examples = text
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("no Examples in `dfck {}`", path.join(" ")));
        assert!(
            examples.lines().any(|l| l.trim_start().starts_with("dfck")),
            "{path:?}"
        );
    }
}

#[test]
fn help_lists_only_the_options_a_command_uses() {
    let summarize = stdout(&dfck(&["bench", "summarize", "--help"]));
    assert!(summarize.contains("--format"), "{summarize}");
    for unused in ["--db", "--config", "--pg-schema", "--env-file"] {
        assert!(!summarize.contains(unused), "{unused} in {summarize}");
    }
    let channels = stdout(&dfck(&["bench", "channels", "--help"]));
    assert!(channels.contains("--db") && !channels.contains("--pg-schema"));
    let completions = stdout(&dfck(&["completions", "--help"]));
    assert!(!completions.contains("--db") && !completions.contains("--format"));
    let inspect = stdout(&dfck(&["inspect", "--help"]));
    for used in ["--db", "--config", "--pg-schema", "--format"] {
        assert!(inspect.contains(used), "{used}");
    }
    // Given where it does nothing: a usage error, not silence.
    assert_clean_failure(
        &dfck(&["bench", "summarize", "--db", "x.db", "rows.jsonl"]),
        "--db is not used by `dfck bench summarize`",
    );
    // Two ways to name the store at once.
    assert_clean_failure(
        &dfck(&["--db", "x.db", "--config", "c.yaml", "inspect"]),
        "--config and --db both name the store",
    );
}

#[test]
fn errors_name_where_the_store_came_from() {
    let out = crate::common::dfck_command()
        .arg("inspect")
        .env("DFCK_DB", "/nonexistent/ux-garbage.db")
        .output()
        .unwrap();
    assert_clean_failure(&out, "/nonexistent/ux-garbage.db (from DFCK_DB)");
    assert_clean_failure(
        &dfck(&["inspect", "--db", "/nonexistent/ux-garbage.db"]),
        "(from --db)",
    );
    // An explicit --config beats DFCK_DB: the config is what is read.
    let out = crate::common::dfck_command()
        .args(["--config", "/nonexistent/ux-config.yaml", "inspect"])
        .env("DFCK_DB", "/nonexistent/ux-garbage.db")
        .output()
        .unwrap();
    assert_clean_failure(&out, "ux-config.yaml (from --config)");
    // A bad config value names the file and its line.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, "models: []\ndatabase:\n  backend: bogus\n").unwrap();
    let out = dfck(&["--config", cfg.to_str().unwrap(), "inspect"]);
    assert_clean_failure(&out, "config.yaml:3: database.backend");
}

#[test]
fn bash_completion_loads_and_completes_subcommands() {
    let script = stdout(&dfck(&["completions", "bash"]));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dfck.bash");
    std::fs::write(&file, script).unwrap();
    let complete = |words: &str| {
        let n = words.split(' ').count() - 1;
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}' && COMP_WORDS=({words}) && COMP_CWORD={n} && COMP_LINE='{words}' && COMP_POINT=${{#COMP_LINE}} && _dfck dfck \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\" && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                file.display()
            ))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let top = complete("dfck in");
    assert!(top.lines().any(|l| l == "inspect"), "{top}");
    let all = complete("dfck ''");
    for cmd in [
        "inspect", "verify", "lineage", "migrate", "bench", "explain",
    ] {
        assert!(all.lines().any(|l| l == cmd), "{cmd} in {all}");
    }
    let bench = complete("dfck bench su");
    assert!(bench.lines().any(|l| l == "summarize"), "{bench}");
    // The other shells get a script naming the commands too.
    for shell in ["zsh", "fish", "powershell"] {
        let s = stdout(&dfck(&["completions", shell]));
        assert!(s.contains("inspect") && s.contains("verify"), "{shell}");
    }
}

#[test]
fn man_pages_and_version() {
    let page = stdout(&dfck(&["manpage"]));
    assert!(
        page.starts_with(".ie") || page.contains(".TH dfck 1"),
        "{page}"
    );
    assert!(page.contains(".SH NAME") && page.contains("inspect"));
    let dir = tempfile::tempdir().unwrap();
    let out = dfck(&["manpage", "--dir", dir.path().to_str().unwrap()]);
    stdout(&out);
    for name in [
        "dfck.1",
        "dfck-inspect.1",
        "dfck-bench-channels.1",
        "dfck-explain.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(text.contains(".SH"), "{name}");
    }
    assert!(!dir.path().join("dfck-help.1").exists());
    let v = stdout(&dfck(&["--version"]));
    assert!(v.starts_with("dfck 0.1.0 (git "), "{v}");
    assert!(v.contains("checkpoint_migrations v0-v9"), "{v}");
    assert!(v.contains("LangGraph 1.2"), "{v}");
}

#[test]
fn explain_every_code() {
    let list = stdout(&dfck(&["explain"]));
    for &code in dfck_core::finding::FindingCode::ALL {
        assert!(
            list.lines().any(|l| l.starts_with(code.as_str())),
            "{code} missing from the list"
        );
        let j: serde_json::Value = serde_json::from_str(&stdout(&dfck(&[
            "explain",
            code.as_str(),
            "--format",
            "json",
        ])))
        .unwrap();
        assert_eq!(j["code"], code.as_str());
        assert_eq!(j["severity"], code.severity().as_str());
        assert!(j["text"].as_str().unwrap().contains("**What to do:**"));
    }
    insta::assert_snapshot!(
        "explain_fork_contaminated",
        stdout(&dfck(&["explain", "delta.fork_contaminated"]))
    );
    assert_clean_failure(
        &dfck(&["explain", "lineage.cylce"]),
        "did you mean lineage.cycle",
    );
}
