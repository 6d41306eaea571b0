//! msgpack encoding of [`Value`] with ormsgpack's byte choices: minimal-width headers,
//! float64 for Python floats, map order kept, ext payloads written back verbatim.

use super::value::{Ext, Value};
use bytes::Bytes;

/// Encodes a value to a new buffer.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(&mut out, v);
    out
}

/// Appends the encoding of `v` to `out`.
pub fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Bool(false) => out.push(0xc2),
        Value::Bool(true) => out.push(0xc3),
        Value::Int(i) => write_int(out, *i),
        Value::UInt(u) => write_uint(out, *u),
        Value::F32(f) => {
            out.push(0xca);
            out.extend_from_slice(&f.to_be_bytes());
        }
        Value::F64(f) => {
            out.push(0xcb);
            out.extend_from_slice(&f.to_be_bytes());
        }
        Value::Str(s) => {
            write_len(out, s.len(), Some((0xa0, 31)), Some(0xd9), 0xda, 0xdb);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Bin(b) => {
            write_len(out, b.len(), None, Some(0xc4), 0xc5, 0xc6);
            out.extend_from_slice(b);
        }
        Value::Array(items) => {
            write_array_header(out, items.len());
            for it in items {
                write_value(out, it);
            }
        }
        Value::Map(entries) => {
            write_map_header(out, entries.len());
            for (k, v) in entries {
                write_value(out, k);
                write_value(out, v);
            }
        }
        Value::Ext(e) => {
            write_ext_header(out, e.code, e.raw().len());
            out.extend_from_slice(e.raw());
        }
    }
}

/// Appends the header of an array of `n` items.
pub fn write_array_header(out: &mut Vec<u8>, n: usize) {
    write_len(out, n, Some((0x90, 15)), None, 0xdc, 0xdd);
}

/// Appends the header of a map of `n` entries.
pub fn write_map_header(out: &mut Vec<u8>, n: usize) {
    write_len(out, n, Some((0x80, 15)), None, 0xde, 0xdf);
}

/// Appends the header of an ext value of type `code` with an `n`-byte payload.
pub fn write_ext_header(out: &mut Vec<u8>, code: i8, n: usize) {
    match n {
        1 => out.push(0xd4),
        2 => out.push(0xd5),
        4 => out.push(0xd6),
        8 => out.push(0xd7),
        16 => out.push(0xd8),
        _ => write_len(out, n, None, Some(0xc7), 0xc8, 0xc9),
    }
    out.push(code as u8);
}

fn write_len(
    out: &mut Vec<u8>,
    n: usize,
    fix: Option<(u8, usize)>,
    m8: Option<u8>,
    m16: u8,
    m32: u8,
) {
    if let Some((base, max)) = fix {
        if n <= max {
            out.push(base | n as u8);
            return;
        }
    }
    if let Some(m) = m8 {
        if n <= u8::MAX as usize {
            out.push(m);
            out.push(n as u8);
            return;
        }
    }
    if n <= u16::MAX as usize {
        out.push(m16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(m32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn write_uint(out: &mut Vec<u8>, u: u64) {
    if u < 128 {
        out.push(u as u8);
    } else if u <= u8::MAX as u64 {
        out.push(0xcc);
        out.push(u as u8);
    } else if u <= u16::MAX as u64 {
        out.push(0xcd);
        out.extend_from_slice(&(u as u16).to_be_bytes());
    } else if u <= u32::MAX as u64 {
        out.push(0xce);
        out.extend_from_slice(&(u as u32).to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend_from_slice(&u.to_be_bytes());
    }
}

fn write_int(out: &mut Vec<u8>, i: i64) {
    if i >= 0 {
        write_uint(out, i as u64);
    } else if i >= -32 {
        out.push(i as i8 as u8);
    } else if i >= i8::MIN as i64 {
        out.push(0xd0);
        out.push(i as i8 as u8);
    } else if i >= i16::MIN as i64 {
        out.push(0xd1);
        out.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= i32::MIN as i64 {
        out.push(0xd2);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

impl Value {
    /// Builds an ext value from a decoded payload, encoding the payload.
    pub fn new_ext(code: i8, inner: Value) -> Value {
        let mut raw = Vec::new();
        write_value(&mut raw, &inner);
        Value::Ext(Box::new(Ext::decoded(code, Bytes::from(raw), Some(inner))))
    }
}
