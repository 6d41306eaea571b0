//! Python's `json.dumps` as a `serde_json` formatter: the separators (`", "` / `": "` by
//! default, or compact `","` / `":"`) and, with `ensure_ascii`, every non-ASCII character
//! written as `\uXXXX` (UTF-16 surrogate pairs above U+FFFF). String escaping otherwise is
//! serde_json's, which matches Python's for quotes, backslashes and control characters.
//! `sort_keys=True` is [`sort_keys`] applied to the value first.

use serde::Serialize;
use serde_json::Value;
use serde_json::ser::Formatter;
use std::io::{self, Write};

/// A `serde_json` formatter writing like Python's `json.dumps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyJsonFormatter {
    item_sep: &'static [u8],
    key_sep: &'static [u8],
    ensure_ascii: bool,
}

impl PyJsonFormatter {
    /// `json.dumps(v, ensure_ascii=ensure_ascii)`: separators `", "` and `": "`.
    pub fn spaced(ensure_ascii: bool) -> PyJsonFormatter {
        PyJsonFormatter {
            item_sep: b", ",
            key_sep: b": ",
            ensure_ascii,
        }
    }

    /// `json.dumps(v, ensure_ascii=ensure_ascii, separators=(",", ":"))`.
    pub fn compact(ensure_ascii: bool) -> PyJsonFormatter {
        PyJsonFormatter {
            item_sep: b",",
            key_sep: b":",
            ensure_ascii,
        }
    }
}

impl Formatter for PyJsonFormatter {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(self.item_sep)
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(self.item_sep)
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(self.key_sep)
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if !self.ensure_ascii || fragment.is_ascii() {
            return w.write_all(fragment.as_bytes());
        }
        let mut units = [0u16; 2];
        for ch in fragment.chars() {
            if ch.is_ascii() {
                w.write_all(&[ch as u8])?;
            } else {
                for u in ch.encode_utf16(&mut units) {
                    write!(w, "\\u{u:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// Serializes `v` with `formatter` (as Python's `json.dumps` would print it).
pub fn dumps<T: Serialize + ?Sized>(
    v: &T,
    formatter: PyJsonFormatter,
) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    v.serialize(&mut ser)?;
    // The formatter writes only ASCII or the UTF-8 of valid strings.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A copy of `v` with every object's keys in code-point order (`sort_keys=True`).
pub fn sort_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sort_keys(&m[k.as_str()])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn like_python() {
        let v = json!({"b": [1, "a\u{2026}\u{1F600}\n"], "a": null});
        assert_eq!(
            dumps(&v, PyJsonFormatter::spaced(false)).unwrap(),
            "{\"b\": [1, \"a\u{2026}\u{1F600}\\n\"], \"a\": null}"
        );
        assert_eq!(
            dumps(&sort_keys(&v), PyJsonFormatter::compact(true)).unwrap(),
            "{\"a\":null,\"b\":[1,\"a\\u2026\\ud83d\\ude00\\n\"]}"
        );
    }
}
