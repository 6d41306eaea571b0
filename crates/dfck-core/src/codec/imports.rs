//! What a stored value makes LangGraph import when it is read: every class and method named
//! by a msgpack ext (codes 0–6, inside every payload, `_DeltaSnapshot`s and nested
//! containers included) and every constructor envelope of a legacy `json` row (`lc: 2`,
//! `lc: 1`). The msgpack bytes are walked with the token cursor of `scan`, validated as
//! decoding would validate them, never built into values (`dfck audit`).
//!
//! LangGraph's ext hook (`_create_msgpack_ext_hook` in `langgraph/checkpoint/serde/jsonplus.py`)
//! unpacks every ext payload with itself as the hook, so a nested ext is revived before the
//! object around it, whether or not the outer one is then allowed: every ext found at any
//! depth is reported.

use super::CodecError;
use super::scan::{Cur, Token};
use super::{
    EXT_DELTA_SNAPSHOT, EXT_METHOD_SINGLE_ARG, EXT_NUMPY_ARRAY, EXT_PYDANTIC_V2, MAX_DEPTH,
};
use std::borrow::Cow;

/// How a stored value names what it imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Via {
    /// A msgpack ext of this code (0–6).
    Ext(i8),
    /// A legacy `json` row's `{"lc": 2, "type": "constructor", "id": [...]}`, revived by
    /// `JsonPlusSerializer._reviver` (gated by `allowed_json_modules`).
    JsonLc2,
    /// A legacy `json` row's `lc: 1` constructor, revived by langchain-core's `Reviver`.
    JsonLc1,
}

impl Via {
    /// How reports name it: `ext 5`, `json lc:2`, `json lc:1`.
    pub fn label(self) -> String {
        match self {
            Via::Ext(code) => format!("ext {code}"),
            Via::JsonLc2 => "json lc:2".to_owned(),
            Via::JsonLc1 => "json lc:1".to_owned(),
        }
    }
}

/// One thing found in a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found<'a> {
    /// An import (and a call) the loader makes: `module.name(…)`, or for ext 3
    /// `module.name.method(…)`.
    Import {
        /// How the value names it.
        via: Via,
        /// The module imported (a `json` id's namespace joined with dots).
        module: Cow<'a, str>,
        /// The attribute taken from it.
        name: Cow<'a, str>,
        /// For ext 3, the method called on it.
        method: Option<&'a str>,
    },
    /// An ext 0–5 payload or a constructor envelope that is not LangGraph's
    /// `(module, name, …)` shape (strings where the names go): not written by LangGraph.
    Malformed(Via),
}

/// Reports every import of one encoded msgpack document to `f`, with the name of the
/// `channel_values` entry it sits in when `checkpoint` is set and the document is a
/// checkpoint dict. Fails exactly where decoding fails (truncation, invalid UTF-8, depth,
/// trailing bytes, an ext 0–7 payload that is not one document).
pub fn msgpack_imports<'a>(
    bytes: &'a [u8],
    checkpoint: bool,
    f: &mut dyn FnMut(Option<&'a str>, Found<'a>),
) -> Result<(), CodecError> {
    let mut c = Cur::new(bytes);
    if checkpoint {
        walk_checkpoint(&mut c, f)?;
    } else {
        walk(&mut c, 0, None, f)?;
    }
    if c.pos != bytes.len() {
        return Err(CodecError::TrailingBytes {
            offset: c.pos,
            len: bytes.len(),
        });
    }
    Ok(())
}

/// A checkpoint dict: the values under `channel_values` are walked with their channel.
fn walk_checkpoint<'a>(
    c: &mut Cur<'a>,
    f: &mut dyn FnMut(Option<&'a str>, Found<'a>),
) -> Result<(), CodecError> {
    let mut probe = *c;
    let Token::Map(n) = probe.token()? else {
        return walk(c, 0, None, f);
    };
    *c = probe;
    for _ in 0..n {
        let mut key = *c;
        let is_values = matches!(key.token(), Ok(Token::Str("channel_values")));
        walk(c, 1, None, f)?;
        let mut inner = *c;
        match (is_values, inner.token()?) {
            (true, Token::Map(m)) => {
                *c = inner;
                for _ in 0..m {
                    let mut k = *c;
                    let channel = match k.token()? {
                        Token::Str(s) => Some(s),
                        _ => None,
                    };
                    walk(c, 2, None, f)?;
                    walk(c, 2, channel, f)?;
                }
            }
            _ => walk(c, 1, None, f)?,
        }
    }
    Ok(())
}

