//! Rendering of decoded values as JSON (the value table of the CLI contract), and the
//! reverse conversion used for legacy `json`-tagged rows.

use super::value::Value;
use base64::Engine as _;
use serde_json::{Map, Number, Value as Json};

fn b64(b: &[u8]) -> Json {
    Json::String(base64::engine::general_purpose::STANDARD.encode(b))
}

fn float(f: f64) -> Json {
    if f.is_nan() {
        Json::String("NaN".into())
    } else if f.is_infinite() {
        Json::String(if f > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        Number::from_f64(f).map(Json::Number).unwrap_or(Json::Null)
    }
}

fn class_name(items: &[Value]) -> String {
    match (items.first(), items.get(1)) {
        (Some(Value::Str(m)), Some(Value::Str(c))) => format!("{m}.{c}"),
        _ => String::from("?"),
    }
}

fn obj(pairs: Vec<(&str, Json)>) -> Json {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k.to_owned(), v);
    }
    Json::Object(m)
}

/// Renders a value as JSON, exactly as `cli-contract.md` specifies.
pub fn to_json(v: &Value) -> Json {
    match v {
        Value::Nil => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::Number((*i).into()),
        Value::UInt(u) => Json::Number((*u).into()),
        Value::F32(f) => float(*f as f64),
        Value::F64(f) => float(*f),
        Value::Str(s) => Json::String(s.clone()),
        Value::Bin(b) => obj(vec![("$bytes", b64(b))]),
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Map(entries) => {
            if entries.iter().all(|(k, _)| matches!(k, Value::Str(_))) {
                let mut m = Map::new();
                for (k, v) in entries {
                    if let Value::Str(k) = k {
                        m.insert(k.clone(), to_json(v));
                    }
                }
                Json::Object(m)
            } else {
                let pairs = entries
                    .iter()
                    .map(|(k, v)| Json::Array(vec![to_json(k), to_json(v)]))
                    .collect();
                obj(vec![("$map", Json::Array(pairs))])
            }
        }
        Value::Ext(e) => {
            let raw_ext = || {
                obj(vec![
                    ("$ext", Json::Number(e.code.into())),
                    ("$bytes", b64(&e.raw)),
                ])
            };
            let Some(inner) = &e.inner else {
                return raw_ext();
            };
            if e.code == super::EXT_DELTA_SNAPSHOT {
                return obj(vec![("$delta_snapshot", to_json(inner))]);
            }
            let Some(items) = inner.as_array() else {
                return raw_ext();
            };
            let nth = |i: usize| items.get(i).map(to_json).unwrap_or(Json::Null);
            match e.code {
                4 | 5 => {
                    let mut m = Map::new();
                    m.insert("$class".into(), Json::String(class_name(items)));
                    match to_json(items.get(2).unwrap_or(&Value::Nil)) {
                        Json::Object(fields) => m.extend(fields),
                        other => {
                            m.insert("$fields".into(), other);
                        }
                    }
                    Json::Object(m)
                }
                0 => obj(vec![
                    ("$class", Json::String(class_name(items))),
                    ("$arg", nth(2)),
                ]),
                1 => obj(vec![
                    ("$class", Json::String(class_name(items))),
                    ("$args", nth(2)),
                ]),
                2 => obj(vec![
                    ("$class", Json::String(class_name(items))),
                    ("$kwargs", nth(2)),
                ]),
                3 => obj(vec![
                    ("$class", Json::String(class_name(items))),
                    ("$method", nth(3)),
                    ("$arg", nth(2)),
                ]),
                6 => {
                    let bytes = match items.get(3) {
                        Some(Value::Bin(b)) => b64(b),
                        other => other.map(to_json).unwrap_or(Json::Null),
                    };
                    obj(vec![(
                        "$ndarray",
                        obj(vec![
                            ("dtype", nth(0)),
                            ("shape", nth(1)),
                            ("order", nth(2)),
                            ("$bytes", bytes),
                        ]),
                    )])
                }
                _ => raw_ext(),
            }
        }
    }
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

/// Streams a value as JSON with exactly the rules of [`to_json`], without building a
/// `serde_json::Value` tree (large states render several times faster this way).
pub struct Rendered<'a>(pub &'a Value);

struct Pair<'a>(&'a Value, &'a Value);

