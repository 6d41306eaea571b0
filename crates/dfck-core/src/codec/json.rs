//! Rendering of decoded values as JSON (the value table of the CLI contract), streamed
//! through serde, and the reverse conversion used for legacy `json`-tagged rows.
//!
//! One renderer serves decoded values and undecoded pydantic payloads alike ([`Node`]), so
//! a message read from a blob is written as JSON straight from its bytes.

use super::scan::{Cur, Token};
use super::value::Value;
use base64::Engine as _;
use serde::ser::{Error as _, SerializeMap, SerializeSeq, SerializeTuple};
use serde::{Serialize, Serializer};
use serde_json::Value as Json;
use std::cell::Cell;

/// Renders a value as a `serde_json::Value`, exactly as docs/storage-format.md#json-rendering specifies.
pub fn to_json(v: &Value) -> Json {
    serde_json::to_value(Rendered(v)).unwrap_or(Json::Null)
}

/// Converts a JSON document (legacy `json` rows) to a value: objects become string-keyed maps.
pub fn from_json(j: &Json) -> Value {
    match j {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::F64(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(a) => Value::Array(a.iter().map(from_json).collect()),
        Json::Object(o) => Value::Map(
            o.iter()
                .map(|(k, v)| (Value::Str(k.clone()), from_json(v)))
                .collect(),
        ),
    }
}

/// A value to render: a decoded [`Value`], or the bytes of one msgpack value not decoded.
#[derive(Clone, Copy)]
enum Node<'a> {
    Val(&'a Value),
    Raw(&'a [u8]),
    /// A string already read from raw bytes (map keys).
    Str(&'a str),
}

/// What a node is, one level deep.
enum Kind<'a> {
    Nil,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(&'a str),
    Bin(&'a [u8]),
    Array(Vec<Node<'a>>),
    Map(Vec<(Node<'a>, Node<'a>)>),
    /// Code, raw payload, decoded payload (`None`: opaque).
    Ext(i8, &'a [u8], Option<Node<'a>>),
}

impl<'a> Node<'a> {
    fn kind(self) -> Result<Kind<'a>, super::CodecError> {
        Ok(match self {
            Node::Str(s) => Kind::Str(s),
            Node::Val(v) => match v {
                Value::Nil => Kind::Nil,
                Value::Bool(b) => Kind::Bool(*b),
                Value::Int(i) => Kind::Int(*i),
                Value::UInt(u) => Kind::UInt(*u),
                Value::F32(f) => Kind::Float(*f as f64),
                Value::F64(f) => Kind::Float(*f),
                Value::Str(s) => Kind::Str(s),
                Value::Bin(b) => Kind::Bin(b),
                Value::Array(items) => Kind::Array(items.iter().map(Node::Val).collect()),
                Value::Map(entries) => Kind::Map(
                    entries
                        .iter()
                        .map(|(k, v)| (Node::Val(k), Node::Val(v)))
                        .collect(),
                ),
                Value::Ext(e) => {
                    let payload = match e.inner_if_decoded() {
                        Some(Some(inner)) => Some(Node::Val(inner)),
                        Some(None) => None,
                        None if (0..=7).contains(&e.code) => Some(Node::Raw(e.raw())),
                        None => None,
                    };
                    Kind::Ext(e.code, e.raw(), payload)
                }
            },
            Node::Raw(bytes) => {
                let mut c = Cur::new(bytes);
                match c.token()? {
                    Token::Nil => Kind::Nil,
                    Token::Bool(b) => Kind::Bool(b),
                    Token::Int(i) => Kind::Int(i),
                    Token::UInt(u) => Kind::UInt(u),
                    Token::F32(f) => Kind::Float(f as f64),
                    Token::F64(f) => Kind::Float(f),
                    Token::Str(s) => Kind::Str(s),
                    Token::Bin(b) => Kind::Bin(b),
                    Token::Array(n) => {
                        let mut items = Vec::with_capacity(n.min(bytes.len()));
                        for _ in 0..n {
                            items.push(Node::Raw(c.value_slice()?));
                        }
                        Kind::Array(items)
                    }
                    Token::Map(n) => {
                        let mut entries = Vec::with_capacity(n.min(bytes.len()));
                        for _ in 0..n {
                            let mut probe = c;
                            let k = match probe.token()? {
                                Token::Str(k) => {
                                    c = probe;
                                    Node::Str(k)
                                }
                                _ => Node::Raw(c.value_slice()?),
                            };
                            let v = c.value_slice()?;
                            entries.push((k, Node::Raw(v)));
                        }
                        Kind::Map(entries)
                    }
                    Token::Ext(code, payload) => {
                        let inner = (0..=7).contains(&code).then_some(Node::Raw(payload));
                        Kind::Ext(code, payload, inner)
                    }
                }
            }
        })
    }

    fn str_key(self) -> Option<&'a str> {
        match self {
            Node::Str(s) => Some(s),
            Node::Val(Value::Str(s)) => Some(s),
            Node::Val(_) => None,
            Node::Raw(b) => match Cur::new(b).token() {
                Ok(Token::Str(s)) => Some(s),
                _ => None,
            },
        }
    }
}

/// Streams a value as JSON with the contract's rules (no intermediate JSON tree).
pub struct Rendered<'a>(pub &'a Value);

impl Serialize for Rendered<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        NodeJson(Node::Val(self.0)).serialize(s)
    }
}

