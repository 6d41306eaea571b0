//! Rendering of `dfck bench summarize` reports ([`dfck_bench::summarize::Report`]): the text
//! table (comfy-table), the JSON document (indented by 2, like DeerFlow's `json.dump(indent=2)`)
//! and CSV (like Python's `csv.DictWriter`: minimal quoting, CRLF line ends).

use super::grid::{Grid, wrap_text};
use crate::error::Error;
use dfck_bench::summarize::{CHANNEL_LEADING, PRODUCTION_LEADING, Report, columns};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// A summary with its kind label (mixed CSV only).
type Tagged<'a> = (Option<&'static str>, &'a Map<String, Value>);

/// What a table prints for a kind without any pair.
pub const NO_PAIRS: &str = "(no comparable full/delta pairs)";

fn cell(v: Option<&Value>) -> String {
    match v {
        None => String::new(),
        Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn one_table(summaries: &[Map<String, Value>], leading: &[&str]) -> String {
    if summaries.is_empty() {
        return format!("{NO_PAIRS}\n");
    }
    let cols = columns(summaries, leading);
    let header: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut t = Grid::new(&header);
    for s in summaries {
        t.row(cols.iter().map(|c| esc(&cell(s.get(c)))).collect());
    }
    t.align_right();
    format!("{t}\n")
}

/// The sides of a pair, in the order the grouped view shows them.
const SIDES: [&str; 3] = ["full", "delta", "ratio"];

/// The metric of a `full_`/`delta_`/`ratio_` field.
fn side_of(k: &str) -> Option<&str> {
    SIDES
        .iter()
        .find_map(|p| k.strip_prefix(p).and_then(|r| r.strip_prefix('_')))
}

/// One group at a time: a heading of the group's fields, then its metrics down and
/// full/delta/ratio across.
fn grouped(summaries: &[Map<String, Value>], leading: &[&str]) -> String {
    if summaries.is_empty() {
        return format!("{NO_PAIRS}\n");
    }
    let mut out = String::new();
    for (i, s) in summaries.iter().enumerate() {
        let mut metrics: Vec<&str> = Vec::new();
        for k in s.keys() {
            if let Some(m) = side_of(k) {
                if !metrics.contains(&m) {
                    metrics.push(m);
                }
            }
        }
        metrics.sort_unstable();
        let heading: Vec<String> = columns(std::slice::from_ref(s), leading)
            .into_iter()
            .filter(|k| side_of(k).is_none())
            .map(|k| format!("{k}={}", cell(s.get(&k))))
            .collect();
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&wrap_text(&esc(&heading.join("  "))));
        out.push('\n');
        let mut t = Grid::new(&["metric", "full", "delta", "ratio"]);
        for m in metrics {
            let mut row = vec![esc(m)];
            row.extend(SIDES.iter().map(|p| esc(&cell(s.get(&format!("{p}_{m}"))))));
            t.row(row);
        }
        t.align_right();
        out.push_str(&format!("{t}\n"));
    }
    out
}

fn esc(s: &str) -> String {
    super::escape::owned(s)
}

/// The report as text: one group at a time ([`grouped`]), or with `wide` one table per kind,
/// a row per group and every metric side by side. A heading line names each kind when both
/// are present.
pub fn summary_text(r: &Report, wide: bool) -> String {
    let one = |s: &[Map<String, Value>], leading: &[&str]| {
        if wide {
            one_table(s, leading)
        } else {
            grouped(s, leading)
        }
    };
    match (&r.channels, &r.production) {
        (Some(c), Some(p)) => {
            let mut out = String::new();
            let _ = writeln!(out, "channel benchmark (bench channels rows):");
            out.push_str(&one(c, CHANNEL_LEADING));
            let _ = writeln!(out, "\nproduction benchmark (bench production rows):");
            out.push_str(&one(p, PRODUCTION_LEADING));
            out
        }
        (None, Some(p)) => one(p, PRODUCTION_LEADING),
        (Some(c), None) => one(c, CHANNEL_LEADING),
        (None, None) => format!("{NO_PAIRS}\n"),
    }
}

/// The report as JSON ([`Report::to_json`]): compact on one line, or indented by 2 (like
/// DeerFlow's `json.dump(indent=2)`) with `pretty`; a trailing newline.
pub fn summary_json(r: &Report, pretty: bool) -> Result<String, Error> {
    let doc = r.to_json();
    let mut s = if pretty {
        serde_json::to_string_pretty(&doc)
    } else {
        serde_json::to_string(&doc)
    }
    .map_err(|e| Error::render(e.to_string()))?;
    s.push('\n');
    Ok(s)
}

/// The report as NDJSON: one summary per line (with a `kind` field when both kinds are
/// present).
pub fn summary_ndjson(r: &Report) -> Result<String, Error> {
    let mut out = String::new();
    let both = r.channels.is_some() && r.production.is_some();
    let kinds = [("channels", &r.channels), ("production", &r.production)];
    for (kind, list) in kinds {
        for s in list.iter().flatten() {
            let mut m = s.clone();
            if both {
                m.insert("kind".into(), Value::from(kind));
            }
            out.push_str(&serde_json::to_string(&m).map_err(|e| Error::render(e.to_string()))?);
            out.push('\n');
        }
    }
    Ok(out)
}

fn csv_field(v: Option<&Value>) -> String {
    let s = match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(true)) => "True".into(),
        Some(Value::Bool(false)) => "False".into(),
        Some(other) => other.to_string(),
    };
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn csv_line(out: &mut String, fields: impl Iterator<Item = String>) {
    out.push_str(&fields.collect::<Vec<_>>().join(","));
    out.push_str("\r\n");
}

