//! `dfck inspect --format openmetrics`, run as the real binary on the committed SQLite
//! fixtures and on the PostgreSQL test server: every number equals what `inspect --format
//! json` says of the same store; the record of `dfck maintain`'s last run and its lease
//! (written through the store's own lease functions) come out as their families; reading the
//! metrics creates nothing; every other command and view refuses the format (exit 2, one
//! line naming it and the command); `metrics::write_file` never writes over a file of the
//! store. One small fixture's output is an insta snapshot.

use crate::common::{dfck, dfck_json, temp_copy, with_db};
use dfck_core::maintenance::{Acquired, FindingCount, Holder, LastRun, StepTime};
use dfck_core::store::maintenance::MaintenanceTable;
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// One series: name and labels (sorted) → value.
type Series = BTreeMap<(String, Vec<(String, String)>), f64>;

/// The samples of an OpenMetrics text, after checking its frame: every family a gauge with a
/// HELP line, `# EOF` last.
fn parse(text: &str) -> Series {
    assert!(text.ends_with("# EOF\n"), "{text}");
    let mut helped = Vec::new();
    let mut out = Series::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.push(rest.split(' ').next().unwrap().to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(kind, "gauge", "{line}");
            assert_eq!(helped.last().map(String::as_str), Some(name), "{line}");
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, labels_of(l.strip_suffix('}').unwrap())),
            None => (series, Vec::new()),
        };
        assert!(helped.iter().any(|h| h == name), "no HELP for {name}");
        let prev = out.insert((name.to_owned(), labels), value.parse().unwrap());
        assert!(prev.is_none(), "duplicate series {line}");
    }
    out
}

/// `a="x",b="y\"z"` → sorted pairs, escapes undone.
fn labels_of(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert_eq!(chars.next(), Some('"'));
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => panic!("dangling escape in {s}"),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        if chars.peek() == Some(&',') {
            chars.next();
        }
        out.push((key, value));
    }
    out.sort();
    out
}

fn get(m: &Series, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut l: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    l.sort();
    m.get(&(name.to_owned(), l)).copied()
}

fn family(m: &Series, name: &str) -> Vec<(Vec<(String, String)>, f64)> {
    m.iter()
        .filter(|((n, _), _)| n == name)
        .map(|((_, l), v)| (l.clone(), *v))
        .collect()
}

fn num(j: &Json) -> f64 {
    j.as_u64().unwrap_or_else(|| panic!("not a count: {j}")) as f64
}