struct NodeJson<'a>(Node<'a>);

/// `{"$ext": code, "$bytes": …}`: an ext value with no JSON form of its own.
struct RawExt<'a>(i8, &'a [u8]);

impl Serialize for RawExt<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("$ext", &self.0)?;
        m.serialize_entry("$bytes", &B64(self.1))?;
        m.end()
    }
}

/// Whether the `n` entries of a map starting at `c` all have string keys (read from the
/// headers only: the bytes were validated when they were decoded).
fn string_keys(mut c: Cur<'_>, n: usize) -> bool {
    for _ in 0..n {
        let is_str = matches!(c.buf.get(c.pos), Some(0xa0..=0xbf | 0xd9..=0xdb));
        if !is_str || c.value_slice().is_err() || c.value_slice().is_err() {
            return false;
        }
    }
    true
}

/// Writes the `n` entries of a string-keyed map whose first key is at `cur` (checked with
/// [`string_keys`]), each value streamed, leaving `cur` after the map.
fn stream_entries<M: SerializeMap>(
    m: &mut M,
    cur: &Cell<Cur<'_>>,
    n: usize,
) -> Result<(), M::Error> {
    for _ in 0..n {
        let mut at = cur.get();
        let Token::Str(key) = at.token().map_err(M::Error::custom)? else {
            return Err(M::Error::custom("a map key is not a string"));
        };
        cur.set(at);
        m.serialize_entry(key, &Stream(cur))?;
    }
    Ok(())
}

/// Streams the msgpack value at a shared cursor as JSON and leaves the cursor after it: the
/// undecoded counterpart of [`NodeJson`] for a message's fields, written in one pass over
/// their bytes instead of a node list built per level (docs/performance.md). Scalars,
/// lists and string-keyed maps are written here; anything else goes to [`NodeJson`].
struct Stream<'a, 'c>(&'c Cell<Cur<'a>>);

impl Serialize for Stream<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let at = self.0.get();
        let mut c = at;
        let token = c.token().map_err(S::Error::custom)?;
        self.0.set(c);
        match token {
            Token::Nil => s.serialize_unit(),
            Token::Bool(b) => s.serialize_bool(b),
            Token::Int(i) => s.serialize_i64(i),
            Token::UInt(u) => s.serialize_u64(u),
            Token::F32(f) => float(s, f as f64),
            Token::F64(f) => float(s, f),
            Token::Str(x) => s.serialize_str(x),
            Token::Bin(b) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("$bytes", &B64(b))?;
                m.end()
            }
            Token::Array(n) => {
                let mut q = s.serialize_seq(Some(n))?;
                for _ in 0..n {
                    q.serialize_element(&Stream(self.0))?;
                }
                q.end()
            }
            Token::Map(n) if string_keys(c, n) => {
                let mut m = s.serialize_map(Some(n))?;
                stream_entries(&mut m, self.0, n)?;
                m.end()
            }
            Token::Map(_) | Token::Ext(..) => {
                let mut end = at;
                let bytes = end.value_slice().map_err(S::Error::custom)?;
                self.0.set(end);
                NodeJson(Node::Raw(bytes)).serialize(s)
            }
        }
    }
}