impl serde::Serialize for Pair<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&Rendered(self.0))?;
        t.serialize_element(&Rendered(self.1))?;
        t.end()
    }
}

struct B64<'a>(&'a [u8]);

impl serde::Serialize for B64<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(self.0))
    }
}

impl serde::Serialize for Rendered<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        let float = |s: S, f: f64| {
            if f.is_nan() {
                s.serialize_str("NaN")
            } else if f.is_infinite() {
                s.serialize_str(if f > 0.0 { "Infinity" } else { "-Infinity" })
            } else {
                s.serialize_f64(f)
            }
        };
        match self.0 {
            Value::Nil => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::UInt(u) => s.serialize_u64(*u),
            Value::F32(f) => float(s, *f as f64),
            Value::F64(f) => float(s, *f),
            Value::Str(x) => s.serialize_str(x),
            Value::Bin(b) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("$bytes", &B64(b))?;
                m.end()
            }
            Value::Array(items) => {
                let mut q = s.serialize_seq(Some(items.len()))?;
                for it in items {
                    q.serialize_element(&Rendered(it))?;
                }
                q.end()
            }
            Value::Map(entries) => {
                if entries.iter().all(|(k, _)| matches!(k, Value::Str(_))) {
                    let mut m = s.serialize_map(Some(entries.len()))?;
                    for (k, v) in entries {
                        if let Value::Str(k) = k {
                            m.serialize_entry(k, &Rendered(v))?;
                        }
                    }
                    m.end()
                } else {
                    let pairs: Vec<Pair<'_>> = entries.iter().map(|(k, v)| Pair(k, v)).collect();
                    let mut m = s.serialize_map(Some(1))?;
                    m.serialize_entry("$map", &pairs)?;
                    m.end()
                }
            }
            Value::Ext(e) => {
                let raw_ext = |s: S| {
                    let mut m = s.serialize_map(Some(2))?;
                    m.serialize_entry("$ext", &e.code)?;
                    m.serialize_entry("$bytes", &B64(&e.raw))?;
                    m.end()
                };
                let Some(inner) = &e.inner else {
                    return raw_ext(s);
                };
                if e.code == super::EXT_DELTA_SNAPSHOT {
                    let mut m = s.serialize_map(Some(1))?;
                    m.serialize_entry("$delta_snapshot", &Rendered(inner))?;
                    return m.end();
                }
                let Some(items) = inner.as_array() else {
                    return raw_ext(s);
                };
                let nil = Value::Nil;
                let nth = |i: usize| Rendered(items.get(i).unwrap_or(&nil));
                let class = class_name(items);
                match e.code {
                    4 | 5 => {
                        let fields = items.get(2).unwrap_or(&nil);
                        let mut m = s.serialize_map(None)?;
                        m.serialize_entry("$class", &class)?;
                        match fields {
                            Value::Map(entries)
                                if entries.iter().all(|(k, _)| matches!(k, Value::Str(_))) =>
                            {
                                for (k, v) in entries {
                                    if let Value::Str(k) = k {
                                        m.serialize_entry(k, &Rendered(v))?;
                                    }
                                }
                            }
                            other => m.serialize_entry("$fields", &Rendered(other))?,
                        }
                        m.end()
                    }
                    0..=3 => {
                        let mut m = s.serialize_map(None)?;
                        m.serialize_entry("$class", &class)?;
                        match e.code {
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
                        m.serialize_entry("$ndarray", &Ndarray(items))?;
                        m.end()
                    }
                    _ => raw_ext(s),
                }
            }
        }
    }
}

struct Ndarray<'a>(&'a [Value]);

impl serde::Serialize for Ndarray<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let nil = Value::Nil;
        let nth = |i: usize| Rendered(self.0.get(i).unwrap_or(&nil));
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("dtype", &nth(0))?;
        m.serialize_entry("shape", &nth(1))?;
        m.serialize_entry("order", &nth(2))?;
        match self.0.get(3) {
            Some(Value::Bin(b)) => m.serialize_entry("$bytes", &B64(b))?,
            _ => m.serialize_entry("$bytes", &nth(3))?,
        }
        m.end()
    }
}

/// Channel values in order, serialized as one JSON object of rendered values.
#[derive(Debug, Clone, Default)]
pub struct RenderedMap(pub Vec<(String, Value)>);

impl serde::Serialize for RenderedMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, &Rendered(v))?;
        }
        m.end()
    }
}