/// The metrics of `target` next to its JSON summary: every family the summary feeds.
fn metrics_and_json(target: &str) -> (Series, Json) {
    let out = dfck(target, &["inspect", "--format", "openmetrics"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        parse(&text),
        dfck_json(target, &["inspect", "--format", "json"]),
    )
}

/// Every number that comes from the summary equals its JSON.
fn assert_matches_json(m: &Series, j: &Json) {
    let pg = j["backend"] == "postgres";
    let tb = &j["table_bytes"];
    let (writes_table, tables): (&str, Vec<(&str, &Json, &Json)>) = if pg {
        (
            "checkpoint_writes",
            vec![
                (
                    "checkpoints",
                    &tb["checkpoints"],
                    &j["counts"]["checkpoints"],
                ),
                ("checkpoint_blobs", &tb["blobs"], &j["counts"]["blobs"]),
                ("checkpoint_writes", &tb["writes"], &j["counts"]["writes"]),
            ],
        )
    } else {
        (
            "writes",
            vec![
                (
                    "checkpoints",
                    &tb["checkpoints"],
                    &j["counts"]["checkpoints"],
                ),
                ("writes", &tb["writes"], &j["counts"]["writes"]),
            ],
        )
    };
    assert_eq!(family(m, "dfck_store_bytes").len(), tables.len());
    let mut sum = 0.0;
    for (t, bytes, rows) in &tables {
        assert_eq!(
            get(m, "dfck_store_bytes", &[("table", t)]),
            Some(num(bytes))
        );
        assert_eq!(get(m, "dfck_store_rows", &[("table", t)]), Some(num(rows)));
        sum += num(bytes);
    }
    assert_eq!(
        sum,
        num(&j["bytes"]),
        "the tables' bytes add up to the store's"
    );
    assert!(get(m, "dfck_store_rows", &[("table", writes_table)]).is_some());
    let space = &j["space"];
    if pg {
        let tables = space["tables"].as_array().unwrap();
        assert_eq!(family(m, "dfck_store_disk_bytes").len(), tables.len());
        for t in tables {
            let name = t["table"].as_str().unwrap();
            let disk = get(m, "dfck_store_disk_bytes", &[("table", name)]);
            assert_eq!(disk, Some(num(&t["total_bytes"])), "{name}");
            let dead = get(m, "dfck_store_dead_tuples", &[("table", name)]);
            assert_eq!(dead, Some(num(&t["dead_tuples"])), "{name}");
        }
        assert_eq!(get(m, "dfck_store_free_bytes", &[]), None);
    } else {
        let disk = |f| get(m, "dfck_store_disk_bytes", &[("file", f)]);
        assert_eq!(disk("db"), Some(num(&space["file_bytes"])));
        assert_eq!(disk("wal"), Some(num(&space["wal_bytes"])));
        assert_eq!(family(m, "dfck_store_disk_bytes").len(), 2);
        let free = get(m, "dfck_store_free_bytes", &[]);
        assert_eq!(free, Some(num(&space["free_page_bytes"])));
        assert!(family(m, "dfck_store_dead_tuples").is_empty());
    }
    let threads = j["threads"].as_array().unwrap();
    for mode in ["full", "delta", "mixed"] {
        let n = threads.iter().filter(|t| t["mode"] == mode).count() as f64;
        assert_eq!(get(m, "dfck_threads", &[("mode", mode)]), Some(n), "{mode}");
    }
    assert_eq!(
        get(m, "dfck_checkpoints", &[]),
        Some(num(&j["counts"]["checkpoints"]))
    );
    assert_eq!(
        get(m, "dfck_writes", &[]),
        Some(num(&j["counts"]["writes"]))
    );
    let history: f64 = threads.iter().map(|t| num(&t["history_bytes"])).sum();
    let bytes = num(&j["bytes"]);
    let ratio = if bytes == 0.0 { 0.0 } else { history / bytes };
    let got = get(m, "dfck_history_ratio", &[]).unwrap();
    assert!((got - ratio).abs() < 1e-12, "{got} vs {ratio}");
    assert!((0.0..=1.0).contains(&got));
    let mut largest: Vec<(String, f64)> = threads
        .iter()
        .map(|t| {
            (
                t["thread_id"].as_str().unwrap().to_owned(),
                num(&t["bytes"]),
            )
        })
        .collect();
    largest.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    largest.truncate(10);
    let shown = family(m, "dfck_thread_bytes");
    assert_eq!(shown.len(), largest.len());
    for (id, b) in &largest {
        let got = get(m, "dfck_thread_bytes", &[("thread_id", id)]);
        assert_eq!(got, Some(*b), "{id}");
    }
}

/// Without a maintenance table: the lease is free, no run and no findings.
fn assert_never_maintained(m: &Series) {
    assert_eq!(get(m, "dfck_maintain_lease_held", &[]), Some(0.0));
    assert!(
        !m.keys()
            .any(|(n, _)| n.starts_with("dfck_maintain_last_run") || n == "dfck_findings"),
        "{m:?}"
    );
}

#[test]
fn sqlite_metrics_equal_the_json_summary() {
    for stem in [
        "full",
        "delta_k3",
        "mixed",
        "subgraph",
        "deerflow_app",
        "long_threads",
    ] {
        let (dir, db) = temp_copy(&crate::common::sqlite_fixture(stem));
        let target = db.to_str().unwrap();
        let before = std::fs::read(&db).unwrap();
        let (m, j) = metrics_and_json(target);
        assert_matches_json(&m, &j);
        assert_never_maintained(&m);
        // Read-only: the store is unchanged and holds no maintenance table.
        assert_eq!(std::fs::read(&db).unwrap(), before, "{stem} changed");
        let conn = rusqlite::Connection::open(&db).unwrap();
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'dfck_maintenance'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0, "{stem}: reading the metrics created the table");
        drop(dir);
    }
}