/// The report as CSV: header plus one line per summary; nothing when there is no summary. With
/// both kinds, one CSV whose first column `kind` is `channels` or `production`.
pub fn summary_csv(r: &Report) -> String {
    let mut out = String::new();
    let (rows, leading): (Vec<Tagged>, Vec<&str>) = match (&r.channels, &r.production) {
        (Some(c), Some(p)) => {
            let mut lead = vec!["kind"];
            for f in CHANNEL_LEADING.iter().chain(PRODUCTION_LEADING) {
                if !lead.contains(f) && *f != "paired_repetitions" && *f != "failed_rows" {
                    lead.push(f);
                }
            }
            lead.extend(["paired_repetitions", "failed_rows"]);
            let rows = c
                .iter()
                .map(|s| (Some("channels"), s))
                .chain(p.iter().map(|s| (Some("production"), s)))
                .collect();
            (rows, lead)
        }
        (Some(c), None) => (
            c.iter().map(|s| (None, s)).collect(),
            CHANNEL_LEADING.to_vec(),
        ),
        (None, Some(p)) => (
            p.iter().map(|s| (None, s)).collect(),
            PRODUCTION_LEADING.to_vec(),
        ),
        (None, None) => (Vec::new(), Vec::new()),
    };
    if rows.is_empty() {
        return out;
    }
    let headers = super::records::style().headers;
    let maps: Vec<Map<String, Value>> = rows
        .iter()
        .map(|(kind, s)| {
            let mut m = (*s).clone();
            if let Some(k) = kind {
                m.insert("kind".into(), Value::from(*k));
            }
            m
        })
        .collect();
    let cols = columns(&maps, &leading);
    if headers {
        csv_line(
            &mut out,
            cols.iter()
                .map(|c| csv_field(Some(&Value::from(c.as_str())))),
        );
    }
    for m in &maps {
        csv_line(&mut out, cols.iter().map(|c| csv_field(m.get(c))));
    }
    out
}

/// Prints a benchmark worker's row as one compact JSON line on stdout (the controller reads
/// the last non-blank line).
pub fn print_worker_row(row: &Map<String, Value>) {
    use std::io::Write as _;
    let text = serde_json::to_string(row)
        .unwrap_or_else(|e| format!("{{\"success\":false,\"error\":\"cannot encode row: {e}\"}}"));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}
