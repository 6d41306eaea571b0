//! The decoded value model: msgpack values with ext payloads kept raw *and* decoded. (Lazy
//! decoding of a payload lives in `decode.rs`, building an ext from a value in `encode.rs`,
//! so this module depends on neither.)

use bytes::Bytes;
use std::sync::OnceLock;

/// One msgpack ext value. The payload is kept exactly as stored (written back verbatim)
/// and decoded as a msgpack document on first use (codes 0–7; unknown codes stay opaque).
/// Pydantic payloads (every LangChain message) are validated when read but only decoded
/// when a caller needs their structure: ids and classes are read straight from the bytes,
/// and rendering streams the bytes to JSON.
#[derive(Debug, Clone)]
pub struct Ext {
    /// The ext type code (0–7 are LangGraph's).
    pub code: i8,
    pub(super) raw: Bytes,
    pub(super) inner: OnceLock<Option<Value>>,
}

impl PartialEq for Ext {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.raw == other.raw
    }
}

impl Ext {
    /// An ext whose payload is already decoded.
    pub fn decoded(code: i8, raw: Bytes, inner: Option<Value>) -> Self {
        Ext {
            code,
            raw,
            inner: OnceLock::from(inner),
        }
    }

    /// An ext whose payload is decoded on first use: a validated msgpack document, except a
    /// stand-in's (`decode::stand_in`, read by its lengths only).
    pub fn lazy(code: i8, raw: Bytes) -> Self {
        Ext {
            code,
            raw,
            inner: OnceLock::new(),
        }
    }

    /// The payload bytes as stored.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// The decoded payload if it has been decoded already.
    pub(crate) fn inner_if_decoded(&self) -> Option<&Option<Value>> {
        self.inner.get()
    }
}

/// A decoded msgpack value, as LangGraph's `JsonPlusSerializer` writes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// msgpack nil (Python `None`).
    Nil,
    /// msgpack bool.
    Bool(bool),
    /// A signed integer (negative values, and non-negative ones that fit).
    Int(i64),
    /// An unsigned integer above `i64::MAX`.
    UInt(u64),
    /// float32 (never written by ormsgpack, accepted).
    F32(f32),
    /// float64 (every Python float).
    F64(f64),
    /// UTF-8 text.
    Str(String),
    /// Binary data.
    Bin(Vec<u8>),
    /// An array (Python list or tuple).
    Array(Vec<Value>),
    /// A map in stored order; keys may be any value.
    Map(Vec<(Value, Value)>),
    /// An ext value.
    Ext(Box<Ext>),
}

/// Ext code of LangGraph's `EXT_CONSTRUCTOR_SINGLE_ARG`.
pub const EXT_CONSTRUCTOR_SINGLE_ARG: i8 = 0;
/// Ext code of `EXT_CONSTRUCTOR_POS_ARGS`.
pub const EXT_CONSTRUCTOR_POS_ARGS: i8 = 1;
/// Ext code of `EXT_CONSTRUCTOR_KW_ARGS` (dataclasses, `Overwrite`, `Interrupt`).
pub const EXT_CONSTRUCTOR_KW_ARGS: i8 = 2;
/// Ext code of `EXT_METHOD_SINGLE_ARG` (datetime).
pub const EXT_METHOD_SINGLE_ARG: i8 = 3;
/// Ext code of pydantic v1 models.
pub const EXT_PYDANTIC_V1: i8 = 4;
/// Ext code of pydantic v2 models (every LangChain message).
pub const EXT_PYDANTIC_V2: i8 = 5;
/// Ext code of numpy arrays.
pub const EXT_NUMPY_ARRAY: i8 = 6;
/// Ext code of `_DeltaSnapshot`.
pub const EXT_DELTA_SNAPSHOT: i8 = 7;

impl Value {
    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The entries, if this is a map.
    pub fn as_map(&self) -> Option<&[(Value, Value)]> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The integer value, if this is an integer that fits in i64.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// Looks a string key up in a map.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// The ext, if this is one.
    pub fn as_ext(&self) -> Option<&Ext> {
        match self {
            Value::Ext(e) => Some(e),
            _ => None,
        }
    }

    /// For ext 0–5: the `(module, class)` pair of the constructed object.
    pub fn ext_class(&self) -> Option<(&str, &str)> {
        let ext = self.as_ext()?;
        if !(0..=5).contains(&ext.code) {
            return None;
        }
        super::scan::class_of(ext.raw())
    }

    /// For ext 4/5 (pydantic models, LangChain messages): the field map.
    pub fn model_fields(&self) -> Option<&Value> {
        let ext = self.as_ext()?;
        if ext.code != EXT_PYDANTIC_V1 && ext.code != EXT_PYDANTIC_V2 {
            return None;
        }
        ext.inner()?.as_array()?.get(2)
    }

    /// True for ext 4/5 (pydantic models, LangChain messages).
    pub fn is_model(&self) -> bool {
        matches!(self, Value::Ext(e) if e.code == EXT_PYDANTIC_V1 || e.code == EXT_PYDANTIC_V2)
    }

    /// For ext 4/5: one field, if it is a string, read without decoding the model.
    pub fn model_field_str(&self, field: &str) -> Option<&str> {
        let ext = self.as_ext()?;
        if ext.code != EXT_PYDANTIC_V1 && ext.code != EXT_PYDANTIC_V2 {
            return None;
        }
        if let Some(Some(inner)) = ext.inner_if_decoded() {
            return inner.as_array()?.get(2)?.get(field)?.as_str();
        }
        super::scan::model_field_str(ext.raw(), field)
    }

    /// For ext 7: the wrapped value of a `_DeltaSnapshot`.
    pub fn delta_snapshot_inner(&self) -> Option<&Value> {
        let ext = self.as_ext()?;
        if ext.code != EXT_DELTA_SNAPSHOT {
            return None;
        }
        ext.inner()
    }

    /// True for a `_DeltaSnapshot` (ext 7).
    pub fn is_delta_snapshot(&self) -> bool {
        matches!(self, Value::Ext(e) if e.code == EXT_DELTA_SNAPSHOT)
    }

    /// If this value is an `Overwrite` in any of its three encodings (the
    /// `langgraph.types.Overwrite` dataclass, `{"__overwrite__": v}`,
    /// `{"value": v, "type": "__overwrite__"}`), its wrapped value.
    pub fn overwrite_value(&self) -> Option<&Value> {
        match self {
            Value::Ext(e) if e.code == EXT_CONSTRUCTOR_KW_ARGS => {
                let (m, c) = self.ext_class()?;
                if m == "langgraph.types" && c == "Overwrite" {
                    let kwargs = e.inner()?.as_array()?.get(2)?;
                    Some(kwargs.get("value").unwrap_or(&Value::Nil))
                } else {
                    None
                }
            }
            Value::Map(m) => {
                if m.len() == 1 {
                    if let Some(v) = self.get("__overwrite__") {
                        return Some(v);
                    }
                }
                if m.len() == 2 && self.get("type").and_then(Value::as_str) == Some("__overwrite__")
                {
                    return self.get("value");
                }
                None
            }
            _ => None,
        }
    }
}