#[test]
fn postgres_metrics_equal_the_json_summary() {
    let Some(uri) = crate::common::require_postgres("openmetrics on PostgreSQL") else {
        return;
    };
    for stem in ["full", "delta_k3", "mixed", "subgraph", "deerflow_app"] {
        let target = with_db(&uri, &format!("dfck_{stem}"));
        let (m, j) = metrics_and_json(&target);
        assert_matches_json(&m, &j);
        assert_never_maintained(&m);
        let rt = crate::common::pg::runtime();
        let client = crate::common::pg::connect(&rt, &target);
        let row = rt
            .block_on(client.query_one("SELECT to_regclass('dfck_maintenance') IS NULL", &[]))
            .unwrap();
        assert!(row.get::<_, bool>(0), "{stem}: reading created the table");
    }
}

/// A finished run as `dfck maintain` records it.
fn sample_run() -> LastRun {
    LastRun {
        started_at: 1_790_000_000,
        seconds: 42.5,
        ended: "complete".into(),
        threads_examined: 8,
        threads_deleted: 1,
        threads_pruned: 3,
        checkpoints_deleted: 17,
        threads_converted: 2,
        threads_refused: 1,
        reclaimed_bytes: 65536,
        steps: vec![
            StepTime {
                step: "prune".into(),
                seconds: 1.25,
            },
            StepTime {
                step: "reclaim".into(),
                seconds: 0.5,
            },
        ],
        findings: Some(vec![
            FindingCount {
                code: "lineage.missing_parent".into(),
                severity: "error".into(),
                count: 2,
            },
            FindingCount {
                code: "message.missing_id".into(),
                severity: "warning".into(),
                count: 5,
            },
        ]),
    }
}

fn holder() -> Holder {
    Holder {
        host: "test-host".into(),
        pid: 4242,
        version: "0.1.0".into(),
        expires_at: 0,
    }
}

/// Takes the lease (metrics say it is held), then releases it with a run's record (metrics
/// show the run); the summary's numbers still equal the JSON.
fn check_maintained(store: &dyn MaintenanceTable, target: &str) {
    let got = store.acquire_lease(&holder(), "token-1", 600).unwrap();
    assert!(matches!(got, Acquired::Granted { .. }), "{got:?}");
    let (m, j) = metrics_and_json(target);
    assert_matches_json(&m, &j);
    assert_eq!(get(&m, "dfck_maintain_lease_held", &[]), Some(1.0));
    store
        .release_lease("token-1", Some("t-x"), Some(&sample_run()))
        .unwrap();
    let (m, j) = metrics_and_json(target);
    assert_matches_json(&m, &j);
    let run = sample_run();
    assert_eq!(get(&m, "dfck_maintain_lease_held", &[]), Some(0.0));
    let one = |name: &str| get(&m, name, &[]);
    assert_eq!(
        one("dfck_maintain_last_run_timestamp_seconds"),
        Some(run.started_at as f64)
    );
    assert_eq!(one("dfck_maintain_last_run_duration_seconds"), Some(42.5));
    assert_eq!(
        one("dfck_maintain_last_run_checkpoints_deleted"),
        Some(17.0)
    );
    assert_eq!(one("dfck_maintain_last_run_reclaimed_bytes"), Some(65536.0));
    for (action, n) in [
        ("examined", 8.0),
        ("deleted", 1.0),
        ("pruned", 3.0),
        ("converted", 2.0),
        ("refused", 1.0),
    ] {
        let got = get(&m, "dfck_maintain_last_run_threads", &[("action", action)]);
        assert_eq!(got, Some(n), "{action}");
    }
    let step = |s| get(&m, "dfck_maintain_last_run_step_seconds", &[("step", s)]);
    assert_eq!(step("prune"), Some(1.25));
    assert_eq!(step("reclaim"), Some(0.5));
    let finding = |c, s| get(&m, "dfck_findings", &[("code", c), ("severity", s)]);
    assert_eq!(finding("lineage.missing_parent", "error"), Some(2.0));
    assert_eq!(finding("message.missing_id", "warning"), Some(5.0));
    assert_eq!(family(&m, "dfck_findings").len(), 2);
}

