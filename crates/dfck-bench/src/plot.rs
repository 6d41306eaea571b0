//! `dfck bench summarize --plot`: line charts of benchmark rows, written as a self-contained SVG.
//!
//! This module owns the figure model ([`Figure`], [`Panel`], [`Series`]), building figures from
//! summarize rows ([`figure`]), and a small dependency-free SVG writer ([`to_svg`]) with axes,
//! ticks, log scales and a legend. The SVG names a generic `sans-serif` font and embeds nothing,
//! so writing it needs no system fonts (a viewer substitutes whatever it has).
//!
//! Figures:
//! * channel rows: storage bytes (`durable_db_bytes` when the series has it, else
//!   `logical_checkpoint_bytes`) and `write_total_ms` against `update_count`;
//! * production rows: `durable_db_bytes` (else `db_bytes`, for v1 rows), `state_cold_ms` and warm read (`state_warm_p50_ms`, else the
//!   largest-limit `history_limit_{L}_warm_p50_ms`) against `turns`.
//!
//! One series per (engine, backend, payload when several, mode, cadence). The colour says the
//! mode and cadence (full is drawn thicker), the stroke pattern says the engine/backend/payload;
//! a point is the median of the successful, non-profiled rows at that x. An axis is logarithmic
//! when its values are positive and span a wide range (x: 10×, bytes: 10×, times: 100×).

use crate::stats::median;
use crate::summarize::Row;
use dfck_core::model::ChannelMode;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Reads one y value from a row.
type Metric = Box<dyn Fn(&Row) -> Option<f64>>;
/// Chooses the y metric of a series from its rows.
type Chooser<'a> = &'a dyn Fn(&[&Row]) -> Metric;

/// A whole picture: panels stacked vertically.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Heading of the picture.
    pub title: String,
    /// The charts, top to bottom.
    pub panels: Vec<Panel>,
}

/// One chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Heading of the chart.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// One line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Points sorted by x.
    pub points: Vec<(f64, f64)>,
    /// Palette index (one per mode/cadence).
    pub color: usize,
    /// Stroke-pattern index (one per engine/backend/payload).
    pub pattern: usize,
    /// Drawn thicker (full mode).
    pub bold: bool,
}

/// Identity of a series: sortable parts and its label.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SeriesKey {
    prefix: String,
    payload: Option<String>,
    /// 0 = full, 1 = delta.
    mode: u8,
    cadence: Option<u64>,
    cadence_text: String,
}

impl SeriesKey {
    fn label(&self) -> String {
        let mut s = self.prefix.clone();
        if let Some(p) = &self.payload {
            let _ = write!(s, " P={p}");
        }
        if self.mode == 0 {
            s.push_str(" full");
        } else {
            let _ = write!(s, " delta F={}", self.cadence_text);
        }
        s.trim().to_owned()
    }
}

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Groups usable rows (successful, not profiled, full/delta, numeric x) by series.
fn series_rows<'a>(rows: &[&'a Row], x_field: &str) -> BTreeMap<SeriesKey, Vec<&'a Row>> {
    let usable: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.is_success() && !r.is_profiled() && r.number(x_field).is_some())
        .filter(|r| r.mode().is_some())
        .collect();
    let payloads: BTreeSet<String> = usable
        .iter()
        .filter_map(|r| text_of(r.fields.get("payload_bytes")))
        .collect();
    let mut out: BTreeMap<SeriesKey, Vec<&Row>> = BTreeMap::new();
    for r in usable {
        let prefix = ["engine", "backend"]
            .iter()
            .filter_map(|f| text_of(r.fields.get(*f)))
            .collect::<Vec<_>>()
            .join("/");
        let delta = r.mode() == Some(ChannelMode::Delta);
        let cadence_v = r.fields.get("snapshot_frequency");
        let k = SeriesKey {
            prefix,
            payload: if payloads.len() > 1 {
                text_of(r.fields.get("payload_bytes"))
            } else {
                None
            },
            mode: u8::from(delta),
            cadence: if delta {
                cadence_v.and_then(Value::as_u64)
            } else {
                None
            },
            cadence_text: if delta {
                text_of(cadence_v).unwrap_or_else(|| "?".into())
            } else {
                String::new()
            },
        };
        out.entry(k).or_default().push(r);
    }
    out
}

