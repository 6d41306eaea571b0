//! Escaping of store-supplied text for human (terminal) output.
//!
//! Thread ids, checkpoint ids, metadata and message content are typed by end users or
//! written by other programs; printed raw, they can carry terminal control sequences
//! (OSC 52 writes the clipboard, OSC 0 sets the window title, CSI clears the screen) or
//! bidirectional overrides that make a line read differently from what it holds. Every
//! string that reaches a table cell or a text line goes through [`cell`] (or [`text`] for
//! whole multi-line outputs). JSON output needs none of this: serde escapes controls.

use std::borrow::Cow;

/// Characters that change how a terminal shows text rather than being shown.
fn is_unsafe(c: char) -> bool {
    c.is_control() // C0, DEL, C1
        || matches!(
            c,
            '\u{061C}' // ARABIC LETTER MARK
            | '\u{200E}' | '\u{200F}' // LRM, RLM
            | '\u{202A}'..='\u{202E}' // LRE, RLE, PDF, LRO, RLO
            | '\u{2066}'..='\u{2069}' // LRI, RLI, FSI, PDI
        )
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
    }
}

fn escape_with(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) && !keep(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One cell or one value inside a line: every control character (newlines included),
/// DEL, C1 and bidi override shown as a visible escape (`\x1b`, `\n`, `\u{202e}`).
pub fn cell(s: &str) -> Cow<'_, str> {
    escape_with(s, |_| false)
}

/// [`cell`] into an owned `String`.
pub fn owned(s: &str) -> String {
    cell(s).into_owned()
}

/// A whole rendered text: like [`cell`], but line breaks stay (a last line of defence
/// for anything rendered without going through [`cell`]).
pub fn text(s: &str) -> Cow<'_, str> {
    escape_with(s, |c| c == '\n')
}

/// The length of an SGR (color) sequence at the start of `s` (`ESC [ digits ; … m`).
fn sgr_len(s: &str) -> Option<usize> {
    let rest = s.strip_prefix("\x1b[")?;
    let n = rest.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
    rest[n..].starts_with('m').then_some(2 + n + 1)
}

/// [`text`], keeping SGR color sequences (`--color`: the tables' own colors; store data was
/// escaped cell by cell before it got there).
pub fn text_keeping_colors(s: &str) -> Cow<'_, str> {
    if !s.contains('\x1b') {
        return text(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\x1b') {
        out.push_str(&text(&rest[..i]));
        match sgr_len(&rest[i..]) {
            Some(n) => {
                out.push_str(&rest[i..i + n]);
                rest = &rest[i + n..];
            }
            None => {
                out.push_str("\\x1b");
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(&text(rest));
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(cell("thread-1 ✓ é"), Cow::Borrowed(_)));
    }

    #[test]
    fn control_sequences_become_visible() {
        assert_eq!(
            cell("a\x1b]52;c;SGVsbG8=\x07b"),
            "a\\x1b]52;c;SGVsbG8=\\x07b"
        );
        assert_eq!(cell("x\x1b[2J\n\r\t\x7f"), "x\\x1b[2J\\n\\r\\t\\x7f");
        assert_eq!(cell("\u{9b}2J"), "\\x9b2J");
        assert_eq!(cell("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(cell("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(text("a\nb\x1bc"), "a\nb\\x1bc");
    }

    #[test]
    fn only_color_sequences_survive() {
        assert_eq!(
            text_keeping_colors("\x1b[38;5;9merror\x1b[39m \x1b]0;t\x07"),
            "\x1b[38;5;9merror\x1b[39m \\x1b]0;t\\x07"
        );
    }
}