fn walk<'a>(
    c: &mut Cur<'a>,
    depth: usize,
    channel: Option<&'a str>,
    f: &mut dyn FnMut(Option<&'a str>, Found<'a>),
) -> Result<(), CodecError> {
    if depth > MAX_DEPTH {
        return Err(CodecError::TooDeep { offset: c.pos });
    }
    match c.token()? {
        Token::Array(n) => {
            for _ in 0..n {
                walk(c, depth + 1, channel, f)?;
            }
        }
        Token::Map(n) => {
            for _ in 0..2 * n as u64 {
                walk(c, depth + 1, channel, f)?;
            }
        }
        Token::Ext(code, payload) if (0..=EXT_DELTA_SNAPSHOT).contains(&code) => {
            let start = c.pos - payload.len();
            ext(code, payload, depth + 1, channel, f).map_err(|e| e.shifted(start))?;
        }
        _ => {}
    }
    Ok(())
}

/// One ext 0–7: what it imports, then everything inside its payload.
fn ext<'a>(
    code: i8,
    payload: &'a [u8],
    depth: usize,
    channel: Option<&'a str>,
    f: &mut dyn FnMut(Option<&'a str>, Found<'a>),
) -> Result<(), CodecError> {
    let mut p = Cur::new(payload);
    walk(&mut p, depth, channel, f)?;
    if p.pos != payload.len() {
        return Err(CodecError::TrailingBytes {
            offset: p.pos,
            len: payload.len(),
        });
    }
    let via = Via::Ext(code);
    if code == EXT_NUMPY_ARRAY {
        f(
            channel,
            Found::Import {
                via,
                module: Cow::Borrowed("numpy"),
                name: Cow::Borrowed("ndarray"),
                method: None,
            },
        );
    } else if code <= EXT_PYDANTIC_V2 {
        let found =
            target(code, payload).map_or(Found::Malformed(via), |(module, name, method)| {
                Found::Import {
                    via,
                    module: Cow::Borrowed(module),
                    name: Cow::Borrowed(name),
                    method,
                }
            });
        f(channel, found);
    }
    Ok(())
}

/// `(module, name, method)` of an ext 0–5 payload `[module, name, arg, method?]` (already
/// validated as one document): the method only for ext 3, which needs all four items.
fn target(code: i8, payload: &[u8]) -> Option<(&str, &str, Option<&str>)> {
    let mut c = Cur::new(payload);
    let need = if code == EXT_METHOD_SINGLE_ARG { 4 } else { 3 };
    match c.token().ok()? {
        Token::Array(n) if n >= need => {}
        _ => return None,
    }
    let Token::Str(module) = c.token().ok()? else {
        return None;
    };
    let Token::Str(name) = c.token().ok()? else {
        return None;
    };
    if code != EXT_METHOD_SINGLE_ARG {
        return Some((module, name, None));
    }
    c.value_slice().ok()?;
    match c.token().ok()? {
        Token::Str(method) => Some((module, name, Some(method))),
        _ => None,
    }
}

/// Reports every constructor envelope of a decoded legacy `json` row, innermost first as
/// `json.loads(object_hook=…)` revives them.
pub fn json_imports<'a>(v: &'a serde_json::Value, f: &mut dyn FnMut(Found<'a>)) {
    match v {
        serde_json::Value::Array(items) => items.iter().for_each(|x| json_imports(x, f)),
        serde_json::Value::Object(o) => {
            o.values().for_each(|x| json_imports(x, f));
            if let Some(found) = envelope(o) {
                f(found);
            }
        }
        _ => {}
    }
}

/// Python's `==` of a JSON value with a small integer (`True == 1`, `2.0 == 2`).
fn py_eq(v: Option<&serde_json::Value>, n: i64) -> bool {
    match v {
        Some(serde_json::Value::Number(x)) => x.as_f64() == Some(n as f64),
        Some(serde_json::Value::Bool(b)) => i64::from(*b) == n,
        _ => false,
    }
}

