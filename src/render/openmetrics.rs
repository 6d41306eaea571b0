//! `inspect --format openmetrics`: the store's metrics ([`StoreMetrics`]) as OpenMetrics text
//! for node_exporter's textfile collector, encoded by `prometheus-client` from a registry of
//! gauge families. Every family is a gauge with a HELP line; a name ending in `_bytes`,
//! `_seconds` or `_ratio` carries that unit (`# UNIT`); families with no series are left out;
//! the text ends with `# EOF`. It is also valid Prometheus text (0.0.4): there the `# UNIT`
//! and `# EOF` lines are comments.

use crate::commands::metrics::StoreMetrics;
use dfck_core::store::Backend;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

/// A gauge's value: counts and bytes exactly, ratios and durations as floats.
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(i64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

/// One gauge family, its series in the order given (`prometheus-client`'s own `Family`
/// keeps its series in a hash map, so their order would change from run to run).
#[derive(Debug, Default)]
struct Gauges {
    series: Vec<(Vec<(&'static str, String)>, Value)>,
}

impl Gauges {
    /// One series without labels.
    fn single(v: impl Into<Value>) -> Self {
        Gauges {
            series: vec![(Vec::new(), v.into())],
        }
    }

    /// One series per (label value, value), under the label `label`.
    fn by(label: &'static str, rows: &[(String, u64)]) -> Self {
        Gauges {
            series: rows
                .iter()
                .map(|(l, v)| (vec![(label, l.clone())], Value::from(*v)))
                .collect(),
        }
    }
}

fn encode_value(e: &mut MetricEncoder, v: Value) -> Result<(), std::fmt::Error> {
    match v {
        Value::Int(n) => e.encode_gauge(&n),
        Value::Float(f) => e.encode_gauge(&f),
    }
}

impl EncodeMetric for Gauges {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, v) in &self.series {
            if labels.is_empty() {
                encode_value(&mut encoder, *v)?;
            } else {
                let mut e = encoder.encode_family(labels)?;
                encode_value(&mut e, *v)?;
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }

    fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

/// Registers `gauges` under its full `name`; a name ending in a unit is registered with that
/// unit (the library appends it to the name again).
fn add(registry: &mut Registry, name: &str, help: &str, gauges: Gauges) {
    for (suffix, unit) in [
        ("_bytes", Unit::Bytes),
        ("_seconds", Unit::Seconds),
        ("_ratio", Unit::Other("ratio".into())),
    ] {
        if let Some(stem) = name.strip_suffix(suffix) {
            registry.register_with_unit(stem, help, unit, gauges);
            return;
        }
    }
    registry.register(name, help, gauges);
}

/// The metrics as OpenMetrics text, ending with `# EOF`.
pub fn render(m: &StoreMetrics) -> String {
    let mut r = Registry::default();
    add(
        &mut r,
        "dfck_store_bytes",
        "Bytes of LangGraph's rows per table, as dfck inspect counts them (checkpoints with their metadata, pending-write values, blob values)",
        Gauges::by("table", &m.table_bytes),
    );
    add(
        &mut r,
        "dfck_store_rows",
        "Rows per LangGraph table",
        Gauges::by("table", &m.table_rows),
    );
    let (disk_label, disk_help) = match m.backend {
        Backend::Postgres => (
            "table",
            "Bytes on disk per table: heap, TOAST and indexes (pg_total_relation_size)",
        ),
        _ => (
            "file",
            "Bytes on disk per file of the SQLite store: the database (db) and its WAL (wal)",
        ),
    };
    add(
        &mut r,
        "dfck_store_disk_bytes",
        disk_help,
        Gauges::by(disk_label, &m.disk_bytes),
    );
    add(
        &mut r,
        "dfck_store_free_bytes",
        "Bytes of the SQLite file's free pages, which only VACUUM (dfck reclaim) gives back",
        m.free_bytes.map(Gauges::single).unwrap_or_default(),
    );
    add(
        &mut r,
        "dfck_store_dead_tuples",
        "Dead rows per table that VACUUM has not yet made reusable (pg_stat_user_tables.n_dead_tup, an estimate)",
        Gauges::by("table", &m.dead_tuples),
    );
    add(
        &mut r,
        "dfck_threads",
        "Threads by mode: full, delta, or mixed (full checkpoints followed by delta ones)",
        Gauges::by("mode", &m.threads_by_mode),
    );
    add(
        &mut r,
        "dfck_checkpoints",
        "Checkpoint rows",
        Gauges::single(m.checkpoints),
    );
    add(
        &mut r,
        "dfck_writes",
        "Pending-write rows",
        Gauges::single(m.writes),
    );
    add(
        &mut r,
        "dfck_history_ratio",
        "Share of the store's bytes that no thread head's state needs (history: what pruning could free at most), 0 to 1",
        Gauges::single(Value::Float(m.history_ratio)),
    );
    add(
        &mut r,
        "dfck_thread_bytes",
        "Bytes of the ten largest threads",
        Gauges::by("thread_id", &m.largest_threads),
    );
    maintenance(&mut r, m);
    let mut out = String::new();
    // Writing into a String cannot fail; the library reports only its writer's errors.
    let _ = prometheus_client::encoding::text::encode(&mut out, &r);
    out
}

/// The families of `dfck maintain`'s last run and its lease.
fn maintenance(r: &mut Registry, m: &StoreMetrics) {
    if let Some(run) = &m.last_run {
        let mut findings: Vec<_> = run.findings.iter().flatten().collect();
        findings.sort_by(|a, b| (&a.code, &a.severity).cmp(&(&b.code, &b.severity)));
        add(
            r,
            "dfck_findings",
            "Findings of the last dfck maintain run's verify pass, by code and severity",
            Gauges {
                series: findings
                    .iter()
                    .map(|f| {
                        (
                            vec![("code", f.code.clone()), ("severity", f.severity.clone())],
                            Value::from(f.count),
                        )
                    })
                    .collect(),
            },
        );
        add(
            r,
            "dfck_maintain_last_run_timestamp_seconds",
            "When the last dfck maintain run started (Unix time)",
            Gauges::single(Value::Int(run.started_at)),
        );
        add(
            r,
            "dfck_maintain_last_run_duration_seconds",
            "How long the last dfck maintain run took",
            Gauges::single(Value::Float(run.seconds)),
        );
        let threads = [
            ("examined", run.threads_examined),
            ("deleted", run.threads_deleted),
            ("pruned", run.threads_pruned),
            ("converted", run.threads_converted),
            ("refused", run.threads_refused),
        ]
        .map(|(a, n)| (a.to_owned(), n));
        add(
            r,
            "dfck_maintain_last_run_threads",
            "Threads the last dfck maintain run examined, deleted whole, pruned, converted to delta mode or refused",
            Gauges::by("action", &threads),
        );
        add(
            r,
            "dfck_maintain_last_run_checkpoints_deleted",
            "Checkpoints the last dfck maintain run deleted, whole threads included",
            Gauges::single(run.checkpoints_deleted),
        );
        add(
            r,
            "dfck_maintain_last_run_reclaimed_bytes",
            "Bytes the last dfck maintain run's reclaim gave back",
            Gauges::single(run.reclaimed_bytes),
        );
        add(
            r,
            "dfck_maintain_last_run_step_seconds",
            "How long each step of the last dfck maintain run took",
            Gauges {
                series: run
                    .steps
                    .iter()
                    .map(|s| (vec![("step", s.step.clone())], Value::Float(s.seconds)))
                    .collect(),
            },
        );
    }
    add(
        r,
        "dfck_maintain_lease_held",
        "1 while a dfck maintain run holds the store's sweeper lease (unexpired), else 0",
        Gauges::single(u64::from(m.lease_held)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use dfck_core::maintenance::{FindingCount, LastRun, StepTime};

    fn sample(backend: Backend) -> StoreMetrics {
        let rows = |v: &[(&str, u64)]| {
            v.iter()
                .map(|(l, n)| ((*l).to_owned(), *n))
                .collect::<Vec<_>>()
        };
        StoreMetrics {
            backend,
            table_bytes: rows(&[("checkpoints", 10), ("writes", 5)]),
            table_rows: rows(&[("checkpoints", 2), ("writes", 3)]),
            disk_bytes: rows(&[("db", 4096), ("wal", 0)]),
            free_bytes: Some(0),
            dead_tuples: Vec::new(),
            threads_by_mode: rows(&[("full", 1), ("delta", 0), ("mixed", 0)]),
            checkpoints: 2,
            writes: 3,
            history_ratio: 0.25,
            largest_threads: rows(&[("t \"1\"\n", 15)]),
            lease_held: false,
            last_run: None,
        }
    }

    #[test]
    fn every_family_has_help_and_the_text_ends_with_eof() {
        let text = render(&sample(Backend::Sqlite));
        assert!(text.ends_with("# EOF\n"), "{text}");
        for name in [
            "dfck_store_bytes",
            "dfck_store_rows",
            "dfck_store_disk_bytes",
            "dfck_store_free_bytes",
            "dfck_threads",
            "dfck_checkpoints",
            "dfck_writes",
            "dfck_history_ratio",
            "dfck_thread_bytes",
            "dfck_maintain_lease_held",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
            assert!(text.contains(&format!("# TYPE {name} gauge\n")), "{name}");
        }
        // No series, no family; label values escaped by the library.
        assert!(!text.contains("dfck_store_dead_tuples"), "{text}");
        assert!(!text.contains("dfck_maintain_last_run"), "{text}");
        assert!(
            text.contains("dfck_thread_bytes{thread_id=\"t \\\"1\\\"\\n\"} 15\n"),
            "{text}"
        );
        assert!(text.contains("dfck_history_ratio 0.25\n"), "{text}");
    }

    #[test]
    fn the_last_run_gives_its_families() {
        let mut m = sample(Backend::Postgres);
        m.lease_held = true;
        m.last_run = Some(LastRun {
            started_at: 1_800_000_000,
            seconds: 12.5,
            ended: "complete".into(),
            threads_examined: 7,
            threads_refused: 1,
            checkpoints_deleted: 40,
            reclaimed_bytes: 8192,
            steps: vec![StepTime {
                step: "prune".into(),
                seconds: 2.0,
            }],
            findings: Some(vec![FindingCount {
                code: "lineage.missing_parent".into(),
                severity: "error".into(),
                count: 2,
            }]),
            ..LastRun::default()
        });
        let text = render(&m);
        for line in [
            "dfck_findings{code=\"lineage.missing_parent\",severity=\"error\"} 2\n",
            "dfck_maintain_last_run_timestamp_seconds 1800000000\n",
            "dfck_maintain_last_run_duration_seconds 12.5\n",
            "dfck_maintain_last_run_threads{action=\"examined\"} 7\n",
            "dfck_maintain_last_run_threads{action=\"refused\"} 1\n",
            "dfck_maintain_last_run_checkpoints_deleted 40\n",
            "dfck_maintain_last_run_reclaimed_bytes 8192\n",
            "dfck_maintain_last_run_step_seconds{step=\"prune\"} 2.0\n",
            "dfck_maintain_lease_held 1\n",
            "dfck_store_disk_bytes{table=\"db\"} 4096\n",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
    }
}