/// A pydantic model (ext 4 or 5) from its undecoded payload `[module, class, {fields}, …]`:
/// `{"$class": "module.Class", field: value, …}`, or `"$fields"` when the fields are not a
/// string-keyed map; the same JSON [`NodeJson`] writes from a decoded payload (`raw` when
/// the payload is not a list).
fn pydantic_raw<'a, S: Serializer>(
    s: S,
    payload: &'a [u8],
    raw: RawExt<'a>,
) -> Result<S::Ok, S::Error> {
    let mut c = Cur::new(payload);
    let n = match c.token().map_err(S::Error::custom)? {
        Token::Array(n) => n,
        _ => return raw.serialize(s),
    };
    let mut item = |i: usize| -> Result<Option<&'a [u8]>, S::Error> {
        if i < n {
            c.value_slice().map(Some).map_err(S::Error::custom)
        } else {
            Ok(None)
        }
    };
    let module = item(0)?.and_then(|b| Node::Raw(b).str_key());
    let class = item(1)?.and_then(|b| Node::Raw(b).str_key());
    // The fields are read where they start; their extent is only needed for "$fields".
    let fields_at = (n > 2).then_some(c);
    let mut m = s.serialize_map(None)?;
    m.serialize_entry("$class", &ClassName(module, class))?;
    let mut f = fields_at;
    let keyed = match f.as_mut().map(Cur::token) {
        Some(Ok(Token::Map(k))) => f.filter(|f| string_keys(*f, k)).map(|f| (f, k)),
        Some(Err(e)) => return Err(S::Error::custom(e)),
        _ => None,
    };
    match keyed {
        Some((f, k)) => stream_entries(&mut m, &Cell::new(f), k)?,
        None => {
            let fields = match fields_at {
                Some(mut at) => Some(at.value_slice().map_err(S::Error::custom)?),
                None => None,
            };
            m.serialize_entry("$fields", &fields.map(|b| NodeJson(Node::Raw(b))))?
        }
    }
    m.end()
}

struct B64<'a>(&'a [u8]);

impl Serialize for B64<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(self.0))
    }
}

struct PairJson<'a>(Node<'a>, Node<'a>);

impl Serialize for PairJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&NodeJson(self.0))?;
        t.serialize_element(&NodeJson(self.1))?;
        t.end()
    }
}

fn float<S: Serializer>(s: S, f: f64) -> Result<S::Ok, S::Error> {
    if f.is_nan() {
        s.serialize_str("NaN")
    } else if f.is_infinite() {
        s.serialize_str(if f > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        s.serialize_f64(f)
    }
}

/// Writes the entries of a map whose keys are all strings; `false` when one is not.
fn string_keyed<'a>(entries: &[(Node<'a>, Node<'a>)]) -> Option<Vec<(&'a str, Node<'a>)>> {
    entries
        .iter()
        .map(|(k, v)| Some((k.str_key()?, *v)))
        .collect()
}

/// `"<module>.<Class>"` of an ext 0–5 payload, written without building the string.
struct ClassName<'a>(Option<&'a str>, Option<&'a str>);

fn class_name<'a>(items: &[Node<'a>]) -> ClassName<'a> {
    ClassName(
        items.first().and_then(|n| n.str_key()),
        items.get(1).and_then(|n| n.str_key()),
    )
}

impl Serialize for ClassName<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.0, self.1) {
            (Some(m), Some(c)) => s.collect_str(&format_args!("{m}.{c}")),
            _ => s.serialize_str("?"),
        }
    }
}

