//! Tables that fit the terminal: the width dfck lays out for (`COLUMNS`, else the terminal's),
//! the plain style used when stdout is not a terminal, and the wrapping of prose lines. Long
//! columns (ids, content, reasons) wrap; short ones (numbers, status words) never do.

use super::spool::Spool;
use comfy_table::{
    ColumnConstraint, ContentArrangement, Table, Width,
    presets::{NOTHING, UTF8_FULL_CONDENSED},
};
use std::io::IsTerminal;
use std::sync::OnceLock;

/// A cell at most this wide keeps its column from wrapping.
const SHORT: usize = 10;
/// Columns that never wrap, whatever their width: codes and status words are read whole.
const WHOLE: [&str; 4] = ["code", "severity", "status", "mode"];
/// The least width a long column gets before the table turns into records.
const LONG_MIN: usize = 12;

/// How human output is laid out, decided once per process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    /// The width to fit, when known (`COLUMNS`, else the terminal's).
    pub width: Option<usize>,
    /// Plain tables (no box drawing): stdout is not a terminal and `COLUMNS` is unset.
    pub plain: bool,
}

/// The layout of this process: `COLUMNS` when set (boxed tables at that width), else the
/// terminal's width when stdout is one, else plain unbounded tables.
pub(crate) fn layout() -> Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    *LAYOUT.get_or_init(|| {
        if let Some(n) = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok())
            .filter(|n| *n >= 20)
        {
            return Layout {
                width: Some(n.min(u16::MAX as usize)),
                plain: false,
            };
        }
        if std::io::stdout().is_terminal() {
            let width = Table::new().width().map(usize::from).filter(|w| *w >= 20);
            return Layout {
                width,
                plain: false,
            };
        }
        Layout {
            width: None,
            plain: true,
        }
    })
}

/// Whether tables are written plain and line by line in this process (stdout not a
/// terminal, no `COLUMNS`, no color): the layout a streamed report is written in.
pub(crate) fn layout_streams() -> bool {
    let l = layout();
    l.plain && l.width.is_none() && !super::records::style().color
}

/// The display width of a string (terminal columns).
pub(crate) fn width_of(s: &str) -> usize {
    // Printable ASCII is one column a byte (most cells are).
    if s.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        return s.len();
    }
    unicode_width::UnicodeWidthStr::width(s)
}

/// Cells of a row joined by this (a control character: escaped out of store text).
const SEP: char = '\u{1f}';

/// A table that fits the layout's width when it is displayed. Rows are kept compact (one
/// string each): a table of a million rows costs about its text, and a plain table (stdout
/// not a terminal) is written from them directly; otherwise the table is laid out by
/// comfy-table when it is displayed.
#[derive(Debug)]
pub(crate) struct Grid {
    header: Vec<String>,
    /// Per column: the widest data cell while every cell is short; `None` once one is long.
    short: Vec<Option<usize>>,
    /// Each row's cells, joined by [`SEP`].
    rows: Vec<Box<str>>,
    /// Per column: the widest line of any cell, the header's included when it is shown.
    widths: Vec<usize>,
    /// [`Grid::align_right`] was called when the table had this many columns.
    right: Option<usize>,
    /// Where the rows wait instead of `rows` ([`Grid::spooled`]).
    spool: Option<Spool>,
}

impl Grid {
    /// A table with this header.
    pub fn new(header: &[&str]) -> Self {
        let mut widths = Vec::new();
        if super::records::style().headers {
            widths = header.iter().map(|h| cell_width(h)).collect();
        }
        Grid {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            short: vec![Some(0); header.len()],
            rows: Vec::new(),
            widths,
            right: None,
            spool: None,
        }
    }

