//! The decoded value model: msgpack values with ext payloads kept raw *and* decoded.

/// One msgpack ext value. `raw` is the payload exactly as stored (written back verbatim),
/// `inner` the payload decoded as a msgpack document (codes 0–7; `None` for unknown codes,
/// whose payloads are opaque).
#[derive(Debug, Clone, PartialEq)]
pub struct Ext {
    /// The ext type code (0–7 are LangGraph's).
    pub code: i8,
    /// The payload bytes as stored.
    pub raw: Vec<u8>,
    /// The payload decoded, where it is itself a msgpack document.
    pub inner: Option<Value>,
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
        let items = ext.inner.as_ref()?.as_array()?;
        Some((items.first()?.as_str()?, items.get(1)?.as_str()?))
    }

    /// For ext 4/5 (pydantic models, LangChain messages): the field map.
    pub fn model_fields(&self) -> Option<&Value> {
        let ext = self.as_ext()?;
        if ext.code != EXT_PYDANTIC_V1 && ext.code != EXT_PYDANTIC_V2 {
            return None;
        }
        ext.inner.as_ref()?.as_array()?.get(2)
    }

    /// For ext 7: the wrapped value of a `_DeltaSnapshot`.
    pub fn delta_snapshot_inner(&self) -> Option<&Value> {
        let ext = self.as_ext()?;
        if ext.code != EXT_DELTA_SNAPSHOT {
            return None;
        }
        ext.inner.as_ref()
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
                    let kwargs = e.inner.as_ref()?.as_array()?.get(2)?;
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

    /// Builds an ext value from a decoded payload, encoding the payload.
    pub fn new_ext(code: i8, inner: Value) -> Value {
        let mut raw = Vec::new();
        super::encode::write_value(&mut raw, &inner);
        Value::Ext(Box::new(Ext {
            code,
            raw,
            inner: Some(inner),
        }))
    }
}