/// A `{"lc": 1|2, "type": "constructor", "id": [...]}` envelope, as the reviver tests it.
fn envelope(o: &serde_json::Map<String, serde_json::Value>) -> Option<Found<'_>> {
    let via = if py_eq(o.get("lc"), 2) {
        Via::JsonLc2
    } else if py_eq(o.get("lc"), 1) {
        Via::JsonLc1
    } else {
        return None;
    };
    if o.get("type").and_then(serde_json::Value::as_str) != Some("constructor") {
        return None;
    }
    let id = o.get("id").filter(|i| !i.is_null())?;
    let parts: Option<Vec<&str>> = id
        .as_array()
        .map(|a| a.iter().map(serde_json::Value::as_str).collect())
        .unwrap_or(None);
    Some(match parts.as_deref() {
        Some([namespace @ .., name]) if !namespace.is_empty() => Found::Import {
            via,
            module: Cow::Owned(namespace.join(".")),
            name: Cow::Borrowed(name),
            method: None,
        },
        _ => Found::Malformed(via),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Value, encode};

    fn s(x: &str) -> Value {
        Value::Str(x.to_owned())
    }

    fn ext(code: i8, items: Vec<Value>) -> Value {
        Value::new_ext(code, Value::Array(items))
    }

    fn found(bytes: &[u8], checkpoint: bool) -> Vec<(Option<String>, String)> {
        let mut out = Vec::new();
        msgpack_imports(bytes, checkpoint, &mut |ch, f| {
            let text = match f {
                Found::Import {
                    via,
                    module,
                    name,
                    method,
                } => format!(
                    "{} {module}.{name}{}",
                    via.label(),
                    method.map(|m| format!(".{m}")).unwrap_or_default()
                ),
                Found::Malformed(via) => format!("{} malformed", via.label()),
            };
            out.push((ch.map(str::to_owned), text));
        })
        .unwrap();
        out
    }

    #[test]
    fn every_ext_at_every_depth() {
        let dt = ext(
            3,
            vec![
                s("datetime"),
                s("datetime"),
                s("2025-01-01"),
                s("fromisoformat"),
            ],
        );
        let model = ext(
            5,
            vec![
                s("app.models"),
                s("Profile"),
                Value::Map(vec![(s("when"), dt.clone())]),
                s("model_validate_json"),
            ],
        );
        let snap = Value::new_ext(7, Value::Array(vec![model.clone()]));
        let arr = ext(
            6,
            vec![s("<f8"), Value::Array(vec![]), s("C"), Value::Bin(vec![])],
        );
        let odd = ext(0, vec![Value::Int(1), s("x"), Value::Nil]);
        let short3 = ext(3, vec![s("os"), s("system"), s("id")]);
        let doc = Value::Map(vec![
            (s("v"), Value::Int(4)),
            (
                s("channel_values"),
                Value::Map(vec![
                    (s("messages"), snap),
                    (s("grid"), Value::Array(vec![arr])),
                    (s("bad"), Value::Array(vec![odd, short3])),
                ]),
            ),
            (s("extra"), dt),
        ]);
        let bytes = encode(&doc);
        let ch = |c: &str| Some(c.to_owned());
        assert_eq!(
            found(&bytes, true),
            vec![
                (
                    ch("messages"),
                    "ext 3 datetime.datetime.fromisoformat".into()
                ),
                (ch("messages"), "ext 5 app.models.Profile".into()),
                (ch("grid"), "ext 6 numpy.ndarray".into()),
                (ch("bad"), "ext 0 malformed".into()),
                (ch("bad"), "ext 3 malformed".into()),
                (None, "ext 3 datetime.datetime.fromisoformat".into()),
            ]
        );
        // Not a checkpoint: the same imports, no channels.
        assert!(found(&bytes, false).iter().all(|(c, _)| c.is_none()));
        assert_eq!(found(&bytes, false).len(), 6);
    }

    #[test]
    fn broken_bytes_are_errors() {
        let v = ext(0, vec![s("subprocess"), s("Popen"), s("id")]);
        let bytes = encode(&Value::Array(vec![v]));
        for cut in 1..bytes.len() {
            assert!(msgpack_imports(&bytes[..cut], false, &mut |_, _| {}).is_err());
        }
        let mut extra = bytes.clone();
        extra.push(0xc0);
        assert!(msgpack_imports(&extra, false, &mut |_, _| {}).is_err());
        assert!(msgpack_imports(&vec![0x91u8; 1000], false, &mut |_, _| {}).is_err());
    }

    #[test]
    fn json_envelopes() {
        let row: serde_json::Value = serde_json::from_str(
            r#"{"a": {"lc": 2, "type": "constructor", "id": ["app", "models", "Point"],
                      "kwargs": {"p": {"lc": 2, "type": "constructor", "id": ["os", "system"]}}},
                "b": {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"]},
                "c": {"lc": 2, "type": "constructor", "id": "os.system"},
                "d": {"lc": 2, "type": "secret", "id": ["K"]},
                "e": {"lc": 2.0, "type": "constructor", "id": ["uuid", "UUID"]}}"#,
        )
        .unwrap();
        let mut out = Vec::new();
        json_imports(&row, &mut |f| {
            out.push(match f {
                Found::Import {
                    via, module, name, ..
                } => format!("{} {module}.{name}", via.label()),
                Found::Malformed(via) => format!("{} malformed", via.label()),
            })
        });
        assert_eq!(
            out,
            [
                "json lc:2 os.system",
                "json lc:2 app.models.Point",
                "json lc:1 langchain.schema.messages.HumanMessage",
                "json lc:2 malformed",
                "json lc:2 uuid.UUID",
            ]
        );
    }
}