    /// Adds a row (already escaped).
    pub fn row(&mut self, cells: Vec<String>) {
        for (i, c) in cells.iter().enumerate() {
            let w = c.lines().map(width_of).max().unwrap_or(0);
            let whole = self
                .header
                .get(i)
                .is_some_and(|h| WHOLE.contains(&h.as_str()));
            match self.short.get_mut(i) {
                Some(Some(m)) if whole => *m = (*m).max(w),
                Some(slot @ Some(_)) if w > SHORT => *slot = None,
                Some(Some(m)) => *m = (*m).max(w),
                Some(None) => {}
                None => self.short.push(if w > SHORT { None } else { Some(w) }),
            }
            let cw = cell_width(c);
            match self.widths.get_mut(i) {
                Some(m) => *m = (*m).max(cw),
                None => self.widths.push(cw),
            }
        }
        let mut row = String::with_capacity(cells.iter().map(|c| c.len() + 1).sum());
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                row.push(SEP);
            }
            if c.contains(SEP) {
                row.push_str(&c.replace(SEP, "\\x1f"));
            } else {
                row.push_str(c);
            }
        }
        match &mut self.spool {
            Some(spool) => spool.push(row.as_bytes()),
            None => self.rows.push(row.into_boxed_str()),
        }
    }

    /// Right-aligns every column.
    pub fn align_right(&mut self) {
        self.right = Some(self.widths.len());
    }

    /// The cells of each row.
    fn row_cells(&self) -> impl Iterator<Item = std::str::Split<'_, char>> {
        self.rows.iter().map(|r| r.split(SEP))
    }

    /// The table as comfy-table lays it out (`plain`: no borders, two spaces after each
    /// column).
    fn comfy(&self, plain: bool) -> Table {
        let mut table = Table::new();
        table
            .load_preset(if plain { NOTHING } else { UTF8_FULL_CONDENSED })
            .set_content_arrangement(ContentArrangement::Disabled)
            .force_no_tty();
        let style = super::records::style();
        if style.headers {
            table.set_header(self.header.clone());
        }
        if style.color {
            table.enforce_styling();
        }
        for cells in self.row_cells() {
            let row: Vec<comfy_table::Cell> = cells
                .enumerate()
                .map(|(i, c)| {
                    let tint = self
                        .header
                        .get(i)
                        .filter(|h| style.color && matches!(h.as_str(), "severity" | "status"))
                        .and_then(|_| word_color(c));
                    let cell = comfy_table::Cell::new(c);
                    match tint {
                        Some(t) => cell.fg(t),
                        None => cell,
                    }
                })
                .collect();
            table.add_row(row);
        }
        if let Some(n) = self.right {
            for c in table.column_iter_mut().take(n) {
                c.set_cell_alignment(comfy_table::CellAlignment::Right);
            }
        }
        if plain {
            for c in table.column_iter_mut() {
                c.set_padding((0, 2));
            }
        }
        table
    }

    /// A plain table (no borders, two spaces after each column, lines trimmed at the end),
    /// written line by line from the compact rows: what comfy-table lays out for the plain
    /// layout, without holding it.
    fn write_plain(&self, f: &mut dyn std::fmt::Write) -> std::fmt::Result {
        let mut plain = Plain::new(self);
        if super::records::style().headers && !self.header.is_empty() {
            plain.line(self.header.iter().map(String::as_str).collect(), f)?;
        }
        for cells in self.row_cells() {
            plain.line(cells.collect(), f)?;
        }
        Ok(())
    }

    /// A table whose rows wait in a [`Spool`] (rendered, compact) until it is written with
    /// [`Grid::write_spooled`]: its memory does not grow with its rows.
    /// The first row a [`Grid::spooled`] table could not keep ([`Spool::check`]).
    pub fn check_spool(&self) -> std::io::Result<()> {
        self.spool.as_ref().map_or(Ok(()), Spool::check)
    }

    pub fn spooled(header: &[&str]) -> Self {
        let mut g = Grid::new(header);
        g.spool = Some(Spool::for_report());
        g
    }

    /// Writes a table made by [`Grid::spooled`] as [`Display`](std::fmt::Display) then
    /// [`super::finish`] would (no newline at the end): streamed from the spool in the plain
    /// layout, laid out whole otherwise.
    pub fn write_spooled(&mut self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let Some(mut spool) = self.spool.take() else {
            return out.write_all(super::finish(self.to_string()).as_bytes());
        };
        let mut w = IoFmt { out, error: None };
        if !self.streams() {
            spool.each(&mut |r| {
                self.rows.push(String::from_utf8_lossy(r).into());
                Ok(())
            })?;
            let text = super::finish(self.to_string());
            return w.out.write_all(text.as_bytes());
        }
        let mut plain = Plain::new(self);
        let r = (|| {
            if super::records::style().headers && !self.header.is_empty() {
                plain.line(self.header.iter().map(String::as_str).collect(), &mut w)?;
            }
            Ok(())
        })();
        w.settle(r)?;
        spool.each(&mut |r| {
            let row = std::str::from_utf8(r).map_err(std::io::Error::other)?;
            let r = plain.line(row.split(SEP).collect(), &mut w);
            w.settle(r)
        })
    }

    /// Whether [`Display`](std::fmt::Display) writes this table plain, line by line.
    fn streams(&self) -> bool {
        // comfy-table caps a column at u16::MAX columns and wraps what is wider.
        let fits = self.widths.iter().all(|w| *w + 2 <= u16::MAX as usize);
        layout_streams() && fits
    }
}