/// Median of `y(row)` per x, sorted by x.
fn points(rows: &[&Row], x_field: &str, y: &dyn Fn(&Row) -> Option<f64>) -> Vec<(f64, f64)> {
    let mut by_x: BTreeMap<u64, (f64, Vec<f64>)> = BTreeMap::new();
    for r in rows {
        if let (Some(x), Some(v)) = (r.number(x_field), y(r)) {
            by_x.entry(x.to_bits()).or_insert((x, Vec::new())).1.push(v);
        }
    }
    let mut pts: Vec<(f64, f64)> = by_x
        .into_values()
        .filter_map(|(x, vs)| median(&vs).map(|m| (x, m)))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

fn panel(
    title: &str,
    x_label: &str,
    y_label: &str,
    groups: &BTreeMap<SeriesKey, Vec<&Row>>,
    x_field: &str,
    y: Chooser<'_>,
    bytes: bool,
) -> Panel {
    let colors: BTreeSet<(u8, Option<u64>, &str)> = groups
        .keys()
        .map(|k| (k.mode, k.cadence, k.cadence_text.as_str()))
        .collect();
    let patterns: BTreeSet<(&str, Option<&String>)> = groups
        .keys()
        .map(|k| (k.prefix.as_str(), k.payload.as_ref()))
        .collect();
    let series: Vec<Series> = groups
        .iter()
        .map(|(k, rows)| {
            let f = y(rows);
            let c = (k.mode, k.cadence, k.cadence_text.as_str());
            let p = (k.prefix.as_str(), k.payload.as_ref());
            Series {
                label: k.label(),
                points: points(rows, x_field, &*f),
                color: colors.iter().position(|x| *x == c).unwrap_or(0),
                pattern: patterns.iter().position(|x| *x == p).unwrap_or(0),
                bold: k.mode == 0,
            }
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let wide = |vals: Vec<f64>, factor: f64| {
        let (lo, hi) = vals
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(*v), hi.max(*v))
            });
        lo > 0.0 && hi / lo >= factor
    };
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    Panel {
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        log_x: !xs.is_empty() && wide(xs, 10.0),
        log_y: !ys.is_empty() && wide(ys, if bytes { 10.0 } else { 100.0 }),
        series,
    }
}

fn metric(name: &'static str) -> Metric {
    Box::new(move |r: &Row| r.number(name))
}

/// The figure for a run's rows: channel panels, production panels, or both.
pub fn figure(rows: &[Row]) -> Figure {
    let (production, channels): (Vec<&Row>, Vec<&Row>) =
        rows.iter().partition(|r| r.is_production());
    let mut panels = Vec::new();
    if !channels.is_empty() {
        let g = series_rows(&channels, "update_count");
        panels.push(panel(
            "Channel benchmark: storage (durable_db_bytes, else logical_checkpoint_bytes)",
            "update_count (N)",
            "bytes",
            &g,
            "update_count",
            &|rows: &[&Row]| {
                if rows.iter().any(|r| r.number("durable_db_bytes").is_some()) {
                    metric("durable_db_bytes")
                } else {
                    metric("logical_checkpoint_bytes")
                }
            },
            true,
        ));
        panels.push(panel(
            "Channel benchmark: write time (write_total_ms)",
            "update_count (N)",
            "ms",
            &g,
            "update_count",
            &|_: &[&Row]| metric("write_total_ms"),
            false,
        ));
    }
    if !production.is_empty() {
        let g = series_rows(&production, "turns");
        // v2 rows carry the durable size (after the WAL is folded in); v1 rows only `db_bytes`.
        let durable = production
            .iter()
            .any(|r| r.number("durable_db_bytes").is_some());
        let (title, size) = if durable {
            (
                "Production benchmark: database size (durable_db_bytes)",
                "durable_db_bytes",
            )
        } else {
            ("Production benchmark: database size (db_bytes)", "db_bytes")
        };
        panels.push(panel(
            title,
            "turns",
            "bytes",
            &g,
            "turns",
            &|_: &[&Row]| metric(size),
            true,
        ));
        panels.push(panel(
            "Production benchmark: cold state read (state_cold_ms)",
            "turns",
            "ms",
            &g,
            "turns",
            &|_: &[&Row]| metric("state_cold_ms"),
            false,
        ));
        panels.push(panel(
            "Production benchmark: warm read (state_warm_p50_ms, else the largest history_limit_L_warm_p50_ms)",
            "turns",
            "ms",
            &g,
            "turns",
            &|rows: &[&Row]| {
                if rows.iter().any(|r| r.number("state_warm_p50_ms").is_some()) {
                    return metric("state_warm_p50_ms");
                }
                let largest = rows
                    .iter()
                    .flat_map(|r| r.fields.keys())
                    .filter_map(|k| {
                        let l = k
                            .strip_prefix("history_limit_")?
                            .strip_suffix("_warm_p50_ms")?;
                        Some((l.parse::<u64>().ok()?, k.clone()))
                    })
                    .max();
                match largest {
                    Some((_, k)) => Box::new(move |r: &Row| r.number(&k)),
                    None => metric("state_warm_p50_ms"),
                }
            },
            false,
        ));
    }
    Figure {
        title: "dfck bench summarize: full vs delta (median per point)".into(),
        panels,
    }
}