#[test]
fn sqlite_last_maintain_run_and_lease() {
    let (_dir, db) = temp_copy(&crate::common::sqlite_fixture("full"));
    let store = dfck_core::store::sqlite::SqliteStore::open_read_write(&db).unwrap();
    check_maintained(&store, db.to_str().unwrap());
}

#[test]
fn postgres_last_maintain_run_and_lease() {
    let Some(uri) = crate::common::require_postgres("openmetrics maintenance on PostgreSQL") else {
        return;
    };
    let target = crate::common::pg::clone_db(&uri, "dfck_full", "dfck_openmetrics_maint");
    {
        let store =
            dfck_core::store::postgres::PostgresStore::open_read_write(&target, None).unwrap();
        check_maintained(&store, &target);
    }
    let rt = crate::common::pg::runtime();
    let admin = crate::common::pg::connect(&rt, &uri);
    rt.block_on(
        admin.batch_execute("DROP DATABASE IF EXISTS \"dfck_openmetrics_maint\" WITH (FORCE)"),
    )
    .unwrap();
}

#[test]
fn every_other_command_and_view_refuses_openmetrics() {
    let (dir, db) = temp_copy(&crate::common::sqlite_fixture("forks_full"));
    let db = db.to_str().unwrap();
    let jsonl = crate::common::root().join("fixtures/bench/deerflow-v1-channels.jsonl");
    let jsonl = jsonl.to_str().unwrap();
    let copy = dir.path().join("copy.db");
    let copy = copy.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["inspect", "f-copy"], "dfck inspect THREAD"),
        (vec!["inspect", "f-copy", "--state"], "dfck inspect THREAD"),
        (vec!["verify"], "dfck verify"),
        (vec!["audit"], "dfck audit"),
        (vec!["lineage", "f-copy"], "dfck lineage"),
        (
            vec!["migrate", "delta-to-full", "--all"],
            "dfck migrate delta-to-full",
        ),
        (
            vec!["migrate", "full-to-delta", "--all"],
            "dfck migrate full-to-delta",
        ),
        (vec!["prune", "--all"], "dfck prune"),
        (vec!["delete", "f-copy"], "dfck delete"),
        (vec!["reclaim"], "dfck reclaim"),
        (vec!["copy", "--to", copy, "--all"], "dfck copy"),
        (vec!["diff", "f-copy", "a", "b"], "dfck diff"),
        (vec!["explain"], "dfck explain"),
        (vec!["bench", "summarize", jsonl], "dfck bench summarize"),
        (vec!["bench", "channels"], "dfck bench channels"),
        (vec!["completions", "bash"], "dfck completions"),
        (vec!["inspect", "--top", "2"], "--top"),
        (vec!["inspect", "--channels"], "--channels"),
        (vec!["inspect", "--savings"], "--savings"),
    ];
    for (args, named) in cases {
        let out = dfck(db, &[&args[..], &["--format", "openmetrics"]].concat());
        let err = crate::common::assert_clean_failure(&out, "--format openmetrics");
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(!std::path::Path::new(copy).exists());
}

#[test]
fn write_file_refuses_the_store_and_its_sidecars() {
    use dfck::commands::metrics::{MetricsFileError, write_file};
    let (dir, db) = temp_copy(&crate::common::sqlite_fixture("exit"));
    let before = std::fs::read(&db).unwrap();
    for name in ["exit.db", "exit.db-wal", "exit.db-shm", "exit.db-journal"] {
        let p = dir.path().join(name);
        let e = write_file(&p, "# EOF\n", Some(&db)).unwrap_err();
        assert!(matches!(e, MetricsFileError::StoreFile { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert_eq!(msg.lines().count(), 1);
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
    let prom = dir.path().join("dfck.prom");
    write_file(&prom, "# EOF\n", Some(&db)).unwrap();
    assert_eq!(std::fs::read_to_string(&prom).unwrap(), "# EOF\n");
}

#[test]
fn snapshot_of_a_small_store() {
    let (dir, _) = temp_copy(&crate::common::sqlite_fixture("exit"));
    let out = crate::common::dfck_command()
        .current_dir(dir.path())
        .args(["--db", "exit.db", "inspect", "--format", "openmetrics"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("openmetrics_exit", String::from_utf8(out.stdout).unwrap());
}
