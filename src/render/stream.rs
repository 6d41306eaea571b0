//! Reports written as their rows come: a whole-store report (the store summary, `verify`,
//! the write commands) renders each row when the command hands it over. NDJSON writes it at
//! once; the plain table layout, compact JSON and CSV keep it in a [`Spool`] until the lines
//! above the rows (totals, counts, columns) are known, then write those lines and the rows. A
//! terminal's table (laid out to its width) and `--pretty` JSON are rendered from the held
//! report. Either way the bytes are the same.

use super::Format;
use super::grid::Grid;
use super::records::CsvRows;
use super::spool::Spool;
use dfck_core::error::Error;

/// The rows of a report being streamed.
pub(crate) struct RowStream {
    rows: Rows,
    /// Rows pushed.
    shown: u64,
    /// The key of the report's list of rows (`threads`, `findings`).
    list: &'static str,
}

enum Rows {
    Table(Grid),
    Json(Spool),
    Csv(CsvRows),
    Lines(super::RowWriter),
}

impl RowStream {
    /// Whether a report can be streamed in `format`.
    pub fn streams(format: Format) -> bool {
        match format {
            Format::Table => super::grid::layout_streams(),
            Format::Json => !super::records::style().pretty,
            Format::Ndjson | Format::Csv => true,
            Format::Openmetrics => false,
        }
    }

    /// Before a command that writes to the store streams its report in `format`: fails when
    /// the rows could not wait in a temporary file, so that this is known before the first
    /// write, not after the last (NDJSON waits for nothing).
    pub fn check_before_writes(format: Format) -> Result<(), Error> {
        match format {
            Format::Ndjson => Ok(()),
            _ if Self::streams(format) => Ok(super::spool::probe()?),
            _ => Ok(()),
        }
    }

    /// Rows for `format` ([`RowStream::streams`]) of the report's list `list`; a table
    /// with this header. NDJSON is written to stdout from the first row on (refused when
    /// stdout was closed at exec).
    pub fn new(format: Format, list: &'static str, header: &[&str]) -> Result<Self, Error> {
        let rows = match format {
            Format::Json => Rows::Json(Spool::for_report()),
            Format::Csv => Rows::Csv(CsvRows::new(Spool::for_report())),
            Format::Ndjson => Rows::Lines(super::RowWriter::stdout()?),
            _ => Rows::Table(Grid::spooled(header)),
        };
        Ok(RowStream {
            rows,
            shown: 0,
            list,
        })
    }

    /// Rows pushed so far.
    pub fn shown(&self) -> u64 {
        self.shown
    }

    /// Adds one row: `row` as JSON, or the table's cells `cells` adds. A row that could not
    /// be kept (its temporary file failed) is an error here, so that the command stops.
    pub fn push<T: serde::Serialize>(
        &mut self,
        row: &T,
        cells: impl FnOnce(&mut Grid),
    ) -> Result<(), Error> {
        self.shown += 1;
        match &mut self.rows {
            Rows::Table(g) => {
                cells(g);
                g.check_spool()?;
            }
            Rows::Json(spool) => {
                let mut buf = Vec::with_capacity(512);
                super::json::to_writer(&mut buf, row).map_err(super::output::json_error)?;
                spool.push(&buf);
                spool.check()?;
            }
            Rows::Csv(csv) => {
                csv.push(row)?;
                csv.check()?;
            }
            Rows::Lines(w) => w.row(row)?,
        }
        Ok(())
    }

    /// Writes the report to stdout. A table: `head` (the lines above it, escaped and
    /// wrapped as every text report), then the table and a newline when it has rows or
    /// `header_alone`. JSON: `doc`, the report with its list of rows (`"threads"`,
    /// `"findings"`) empty, that list holding the rows. CSV: the header and the rows.
    /// NDJSON: what is buffered (its rows are the report).
    pub fn finish<T: serde::Serialize>(
        self,
        head: impl FnOnce() -> String,
        header_alone: bool,
        doc: &T,
    ) -> Result<(), Error> {
        self.finish_around(head, header_alone, String::new, doc)
    }

    /// [`RowStream::finish`], a table followed by the lines `tail` gives.
    pub fn finish_around<T: serde::Serialize>(
        self,
        head: impl FnOnce() -> String,
        header_alone: bool,
        tail: impl FnOnce() -> String,
        doc: &T,
    ) -> Result<(), Error> {
        let shown = self.shown;
        match self.rows {
            Rows::Table(mut g) => {
                let text = super::finish(head());
                let tail = tail();
                let tail = if tail.is_empty() {
                    tail
                } else {
                    super::finish(tail)
                };
                super::output::with_stdout(&mut |out| {
                    out.write_all(text.as_bytes())?;
                    if shown > 0 || header_alone {
                        g.write_spooled(out)?;
                        out.write_all(b"\n")?;
                    }
                    out.write_all(tail.as_bytes())
                })
            }
            Rows::Lines(mut w) => w.finish(),
            Rows::Csv(mut csv) => super::output::with_stdout(&mut |out| csv.write(out)),
            Rows::Json(mut spool) => {
                let mut doc_bytes = Vec::new();
                super::json::to_writer(&mut doc_bytes, doc).map_err(super::output::json_error)?;
                let list = format!(r#""{}":[]"#, self.list);
                let list = list.as_bytes();
                let Some(at) = doc_bytes.windows(list.len()).position(|w| w == list) else {
                    return Err(Error::Render(format!(
                        "the report has no list of {}",
                        self.list
                    )));
                };
                let (open, close) = doc_bytes.split_at(at + list.len() - 1);
                super::output::with_stdout(&mut |out| {
                    out.write_all(open)?;
                    let mut first = true;
                    spool.each(&mut |row| {
                        if !std::mem::take(&mut first) {
                            out.write_all(b",")?;
                        }
                        out.write_all(row)
                    })?;
                    out.write_all(close)?;
                    out.write_all(b"\n")
                })
            }
        }
    }
}

/// A write command's report streamed: its thread rows ([`RowStream`]), each made by `cells`
/// in a table, the whole report's other lines given at the end.
pub(crate) struct ReportStream<R> {
    rows: RowStream,
    cells: fn(&mut Grid, &R),
}

impl<R: serde::Serialize> ReportStream<R> {
    /// A stream for `format` ([`RowStream::streams`]), a table with this header.
    pub fn new(format: Format, header: &[&str], cells: fn(&mut Grid, &R)) -> Result<Self, Error> {
        Ok(ReportStream {
            rows: RowStream::new(format, "threads", header)?,
            cells,
        })
    }

    /// Renders one thread.
    pub fn push(&mut self, r: &R) -> Result<(), Error> {
        let cells = self.cells;
        self.rows.push(r, |g| cells(g, r))
    }

    /// Writes the report `doc` (its threads those pushed; `head`: the lines above its table)
    /// to stdout.
    pub fn finish<T: serde::Serialize>(self, head: String, doc: &T) -> Result<(), Error> {
        self.rows.finish(|| head, true, doc)
    }
}
