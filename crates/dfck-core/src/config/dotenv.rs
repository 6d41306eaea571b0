//! The `.env` parser: python-dotenv's syntax and `${VAR}` expansion, as DeerFlow's
//! `load_dotenv()` reads the file.

use std::collections::HashMap;

/// Parses a `.env` file like python-dotenv: `KEY=VALUE` lines, an optional `export ` prefix,
/// `#` comments, single quotes (literal), double quotes (escapes), and `${VAR}` /
/// `${VAR:-default}` expansion in unquoted and double-quoted values, where the process
/// environment wins over earlier keys of the file. Malformed lines are skipped.
pub fn parse_dotenv(text: &str, env: &dyn Fn(&str) -> Option<String>) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let n = chars.len();
    while i < n {
        // Skip blank space and comment lines.
        while i < n && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= n {
            break;
        }
        if chars[i] == '#' {
            while i < n && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let rest: String = chars[i..n.min(i + 7)].iter().collect();
        if rest == "export " || rest == "export\t" {
            i += 7;
            while i < n && (chars[i] == ' ' || chars[i] == '\t') {
                i += 1;
            }
        }
        // Key: up to '=' on this line.
        let key_start = i;
        while i < n && chars[i] != '=' && chars[i] != '\n' {
            i += 1;
        }
        if i >= n || chars[i] == '\n' {
            // No '=': python-dotenv yields a key without a value, which load_dotenv skips.
            continue;
        }
        let mut key: String = chars[key_start..i]
            .iter()
            .collect::<String>()
            .trim()
            .to_owned();
        if key.len() >= 2
            && ((key.starts_with('\'') && key.ends_with('\''))
                || (key.starts_with('"') && key.ends_with('"')))
        {
            key = key[1..key.len() - 1].to_owned();
        }
        i += 1; // '='
        while i < n && (chars[i] == ' ' || chars[i] == '\t') {
            i += 1;
        }
        let (value, expand) = if i < n && (chars[i] == '\'' || chars[i] == '"') {
            let quote = chars[i];
            i += 1;
            let mut v = String::new();
            let mut closed = false;
            while i < n {
                let c = chars[i];
                if c == quote {
                    closed = true;
                    i += 1;
                    break;
                }
                if c == '\\' && i + 1 < n {
                    let next = chars[i + 1];
                    if quote == '\'' {
                        if next == '\'' || next == '\\' {
                            v.push(next);
                            i += 2;
                            continue;
                        }
                    } else {
                        let esc = match next {
                            'n' => Some('\n'),
                            't' => Some('\t'),
                            'r' => Some('\r'),
                            '\\' => Some('\\'),
                            '"' => Some('"'),
                            '\'' => Some('\''),
                            '0' => Some('\0'),
                            'a' => Some('\x07'),
                            'b' => Some('\x08'),
                            'f' => Some('\x0c'),
                            'v' => Some('\x0b'),
                            _ => None,
                        };
                        if let Some(e) = esc {
                            v.push(e);
                            i += 2;
                            continue;
                        }
                    }
                }
                v.push(c);
                i += 1;
            }
            // Skip the rest of the line (a trailing comment).
            while i < n && chars[i] != '\n' {
                i += 1;
            }
            if !closed {
                continue; // malformed: unterminated quote
            }
            (v, quote == '"')
        } else {
            let start = i;
            while i < n && chars[i] != '\n' {
                i += 1;
            }
            let raw: String = chars[start..i].iter().collect();
            // An inline comment starts at whitespace followed by '#'.
            let mut cut = raw.len();
            let bytes = raw.as_bytes();
            for (j, b) in bytes.iter().enumerate() {
                if *b == b'#' && j > 0 && (bytes[j - 1] == b' ' || bytes[j - 1] == b'\t') {
                    cut = j;
                    break;
                }
            }
            (raw[..cut].trim().to_owned(), true)
        };
        if key.is_empty() {
            continue;
        }
        let value = if expand {
            expand_vars(&value, &|name| env(name).or_else(|| out.get(name).cloned()))
        } else {
            value
        };
        out.insert(key, value);
    }
    out
}

/// python-dotenv's `${NAME}` / `${NAME:-default}` expansion.
fn expand_vars(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        let inner = &rest[start + 2..start + end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if name.contains(':') {
            // Not a variable reference python-dotenv recognizes: keep literally.
            out.push_str(&rest[..start + end + 1]);
            rest = &rest[start + end + 1..];
            continue;
        }
        out.push_str(&rest[..start]);
        out.push_str(&lookup(name).unwrap_or_else(|| default.unwrap_or("").to_owned()));
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotenv_parser() {
        let text = "A=1\nexport B = two words # comment\nC=\"x\\ny\" # c\nD='lit ${A}'\nE=${A}-${NOPE:-dflt}-${P}\nbad line\nF=\"multi\nline\"\n  # indented comment\nG=a#b\n";
        let env = |k: &str| (k == "P").then(|| "proc".to_owned());
        let m = parse_dotenv(text, &env);
        assert_eq!(m["A"], "1");
        assert_eq!(m["B"], "two words");
        assert_eq!(m["C"], "x\ny");
        assert_eq!(m["D"], "lit ${A}");
        assert_eq!(m["E"], "1-dflt-proc");
        assert_eq!(m["F"], "multi\nline");
        assert_eq!(m["G"], "a#b");
        assert!(!m.contains_key("bad line"));
    }
}
