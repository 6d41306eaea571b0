//! msgpack decoding into [`Value`], built on the token cursor of `scan`: ext payloads are
//! zero-copy slices of the input, decoded recursively (pydantic payloads lazily).

use super::CodecError;
use super::scan::{Cur, Token, validate_document};
use super::value::{EXT_PYDANTIC_V1, EXT_PYDANTIC_V2, Ext, Value};
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
        cur: Cur::new(bytes),
    };
    let v = r.value(0)?;
    if r.cur.pos != bytes.len() {
        return Err(CodecError::TrailingBytes {
            offset: r.cur.pos,
            len: bytes.len(),
        });
    }
    Ok(v)
}

struct Reader<'a> {
    src: &'a Bytes,
    cur: Cur<'a>,
}

impl Reader<'_> {
    fn value(&mut self, depth: usize) -> Result<Value, CodecError> {
        if depth > MAX_DEPTH {
            return Err(CodecError::TooDeep {
                offset: self.cur.pos,
            });
        }
        // Never pre-allocate from an untrusted length beyond what the input can hold.
        let room = self.cur.buf.len() - self.cur.pos;
        Ok(match self.cur.token()? {
            Token::Nil => Value::Nil,
            Token::Bool(b) => Value::Bool(b),
            Token::Int(i) => Value::Int(i),
            Token::UInt(u) => Value::UInt(u),
            Token::F32(f) => Value::F32(f),
            Token::F64(f) => Value::F64(f),
            Token::Str(s) => Value::Str(s.to_owned()),
            Token::Bin(b) => Value::Bin(b.to_vec()),
            Token::Array(n) => {
                let mut items = Vec::with_capacity(n.min(room));
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Value::Array(items)
            }
            Token::Map(n) => {
                let mut entries = Vec::with_capacity(n.min(room / 2));
                for _ in 0..n {
                    let k = self.value(depth + 1)?;
                    let v = self.value(depth + 1)?;
                    entries.push((k, v));
                }
                Value::Map(entries)
            }
            Token::Ext(code, payload) => {
                let end = self.cur.pos;
                let at = end - payload.len();
                let raw = self.src.slice(at..end);
                let ext = if code == EXT_PYDANTIC_V1 || code == EXT_PYDANTIC_V2 {
                    // Validated now, decoded when a caller needs the structure.
                    validate_document(payload, depth + 1).map_err(|e| e.shifted(at))?;
                    Ext::lazy(code, raw)
                } else if (0..=7).contains(&code) {
                    let mut sub = Reader {
                        src: self.src,
                        cur: Cur {
                            buf: &self.cur.buf[..end],
                            pos: at,
                        },
                    };
                    let v = sub.value(depth + 1)?;
                    if sub.cur.pos != end {
                        return Err(CodecError::TrailingBytes {
                            offset: sub.cur.pos,
                            len: end,
                        });
                    }
                    Ext::decoded(code, raw, Some(v))
                } else {
                    Ext::decoded(code, raw, None)
                };
                Value::Ext(Box::new(ext))
            }
        })
    }
}

impl Ext {
    /// The payload decoded (`None` for unknown codes).
    pub fn inner(&self) -> Option<&Value> {
        self.inner
            .get_or_init(|| {
                if (0..=7).contains(&self.code) {
                    decode_shared(&self.raw).ok()
                } else {
                    None
                }
            })
            .as_ref()
    }

    /// Takes the decoded payload out.
    pub fn into_inner(self) -> Option<Value> {
        self.inner();
        self.inner.into_inner().flatten()
    }
}
