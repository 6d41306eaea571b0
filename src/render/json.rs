//! Compact JSON output: a `serde::Serializer` writing the same bytes as
//! `serde_json::to_writer` (same escaping, number and float formatting, map-key rules),
//! with string escaping that skips eight bytes at a time. A 10,000-message state is about
//! 4 MB of JSON, nearly all of it string contents; escaping them byte by byte was a fifth of
//! `inspect --state` (docs/performance.md). `tests` compare it with serde_json.

use serde::ser::{self, Serialize};
use std::fmt::Display;
use std::io::Write;

/// A serialization failure: the writer failed, or the value cannot be JSON.
#[derive(Debug)]
pub enum JsonError {
    /// The writer failed.
    Io(std::io::Error),
    /// The value has no JSON form (e.g. a map key that is not a string or number).
    Value(String),
}

impl Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsonError::Io(e) => e.fmt(f),
            JsonError::Value(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for JsonError {}

impl ser::Error for JsonError {
    fn custom<T: Display>(msg: T) -> Self {
        JsonError::Value(msg.to_string())
    }
}

impl From<std::io::Error> for JsonError {
    fn from(e: std::io::Error) -> Self {
        JsonError::Io(e)
    }
}

type Result<T = ()> = std::result::Result<T, JsonError>;

/// Writes `value` as compact JSON, byte for byte what `serde_json::to_writer` writes.
pub fn to_writer<W: Write, T: Serialize + ?Sized>(w: W, value: &T) -> Result {
    let mut json = Json {
        w,
        buf: Vec::with_capacity(BLOCK + BLOCK / 4),
        scratch: String::new(),
    };
    value.serialize(&mut json)?;
    json.w.write_all(&json.buf)?;
    Ok(())
}

/// Per byte: 0 when it is written as is, else the letter of its escape (`u` for `\u00XX`).
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any of the eight bytes may need an escape (a control byte, `"` or `\`).
fn chunk_needs_escape(x: u64) -> bool {
    let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let control = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
    (control | zero_in(x ^ (ONES * u64::from(b'"'))) | zero_in(x ^ (ONES * u64::from(b'\\')))) != 0
}

/// The index of the first byte of `b` at or after `i` that needs an escape, or `b.len()`.
fn next_escape(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        if chunk_needs_escape(u64::from_le_bytes(word)) {
            break;
        }
        i += 8;
    }
    while i < b.len() && ESCAPE[b[i] as usize] == 0 {
        i += 1;
    }
    i
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    loop {
        let at = next_escape(bytes, start);
        out.extend_from_slice(&bytes[start..at]);
        let Some(&b) = bytes.get(at) else {
            break;
        };
        match ESCAPE[b as usize] {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xf) as usize],
                ]);
            }
            letter => out.extend_from_slice(&[b'\\', letter]),
        }
        start = at + 1;
    }
    out.push(b'"');
}

/// Output is gathered here and handed to the writer in blocks of this size.
const BLOCK: usize = 1 << 16;

struct Json<W> {
    w: W,
    /// Bytes not yet handed to `w`.
    buf: Vec<u8>,
    /// Scratch text for `collect_str`.
    scratch: String,
}

impl<W: Write> Json<W> {
    fn raw(&mut self, b: &[u8]) -> Result {
        self.buf.extend_from_slice(b);
        self.spill()
    }

    fn string(&mut self, s: &str) -> Result {
        write_str(&mut self.buf, s);
        self.spill()
    }

    /// Hands full blocks to the writer.
    fn spill(&mut self) -> Result {
        if self.buf.len() >= BLOCK {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn int(&mut self, v: impl itoa::Integer) -> Result {
        self.raw(itoa::Buffer::new().format(v).as_bytes())
    }

    /// A float as serde_json writes it: shortest round-trip digits, `null` when not finite.
    fn float(&mut self, v: impl zmij::Float, finite: bool) -> Result {
        if finite {
            self.raw(zmij::Buffer::new().format_finite(v).as_bytes())
        } else {
            self.raw(b"null")
        }
    }
}

impl<W: Write> Json<W> {
    /// Writes `open` and starts a compound that `close` ends.
    fn open(&mut self, open: &[u8], close: &'static [u8]) -> Result<Compound<'_, W>> {
        self.raw(open)?;
        Ok(Compound {
            ser: self,
            first: true,
            close,
        })
    }
}

/// An open `[…]` or `{…}`; `first` until the first element is written.
struct Compound<'a, W> {
    ser: &'a mut Json<W>,
    first: bool,
    /// Closing bytes (`]`, `}`, or `}}` / `]}` for enum variants).
    close: &'static [u8],
}

impl<W: Write> Compound<'_, W> {
    fn comma(&mut self) -> Result {
        if self.first {
            self.first = false;
            Ok(())
        } else {
            self.ser.raw(b",")
        }
    }

    fn end_compound(self) -> Result {
        self.ser.raw(self.close)
    }
}

macro_rules! plain_int {
    ($($method:ident: $t:ty),*) => {
        $(fn $method(self, v: $t) -> Result {
            self.int(v)
        })*
    };
}

impl<'a, W: Write> ser::Serializer for &'a mut Json<W> {
    type Ok = ();
    type Error = JsonError;
    type SerializeSeq = Compound<'a, W>;
    type SerializeTuple = Compound<'a, W>;
    type SerializeTupleStruct = Compound<'a, W>;
    type SerializeTupleVariant = Compound<'a, W>;
    type SerializeMap = Compound<'a, W>;
    type SerializeStruct = Compound<'a, W>;
    type SerializeStructVariant = Compound<'a, W>;

    fn serialize_bool(self, v: bool) -> Result {
        self.raw(if v { b"true" } else { b"false" })
    }
    plain_int!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128);
    fn serialize_f32(self, v: f32) -> Result {
        self.float(v, v.is_finite())
    }
    fn serialize_f64(self, v: f64) -> Result {
        self.float(v, v.is_finite())
    }
    fn serialize_char(self, v: char) -> Result {
        self.string(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result {
        self.string(v)
    }
    fn collect_str<T: Display + ?Sized>(self, v: &T) -> Result {
        use std::fmt::Write as _;
        let mut text = std::mem::take(&mut self.scratch);
        text.clear();
        write!(text, "{v}").map_err(|e| JsonError::Value(e.to_string()))?;
        let r = self.string(&text);
        self.scratch = text;
        r
    }
    fn serialize_bytes(self, v: &[u8]) -> Result {
        let mut seq = ser::Serializer::serialize_seq(self, Some(v.len()))?;
        for b in v {
            ser::SerializeSeq::serialize_element(&mut seq, b)?;
        }
        ser::SerializeSeq::end(seq)
    }
    fn serialize_none(self) -> Result {
        self.raw(b"null")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        self.raw(b"null")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result {
        self.raw(b"null")
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result {
        self.raw(b"{")?;
        self.string(variant)?;
        self.raw(b":")?;
        v.serialize(&mut *self)?;
        self.raw(b"}")
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq> {
        self.open(b"[", b"]")
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Self::SerializeSeq> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self::SerializeSeq> {
        self.raw(b"{")?;
        self.string(variant)?;
        self.open(b":[", b"]}")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap> {
        self.open(b"{", b"}")
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Self::SerializeMap> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self::SerializeMap> {
        self.raw(b"{")?;
        self.string(variant)?;
        self.open(b":{", b"}}")
    }
}

macro_rules! seq_like {
    ($trait:ident, $method:ident) => {
        impl<W: Write> ser::$trait for Compound<'_, W> {
            type Ok = ();
            type Error = JsonError;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result {
                self.comma()?;
                v.serialize(&mut *self.ser)
            }
            fn end(self) -> Result {
                self.end_compound()
            }
        }
    };
}

seq_like!(SerializeSeq, serialize_element);
seq_like!(SerializeTuple, serialize_element);
seq_like!(SerializeTupleStruct, serialize_field);
seq_like!(SerializeTupleVariant, serialize_field);

impl<W: Write> ser::SerializeMap for Compound<'_, W> {
    type Ok = ();
    type Error = JsonError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result {
        self.comma()?;
        key.serialize(MapKey {
            ser: &mut *self.ser,
        })
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result {
        self.ser.raw(b":")?;
        v.serialize(&mut *self.ser)
    }
    fn end(self) -> Result {
        self.end_compound()
    }
}

macro_rules! struct_like {
    ($trait:ident) => {
        impl<W: Write> ser::$trait for Compound<'_, W> {
            type Ok = ();
            type Error = JsonError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                v: &T,
            ) -> Result {
                self.comma()?;
                self.ser.string(key)?;
                self.ser.raw(b":")?;
                v.serialize(&mut *self.ser)
            }
            fn end(self) -> Result {
                self.end_compound()
            }
        }
    };
}

struct_like!(SerializeStruct);
struct_like!(SerializeStructVariant);

/// A map key: strings as they are, numbers and booleans quoted, anything else refused
/// (serde_json's rules).
struct MapKey<'a, W> {
    ser: &'a mut Json<W>,
}

fn key_error() -> JsonError {
    JsonError::Value("key must be a string".into())
}

macro_rules! quoted_int {
    ($($method:ident: $t:ty),*) => {
        $(fn $method(self, v: $t) -> Result {
            self.ser.raw(b"\"")?;
            self.ser.int(v)?;
            self.ser.raw(b"\"")
        })*
    };
}

impl<W: Write> ser::Serializer for MapKey<'_, W> {
    type Ok = ();
    type Error = JsonError;
    type SerializeSeq = ser::Impossible<(), JsonError>;
    type SerializeTuple = ser::Impossible<(), JsonError>;
    type SerializeTupleStruct = ser::Impossible<(), JsonError>;
    type SerializeTupleVariant = ser::Impossible<(), JsonError>;
    type SerializeMap = ser::Impossible<(), JsonError>;
    type SerializeStruct = ser::Impossible<(), JsonError>;
    type SerializeStructVariant = ser::Impossible<(), JsonError>;

    fn serialize_str(self, v: &str) -> Result {
        self.ser.string(v)
    }
    fn serialize_char(self, v: char) -> Result {
        self.ser.string(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_bool(self, v: bool) -> Result {
        self.ser.raw(if v { b"\"true\"" } else { b"\"false\"" })
    }
    quoted_int!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128);
    fn serialize_f32(self, v: f32) -> Result {
        if !v.is_finite() {
            return Err(JsonError::Value("float key must be finite".into()));
        }
        self.ser.raw(b"\"")?;
        self.ser
            .raw(zmij::Buffer::new().format_finite(v).as_bytes())?;
        self.ser.raw(b"\"")
    }
    fn serialize_f64(self, v: f64) -> Result {
        if !v.is_finite() {
            return Err(JsonError::Value("float key must be finite".into()));
        }
        self.ser.raw(b"\"")?;
        self.ser
            .raw(zmij::Buffer::new().format_finite(v).as_bytes())?;
        self.ser.raw(b"\"")
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result {
        self.ser.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result {
        v.serialize(self)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result {
        Err(key_error())
    }
    fn serialize_none(self) -> Result {
        Err(key_error())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result {
        Err(key_error())
    }
    fn serialize_unit(self) -> Result {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result {
        Err(key_error())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result {
        Err(key_error())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(key_error())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(key_error())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap> {
        Err(key_error())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(key_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn ours<T: Serialize + ?Sized>(v: &T) -> String {
        let mut out = Vec::new();
        to_writer(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[derive(serde::Serialize)]
    enum E {
        Unit,
        New(i32),
        Tuple(u8, String),
        Struct { a: Option<f64>, b: Vec<u8> },
    }

    #[derive(serde::Serialize)]
    struct S<'a> {
        name: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        gone: Option<u8>,
        e: Vec<E>,
        ints: BTreeMap<i64, bool>,
        bools: BTreeMap<bool, char>,
        tuple: (i128, u128, f32),
        unit: (),
        bytes: &'a serde_bytes_like::Bytes,
    }

    mod serde_bytes_like {
        /// Serializes through `serialize_bytes`.
        pub struct Bytes(pub Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }
    }

    #[test]
    fn writes_what_serde_json_writes() {
        let every_byte: String = (0u8..0x80).map(char::from).collect();
        let s = S {
            name: "héllo \"w\" \\ \u{7f} \u{2028} 😀",
            gone: None,
            e: vec![
                E::Unit,
                E::New(-7),
                E::Tuple(3, every_byte.clone()),
                E::Struct {
                    a: Some(f64::NAN),
                    b: vec![0, 255],
                },
                E::Struct {
                    a: Some(1e-7),
                    b: vec![],
                },
            ],
            ints: [(-1, true), (i64::MAX, false)].into(),
            bools: [(true, '\n'), (false, '"')].into(),
            tuple: (i128::MIN, u128::MAX, 0.1),
            unit: (),
            bytes: &serde_bytes_like::Bytes(vec![1, 2, 3]),
        };
        assert_eq!(ours(&s), serde_json::to_string(&s).unwrap());
        let v = json!({"a": [1.5, -0.0, 1e300, null, "x\u{1}y"], "b": {"": {}}, "c": []});
        assert_eq!(ours(&v), serde_json::to_string(&v).unwrap());
        let floats: BTreeMap<String, f64> = [("k".into(), 2.5)].into();
        assert_eq!(ours(&floats), serde_json::to_string(&floats).unwrap());
    }

    #[test]
    fn escapes_every_position_of_a_chunk() {
        // Each escapable byte at each offset around the eight-byte chunks.
        for special in [0u8, 0x08, 0x1f, b'"', b'\\', b'\n', 0x7f, b' '] {
            for len in 0..20 {
                for at in 0..len {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = special;
                    let text = String::from_utf8(bytes).unwrap();
                    assert_eq!(ours(&text), serde_json::to_string(&text).unwrap());
                }
            }
        }
    }

    #[test]
    fn refuses_what_serde_json_refuses() {
        let bad: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
        assert!(serde_json::to_string(&bad).is_err());
        let mut out = Vec::new();
        assert!(to_writer(&mut out, &bad).is_err());
    }
}