// ---------------------------------------------------------------------------------------------
// SVG writer

const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];
const PATTERNS: &[&str] = &["", "8 4", "2 3", "10 3 2 3", "4 4"];
const WIDTH: f64 = 1040.0;
const PANEL_H: f64 = 400.0;
const TITLE_H: f64 = 40.0;
const LEFT: f64 = 90.0;
const PLOT_W: f64 = 560.0;
const TOP: f64 = 40.0;
const PLOT_H: f64 = 290.0;
const LEGEND_X: f64 = LEFT + PLOT_W + 24.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A short tick label: `12`, `2.5`, `150k`, `4.6M`, `1.2G`.
fn tick_label(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = if scaled == scaled.round() {
        format!("{scaled:.0}")
    } else if scaled.abs() >= 10.0 {
        format!("{scaled:.1}")
    } else if scaled.abs() >= 0.01 || scaled == 0.0 {
        format!("{scaled:.2}")
    } else {
        format!("{scaled:.1e}")
    };
    let s = if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// An axis: data range → pixel range, plus its ticks.
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn new(values: &[f64], log: bool, from_zero: bool) -> Self {
        let (mut lo, mut hi) = values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(*v), hi.max(*v))
            });
        if !lo.is_finite() || !hi.is_finite() {
            return Axis {
                lo: 0.0,
                hi: 1.0,
                log: false,
            };
        }
        if log {
            let (l, h) = (lo.log10().floor(), hi.log10().ceil());
            let h = if h <= l { l + 1.0 } else { h };
            return Axis {
                lo: 10f64.powf(l),
                hi: 10f64.powf(h),
                log: true,
            };
        }
        if from_zero && lo > 0.0 {
            lo = 0.0;
        }
        if hi <= lo {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            lo -= pad;
            hi += pad;
            if from_zero && lo < 0.0 && values.iter().all(|v| *v >= 0.0) {
                lo = 0.0;
            }
        }
        let step = nice_step((hi - lo) / 5.0);
        Axis {
            lo: (lo / step).floor() * step,
            hi: (hi / step).ceil() * step,
            log: false,
        }
    }

    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (l, h) = (self.lo.log10() as i32, self.hi.log10() as i32);
            let mut t = Vec::new();
            for e in l..=h {
                let p = 10f64.powi(e);
                t.push(p);
                if h - l <= 2 && e < h {
                    t.push(2.0 * p);
                    t.push(5.0 * p);
                }
            }
            t
        } else {
            let step = nice_step((self.hi - self.lo) / 5.0);
            let mut t = Vec::new();
            let mut v = self.lo;
            while v <= self.hi + step * 1e-9 && t.len() < 50 {
                t.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
                v += step;
            }
            t
        }
    }
}

fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let n = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * p
}

