//! msgpack decoding into [`Value`], with ext payloads decoded recursively.

use super::scan::validate_document;
use super::value::{EXT_PYDANTIC_V1, EXT_PYDANTIC_V2, Ext, Value};
use crate::error::CodecError;
use bytes::Bytes;

/// Deepest nesting accepted (arrays, maps and ext payloads together).
pub const MAX_DEPTH: usize = 128;

/// Decodes one complete msgpack document; trailing bytes are an error.
pub fn decode(bytes: &[u8]) -> Result<Value, CodecError> {
    decode_shared(&Bytes::copy_from_slice(bytes))
}

/// Decodes one complete msgpack document held in a shared buffer: ext payloads keep
/// zero-copy slices of it.
pub fn decode_shared(bytes: &Bytes) -> Result<Value, CodecError> {
    let mut r = Reader {
        src: bytes,
        buf: bytes,
        pos: 0,
    };
    let v = r.value(0)?;
    if r.pos != bytes.len() {
        return Err(CodecError::TrailingBytes {
            offset: r.pos,
            len: bytes.len(),
        });
    }
    Ok(v)
}

struct Reader<'a> {
    src: &'a Bytes,
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(CodecError::Truncated {
                offset: self.pos,
                wanted: n,
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn len16(&mut self) -> Result<usize, CodecError> {
        Ok(u16::from_be_bytes(self.be()?) as usize)
    }

    fn len32(&mut self) -> Result<usize, CodecError> {
        Ok(u32::from_be_bytes(self.be()?) as usize)
    }

    fn str(&mut self, n: usize) -> Result<Value, CodecError> {
        let at = self.pos;
        let s = self.take(n)?;
        match std::str::from_utf8(s) {
            Ok(s) => Ok(Value::Str(s.to_owned())),
            Err(_) => Err(CodecError::InvalidUtf8 { offset: at }),
        }
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, CodecError> {
        // Never pre-allocate from an untrusted length beyond what the buffer can hold.
        let mut items = Vec::with_capacity(n.min(self.buf.len() - self.pos));
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, CodecError> {
        let mut items = Vec::with_capacity(n.min((self.buf.len() - self.pos) / 2));
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            items.push((k, v));
        }
        Ok(Value::Map(items))
    }

    fn ext(&mut self, n: usize, depth: usize) -> Result<Value, CodecError> {
        let code = self.u8()? as i8;
        let at = self.pos;
        let payload = self.take(n)?;
        let raw = self.src.slice(at..at + n);
        let ext = if code == EXT_PYDANTIC_V1 || code == EXT_PYDANTIC_V2 {
            // Validated now, decoded when a caller needs the structure.
            validate_document(payload, depth + 1).map_err(|e| e.shifted(at))?;
            Ext::lazy(code, raw)
        } else if (0..=7).contains(&code) {
            let mut sub = Reader {
                src: self.src,
                buf: &self.buf[..at + n],
                pos: at,
            };
            let v = sub.value(depth + 1)?;
            if sub.pos != at + n {
                return Err(CodecError::TrailingBytes {
                    offset: sub.pos,
                    len: at + n,
                });
            }
            Ext::decoded(code, raw, Some(v))
        } else {
            Ext::decoded(code, raw, None)
        };
        Ok(Value::Ext(Box::new(ext)))
    }

    fn value(&mut self, depth: usize) -> Result<Value, CodecError> {
        if depth > MAX_DEPTH {
            return Err(CodecError::TooDeep { offset: self.pos });
        }
        let at = self.pos;
        let m = self.u8()?;
        Ok(match m {
            0x00..=0x7f => Value::Int(m as i64),
            0x80..=0x8f => self.map((m & 0x0f) as usize, depth)?,
            0x90..=0x9f => self.array((m & 0x0f) as usize, depth)?,
            0xa0..=0xbf => self.str((m & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 => {
                let n = self.u8()? as usize;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xc5 => {
                let n = self.len16()?;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xc6 => {
                let n = self.len32()?;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xc7 => {
                let n = self.u8()? as usize;
                self.ext(n, depth)?
            }
            0xc8 => {
                let n = self.len16()?;
                self.ext(n, depth)?
            }
            0xc9 => {
                let n = self.len32()?;
                self.ext(n, depth)?
            }
            0xca => Value::F32(f32::from_be_bytes(self.be()?)),
            0xcb => Value::F64(f64::from_be_bytes(self.be()?)),
            0xcc => Value::Int(self.u8()? as i64),
            0xcd => Value::Int(u16::from_be_bytes(self.be()?) as i64),
            0xce => Value::Int(u32::from_be_bytes(self.be()?) as i64),
            0xcf => {
                let u = u64::from_be_bytes(self.be()?);
                match i64::try_from(u) {
                    Ok(i) => Value::Int(i),
                    Err(_) => Value::UInt(u),
                }
            }
            0xd0 => Value::Int(self.u8()? as i8 as i64),
            0xd1 => Value::Int(i16::from_be_bytes(self.be()?) as i64),
            0xd2 => Value::Int(i32::from_be_bytes(self.be()?) as i64),
            0xd3 => Value::Int(i64::from_be_bytes(self.be()?)),
            0xd4 => self.ext(1, depth)?,
            0xd5 => self.ext(2, depth)?,
            0xd6 => self.ext(4, depth)?,
            0xd7 => self.ext(8, depth)?,
            0xd8 => self.ext(16, depth)?,
            0xd9 => {
                let n = self.u8()? as usize;
                self.str(n)?
            }
            0xda => {
                let n = self.len16()?;
                self.str(n)?
            }
            0xdb => {
                let n = self.len32()?;
                self.str(n)?
            }
            0xdc => {
                let n = self.len16()?;
                self.array(n, depth)?
            }
            0xdd => {
                let n = self.len32()?;
                self.array(n, depth)?
            }
            0xde => {
                let n = self.len16()?;
                self.map(n, depth)?
            }
            0xdf => {
                let n = self.len32()?;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::Int(m as i8 as i64),
            0xc1 => {
                return Err(CodecError::InvalidMarker {
                    offset: at,
                    byte: m,
                });
            }
        })
    }
}