impl Serialize for NodeJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kind = self.0.kind().map_err(S::Error::custom)?;
        match kind {
            Kind::Nil => s.serialize_unit(),
            Kind::Bool(b) => s.serialize_bool(b),
            Kind::Int(i) => s.serialize_i64(i),
            Kind::UInt(u) => s.serialize_u64(u),
            Kind::Float(f) => float(s, f),
            Kind::Str(x) => s.serialize_str(x),
            Kind::Bin(b) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("$bytes", &B64(b))?;
                m.end()
            }
            Kind::Array(items) => {
                let mut q = s.serialize_seq(Some(items.len()))?;
                for it in items {
                    q.serialize_element(&NodeJson(it))?;
                }
                q.end()
            }
            Kind::Map(entries) => match string_keyed(&entries) {
                Some(pairs) => {
                    let mut m = s.serialize_map(Some(pairs.len()))?;
                    for (k, v) in pairs {
                        m.serialize_entry(k, &NodeJson(v))?;
                    }
                    m.end()
                }
                None => {
                    let pairs: Vec<PairJson<'_>> =
                        entries.iter().map(|(k, v)| PairJson(*k, *v)).collect();
                    let mut m = s.serialize_map(Some(1))?;
                    m.serialize_entry("$map", &pairs)?;
                    m.end()
                }
            },
            Kind::Ext(code, raw, payload) => {
                let raw_ext = |s: S| RawExt(code, raw).serialize(s);
                let Some(payload) = payload else {
                    return raw_ext(s);
                };
                if let (4 | 5, Node::Raw(bytes)) = (code, payload) {
                    return pydantic_raw(s, bytes, RawExt(code, raw));
                }
                if code == super::EXT_DELTA_SNAPSHOT {
                    let mut m = s.serialize_map(Some(1))?;
                    m.serialize_entry("$delta_snapshot", &NodeJson(payload))?;
                    return m.end();
                }
                let Kind::Array(items) = payload.kind().map_err(S::Error::custom)? else {
                    return raw_ext(s);
                };
                let nth = |i: usize| items.get(i).copied().map(NodeJson);
                match code {
                    4 | 5 => {
                        let mut m = s.serialize_map(None)?;
                        m.serialize_entry("$class", &class_name(&items))?;
                        let fields = items.get(2).copied();
                        let entries = match fields.map(Node::kind).transpose() {
                            Ok(Some(Kind::Map(entries))) => string_keyed(&entries),
                            Ok(_) => None,
                            Err(e) => return Err(S::Error::custom(e)),
                        };
                        match entries {
                            Some(pairs) => {
                                for (k, v) in pairs {
                                    m.serialize_entry(k, &NodeJson(v))?;
                                }
                            }
                            None => m.serialize_entry("$fields", &fields.map(NodeJson))?,
                        }
                        m.end()
                    }
                    0..=3 => {
                        let mut m = s.serialize_map(None)?;
                        m.serialize_entry("$class", &class_name(&items))?;
                        match code {
                            0 => m.serialize_entry("$arg", &nth(2))?,
                            1 => m.serialize_entry("$args", &nth(2))?,
                            2 => m.serialize_entry("$kwargs", &nth(2))?,
                            _ => {
                                m.serialize_entry("$method", &nth(3))?;
                                m.serialize_entry("$arg", &nth(2))?;
                            }
                        }
                        m.end()
                    }
                    6 => {
                        let mut m = s.serialize_map(Some(1))?;
                        m.serialize_entry("$ndarray", &Ndarray(&items))?;
                        m.end()
                    }
                    _ => raw_ext(s),
                }
            }
        }
    }
}

struct Ndarray<'a, 'b>(&'b [Node<'a>]);

impl Serialize for Ndarray<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let nth = |i: usize| self.0.get(i).copied().map(NodeJson);
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("dtype", &nth(0))?;
        m.serialize_entry("shape", &nth(1))?;
        m.serialize_entry("order", &nth(2))?;
        match self.0.get(3).map(|n| n.kind()) {
            Some(Ok(Kind::Bin(b))) => m.serialize_entry("$bytes", &B64(b))?,
            _ => m.serialize_entry("$bytes", &nth(3))?,
        }
        m.end()
    }
}

/// Channel values in order, serialized as one JSON object of rendered values.
#[derive(Debug, Clone, Default)]
pub struct RenderedMap(pub Vec<(String, Value)>);

impl Serialize for RenderedMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, &Rendered(v))?;
        }
        m.end()
    }
}