/// The lines of a plain table, written one row at a time.
struct Plain {
    widths: Vec<usize>,
    right: usize,
    first: bool,
    line: String,
}

impl Plain {
    fn new(g: &Grid) -> Self {
        Plain {
            widths: g.widths.iter().map(|w| (*w).max(1)).collect(),
            right: g.right.unwrap_or(0),
            first: true,
            line: String::new(),
        }
    }

    /// Writes one row (each line of its cells), a newline before all but the first.
    fn line(&mut self, cells: Vec<&str>, f: &mut dyn std::fmt::Write) -> std::fmt::Result {
        let height = cells
            .iter()
            .map(|c| c.split('\n').count())
            .max()
            .unwrap_or(0);
        let spaces = |line: &mut String, n: usize| line.extend(std::iter::repeat_n(' ', n));
        for k in 0..height {
            self.line.clear();
            for (i, w) in self.widths.iter().enumerate() {
                let text = match height {
                    1 => cells.get(i).copied(),
                    _ => cells.get(i).and_then(|c| c.split('\n').nth(k)),
                };
                match text {
                    Some(text) => {
                        let pad = w.saturating_sub(width_of(text));
                        if i < self.right {
                            spaces(&mut self.line, pad);
                            self.line.push_str(text);
                        } else {
                            self.line.push_str(text);
                            spaces(&mut self.line, pad);
                        }
                        self.line.push_str("  ");
                    }
                    None => spaces(&mut self.line, w + 2),
                }
            }
            if !std::mem::take(&mut self.first) {
                f.write_str("\n")?;
            }
            f.write_str(self.line.trim_end())?;
        }
        Ok(())
    }
}

/// `fmt::Write` onto an `io::Write`, keeping the I/O error the formatter cannot carry; the
/// text escaped as [`super::finish`] escapes a report ([`super::escape::text`]: per
/// character, so piece by piece is the same).
struct IoFmt<'a> {
    out: &'a mut dyn std::io::Write,
    error: Option<std::io::Error>,
}

impl std::fmt::Write for IoFmt<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let s = super::escape::text(s);
        self.out.write_all(s.as_bytes()).map_err(|e| {
            self.error = Some(e);
            std::fmt::Error
        })
    }
}

impl IoFmt<'_> {
    /// The I/O error behind a formatting failure.
    fn settle(&mut self, r: std::fmt::Result) -> std::io::Result<()> {
        r.map_err(|_| {
            self.error
                .take()
                .unwrap_or_else(|| std::io::Error::other("formatting failed"))
        })
    }
}

/// A cell's width as comfy-table measures it: its widest line.
fn cell_width(cell: &str) -> usize {
    cell.split('\n').map(width_of).max().unwrap_or(0)
}

/// The color of a severity or status word, if it has one.
fn word_color(word: &str) -> Option<comfy_table::Color> {
    use comfy_table::Color;
    Some(match word {
        "error" | "refused" => Color::Red,
        "warning" => Color::Yellow,
        "info" => Color::Blue,
        "done" | "converted" | "copied" | "pruned" => Color::Green,
        "would" => Color::Cyan,
        _ => return None,
    })
}

impl std::fmt::Display for Grid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let l = layout();
        if self.streams() {
            return self.write_plain(f);
        }
        let text = match l.width {
            Some(w) if self.min_width() > w => self.records(w),
            Some(w) => {
                let mut t = self.comfy(l.plain);
                t.set_content_arrangement(ContentArrangement::Dynamic)
                    .set_width(w as u16);
                for (i, s) in self.short.iter().enumerate() {
                    if let (Some(m), Some(c)) = (s, t.column_mut(i)) {
                        // Padding included: the short cells keep their whole width.
                        c.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(
                            (*m + 2).min(u16::MAX as usize) as u16,
                        )));
                    }
                }
                t.to_string()
            }
            None => self.comfy(l.plain).to_string(),
        };
        if l.plain {
            let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
            f.write_str(&lines.join("\n"))
        } else {
            f.write_str(&text)
        }
    }
}

impl Grid {
    /// The narrowest this table can be laid out with its short columns whole and its long
    /// ones at least [`LONG_MIN`] wide.
    fn min_width(&self) -> usize {
        let cols = self.short.len().max(self.header.len());
        let mut w = 1;
        for i in 0..cols {
            let head = self.header.get(i).map_or(0, |h| width_of(h));
            w += 3 + match self.short.get(i) {
                Some(Some(m)) => (*m).max(head),
                _ => LONG_MIN.max(head.min(LONG_MIN)),
            };
        }
        w
    }