fn write_panel(out: &mut String, p: &Panel, top: f64) {
    let (x0, y0) = (LEFT, top + TOP);
    let _ = writeln!(
        out,
        r#"<g class="panel"><text x="{x}" y="{y}" font-size="15" font-weight="bold">{t}</text>"#,
        x = x0,
        y = top + 24.0,
        t = esc(&p.title)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{x0}" y="{y0}" width="{PLOT_W}" height="{PLOT_H}" fill="#ffffff" stroke="#333333"/>"##
    );
    let xs: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.0))
        .collect();
    let ys: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.1))
        .collect();
    if xs.is_empty() {
        let _ = writeln!(
            out,
            r##"<text x="{x}" y="{y}" text-anchor="middle" fill="#777777">no data</text></g>"##,
            x = x0 + PLOT_W / 2.0,
            y = y0 + PLOT_H / 2.0
        );
        return;
    }
    let ax = Axis::new(&xs, p.log_x, false);
    let ay = Axis::new(&ys, p.log_y, true);
    let px = |v: f64| x0 + ax.frac(v) * PLOT_W;
    let py = |v: f64| y0 + PLOT_H - ay.frac(v) * PLOT_H;
    for t in ax.ticks() {
        let x = px(t);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{yb}" stroke="#e5e5e5"/><text x="{x:.1}" y="{yl}" font-size="11" text-anchor="middle">{l}</text>"##,
            yb = y0 + PLOT_H,
            yl = y0 + PLOT_H + 16.0,
            l = esc(&tick_label(t))
        );
    }
    for t in ay.ticks() {
        let y = py(t);
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{xr}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{xl}" y="{yt:.1}" font-size="11" text-anchor="end">{l}</text>"##,
            xr = x0 + PLOT_W,
            xl = x0 - 6.0,
            yt = y + 4.0,
            l = esc(&tick_label(t))
        );
    }
    let _ = writeln!(
        out,
        r##"<rect x="{x0}" y="{y0}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#333333"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{x}" y="{y}" font-size="12" text-anchor="middle">{l}{s}</text>"#,
        x = x0 + PLOT_W / 2.0,
        y = y0 + PLOT_H + 36.0,
        l = esc(&p.x_label),
        s = if p.log_x { " (log scale)" } else { "" }
    );
    let (lx, ly) = (x0 - 62.0, y0 + PLOT_H / 2.0);
    let _ = writeln!(
        out,
        r#"<text x="{lx}" y="{ly}" font-size="12" text-anchor="middle" transform="rotate(-90 {lx} {ly})">{l}{s}</text>"#,
        l = esc(&p.y_label),
        s = if p.log_y { " (log)" } else { "" }
    );
    for (i, s) in p.series.iter().enumerate() {
        let color = PALETTE[s.color % PALETTE.len()];
        let dash = match PATTERNS[s.pattern % PATTERNS.len()] {
            "" => String::new(),
            p => format!(r#" stroke-dasharray="{p}""#),
        };
        let width = if s.bold { 3 } else { 2 };
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline class="series" data-label="{l}" points="{p}" fill="none" stroke="{color}" stroke-width="{width}"{dash}/>"#,
            l = esc(&s.label),
            p = pts.join(" ")
        );
        for (x, y) in &s.points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(*x),
                py(*y)
            );
        }
        let ly = y0 + 8.0 + 18.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{LEGEND_X}" y1="{ly}" x2="{x2}" y2="{ly}" stroke="{color}" stroke-width="{width}"{dash}/><text x="{xt}" y="{yt}" font-size="12">{l}</text>"#,
            x2 = LEGEND_X + 34.0,
            xt = LEGEND_X + 40.0,
            yt = ly + 4.0,
            l = esc(&s.label)
        );
    }
    out.push_str("</g>\n");
}

/// The figure as a standalone SVG document (UTF-8, trailing newline).
pub fn to_svg(fig: &Figure) -> String {
    let height = TITLE_H + PANEL_H * fig.panels.len().max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(
        out,
        r##"<rect width="100%" height="100%" fill="#ffffff"/><text x="{LEFT}" y="26" font-size="17" font-weight="bold">{t}</text>"##,
        t = esc(&fig.title)
    );
    for (i, p) in fig.panels.iter().enumerate() {
        write_panel(&mut out, p, TITLE_H + PANEL_H * i as f64);
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels() {
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(1_000_000.0), "1M");
        assert_eq!(tick_label(4_600_000.0), "4.6M");
        assert_eq!(tick_label(150_000.0), "150k");
    }

    #[test]
    fn axes() {
        let a = Axis::new(&[10.0, 1000.0], true, false);
        assert_eq!((a.lo, a.hi), (10.0, 1000.0));
        assert!((a.frac(100.0) - 0.5).abs() < 1e-12);
        let l = Axis::new(&[3.0, 47.0], false, true);
        assert_eq!(l.lo, 0.0);
        assert!(l.hi >= 47.0);
        let one = Axis::new(&[5.0], false, false);
        assert!(one.hi > one.lo);
    }

    #[test]
    fn svg_has_a_polyline_per_series() {
        let fig = Figure {
            title: "t & <x>".into(),
            panels: vec![Panel {
                title: "p".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                log_x: false,
                log_y: false,
                series: vec![
                    Series {
                        label: "a".into(),
                        points: vec![(1.0, 2.0), (2.0, 3.0)],
                        color: 0,
                        pattern: 1,
                        bold: true,
                    },
                    Series {
                        label: "b".into(),
                        points: vec![(1.0, 1.0)],
                        color: 1,
                        pattern: 0,
                        bold: false,
                    },
                ],
            }],
        };
        let svg = to_svg(&fig);
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("t &amp; &lt;x&gt;"));
    }
}
