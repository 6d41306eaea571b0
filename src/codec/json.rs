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