    /// The table as records, one block per row (`field │ value`), for a width too narrow for
    /// its columns side by side.
    fn records(&self, width: usize) -> String {
        let mut out = String::new();
        for (n, row) in self.row_cells().enumerate() {
            if n > 0 {
                out.push('\n');
            }
            out.push_str(&format!("[ {} ]\n", n + 1));
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED)
                .force_no_tty()
                .set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(width.min(u16::MAX as usize) as u16);
            for (i, cell) in row.enumerate() {
                let key = self.header.get(i).cloned().unwrap_or_default();
                t.add_row(vec![key, cell.to_owned()]);
            }
            if let Some(c) = t.column_mut(0) {
                c.set_constraint(ColumnConstraint::ContentWidth);
            }
            out.push_str(&t.to_string());
        }
        out
    }
}

/// Whether a line is a table's (it ends with a box-drawing border).
fn is_table_line(line: &str) -> bool {
    line.ends_with(['│', '┐', '┤', '╡', '┘'])
}

/// Wraps the lines of a text that are wider than the layout's width at spaces; continuation
/// lines keep the line's indentation (a tree's prefix included) plus two spaces. A single word
/// wider than the width stays whole on its own line. Tables are left as they are.
pub(crate) fn wrap_text(text: &str) -> String {
    let Some(width) = layout().width else {
        return text.to_owned();
    };
    if text.lines().all(|l| width_of(l) <= width) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if width_of(body) <= width || is_table_line(body) {
            out.push_str(line);
            continue;
        }
        wrap_line(&mut out, body, width);
        out.push_str(nl);
    }
    out
}

fn wrap_line(out: &mut String, body: &str, width: usize) {
    let lead: String = body
        .chars()
        .take_while(|c| c.is_whitespace() || "│├└─ ".contains(*c))
        .collect();
    let cont: String = lead
        .chars()
        .map(|c| match c {
            '│' | '├' => '│',
            _ => ' ',
        })
        .collect::<String>()
        + "  ";
    let cont = if width_of(&cont) * 2 > width {
        "  ".to_owned()
    } else {
        cont
    };
    let mut current = lead.clone();
    let mut current_w = width_of(&current);
    let mut first_word = true;
    for word in body[lead.len()..].split(' ') {
        if word.is_empty() {
            // A run of spaces keeps its width, except at a line's start.
            if !first_word {
                current.push(' ');
                current_w += 1;
            }
            continue;
        }
        let ww = width_of(word);
        if !first_word && current_w + 1 + ww > width {
            out.push_str(current.trim_end());
            out.push('\n');
            current = cont.clone();
            current_w = width_of(&current);
            first_word = true;
        }
        if !first_word {
            current.push(' ');
            current_w += 1;
        }
        current.push_str(word);
        current_w += ww;
        first_word = false;
    }
    out.push_str(current.trim_end());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What comfy-table lays out for the plain layout, lines trimmed at the end.
    fn via_comfy(g: &Grid) -> String {
        let text = g.comfy(true).to_string();
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        lines.join("\n")
    }

    struct Plain<'a>(&'a Grid);

    impl std::fmt::Display for Plain<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.write_plain(f)
        }
    }

    #[test]
    fn plain_tables_are_written_exactly_as_comfy_table_lays_them_out() {
        // Cells of every kind: empty, wide characters, several lines, rows shorter and
        // longer than the header, right alignment.
        let words = [
            "",
            "x",
            "thread-1",
            "1.2 KiB",
            "数据库",
            "e\u{301}t\u{e9}",
            "two\nlines",
            "a\n\nb",
            "  lead",
            "trail  ",
            "-",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for case in 0..300 {
            let header: Vec<&str> = ["thread", "ns", "bytes", "status"][..1 + next(4)].to_vec();
            let mut g = Grid::new(&header);
            for _ in 0..next(6) {
                let cells = (0..next(6))
                    .map(|_| words[next(words.len())].to_owned())
                    .collect();
                g.row(cells);
            }
            if case % 3 == 0 {
                g.align_right();
            }
            assert_eq!(Plain(&g).to_string(), via_comfy(&g), "case {case}: {g:?}");
        }
    }

    #[test]
    fn wraps_at_spaces_with_the_indent_kept() {
        let mut out = String::new();
        wrap_line(&mut out, "├─ aaaa bbbb cccc dddd", 12);
        assert_eq!(out, "├─ aaaa bbbb\n│    cccc\n│    dddd");
    }

    #[test]
    fn a_long_word_stays_whole() {
        let mut out = String::new();
        wrap_line(&mut out, "x 0123456789abcdef y", 8);
        assert_eq!(out, "x\n  0123456789abcdef\n  y");
    }
}
