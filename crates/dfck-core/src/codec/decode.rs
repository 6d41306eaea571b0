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
    r.finish(v)
}

/// How much of a checkpoint's channel values [`decode_checkpoint`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth<'k> {
    /// Every value complete.
    Full,
    /// Structure only: channel values other than the named ones are validated exactly as
    /// decoding would (the same bytes accepted, the same error for the rest) but stand in
    /// shallowly: an ext keeps its raw payload (decoded on first use), a list or map becomes
    /// an empty one of the same kind, scalars are decoded. Structural analysis reads channel
    /// names, ext classes and whether `messages` is a list or a snapshot, never the items,
    /// so a thread's load does not build and drop every message of every snapshot
    /// (docs/performance.md).
    Shallow {
        /// Channels kept complete (e.g. queued `Send`s).
        keep: &'k [&'k str],
    },
    /// Every value complete except the named channels, which stand in as [`stand_in`]
    /// makes them: read by their lengths only, **not validated**. Use it only where the
    /// caller validates those values itself (a walk that decodes a list unless its bytes
    /// are a known list's encoding).
    Lazy {
        /// Channels left as stand-ins.
        raw: &'k [&'k str],
    },
    /// [`Depth::Shallow`], except the `unchecked` channels, which stand in as [`stand_in`]
    /// makes them: read by their lengths only, **not validated**. For a structural load whose
    /// caller validates those values later, when it reads them back.
    ShallowUnchecked {
        /// Channels kept complete.
        keep: &'k [&'k str],
        /// Channels left as unvalidated stand-ins.
        unchecked: &'k [&'k str],
    },
}

impl Depth<'_> {
    /// Whether `channel`'s value is built whole.
    pub fn builds(&self, channel: &str) -> bool {
        match self {
            Depth::Full => true,
            Depth::Shallow { keep } | Depth::ShallowUnchecked { keep, .. } => {
                keep.contains(&channel)
            }
            Depth::Lazy { raw } => !raw.contains(&channel),
        }
    }

    /// Whether `channel`'s value is a [`stand_in`], read by its lengths only.
    pub fn stands_in(&self, channel: &str) -> bool {
        match self {
            Depth::Full | Depth::Shallow { .. } => false,
            Depth::Lazy { raw } => raw.contains(&channel),
            Depth::ShallowUnchecked { unchecked, .. } => unchecked.contains(&channel),
        }
    }
}

/// A value's stand-in, read by lengths only (the bytes must have been validated before):
/// a list or map becomes an empty one of the same kind, an ext keeps its payload (decoded
/// on first use), a scalar is decoded.
pub fn stand_in(bytes: &Bytes) -> Result<Value, CodecError> {
    let mut r = Reader {
        src: bytes,
        cur: Cur::new(bytes),
    };
    let v = r.stand_in()?;
    r.finish(v)
}

/// Decodes an encoded checkpoint dict at the given [`Depth`]. With [`Depth::Full`] this is
/// [`decode_shared`]; any input fails with exactly the error [`decode_shared`] gives.
pub fn decode_checkpoint(bytes: &Bytes, depth: Depth<'_>) -> Result<Value, CodecError> {
    if depth == Depth::Full {
        return decode_shared(bytes);
    }
    let mut r = Reader {
        src: bytes,
        cur: Cur::new(bytes),
    };
    let mut probe = r.cur;
    let v = match probe.token()? {
        Token::Map(n) => {
            r.cur = probe;
            let room = bytes.len() - r.cur.pos;
            let mut entries = Vec::with_capacity(n.min(room / 2));
            for _ in 0..n {
                let k = r.value(1)?;
                let v = if k.as_str() == Some("channel_values") {
                    r.channel_values(depth)?
                } else {
                    r.value(1)?
                };
                entries.push((k, v));
            }
            Value::Map(entries)
        }
        _ => r.value(0)?,
    };
    r.finish(v)
}

/// Decodes one channel value (a Postgres blob) shallowly, as [`Depth::Shallow`] describes;
/// fails exactly where [`decode_shared`] fails.
pub fn decode_value_shallow(bytes: &Bytes) -> Result<Value, CodecError> {
    let mut r = Reader {
        src: bytes,
        cur: Cur::new(bytes),
    };
    let v = r.shallow(0)?;
    r.finish(v)
}

struct Reader<'a> {
    src: &'a Bytes,
    cur: Cur<'a>,
}

impl Reader<'_> {
    /// `v`, if the whole input was read; trailing bytes are an error.
    fn finish(&self, v: Value) -> Result<Value, CodecError> {
        if self.cur.pos != self.src.len() {
            return Err(CodecError::TrailingBytes {
                offset: self.cur.pos,
                len: self.src.len(),
            });
        }
        Ok(v)
    }

    /// The `channel_values` map (depth 1), each value built as `depth` says.
    fn channel_values(&mut self, depth: Depth<'_>) -> Result<Value, CodecError> {
        let mut probe = self.cur;
        let Token::Map(n) = probe.token()? else {
            return self.value(1);
        };
        self.cur = probe;
        let room = self.cur.buf.len() - self.cur.pos;
        let mut entries = Vec::with_capacity(n.min(room / 2));
        for _ in 0..n {
            let k = self.value(2)?;
            let v = match (k.as_str(), depth) {
                (Some(name), _) if depth.builds(name) => self.value(2)?,
                (Some(name), _) if depth.stands_in(name) => self.stand_in()?,
                (_, Depth::Lazy { .. }) => self.value(2)?,
                _ => self.shallow(2)?,
            };
            entries.push((k, v));
        }
        Ok(Value::Map(entries))
    }

    /// One value read by its lengths only (see [`stand_in`]).
    fn stand_in(&mut self) -> Result<Value, CodecError> {
        let mut probe = self.cur;
        Ok(match probe.token()? {
            Token::Array(_) => {
                self.cur.value_slice()?;
                Value::Array(Vec::new())
            }
            Token::Map(_) => {
                self.cur.value_slice()?;
                Value::Map(Vec::new())
            }
            Token::Ext(code, payload) => {
                self.cur.value_slice()?;
                let end = self.cur.pos;
                let raw = self.src.slice(end - payload.len()..end);
                Value::Ext(Box::new(Ext::lazy(code, raw)))
            }
            _ => self.value(2)?,
        })
    }

    /// One value validated whole but built shallowly (see [`Depth::Shallow`]).
    fn shallow(&mut self, depth: usize) -> Result<Value, CodecError> {
        if depth > MAX_DEPTH {
            return Err(CodecError::TooDeep {
                offset: self.cur.pos,
            });
        }
        let mut probe = self.cur;
        Ok(match probe.token()? {
            Token::Array(_) => {
                self.cur.skip(depth)?;
                Value::Array(Vec::new())
            }
            Token::Map(_) => {
                self.cur.skip(depth)?;
                Value::Map(Vec::new())
            }
            Token::Ext(code, payload) => {
                self.cur.skip(depth)?;
                let end = self.cur.pos;
                let raw = self.src.slice(end - payload.len()..end);
                Value::Ext(Box::new(Ext::lazy(code, raw)))
            }
            _ => return self.value(depth),
        })
    }

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
                    // Validated now (once a scope: `super::seen`), decoded when a caller
                    // needs the structure.
                    super::seen::validate_once(payload, depth + 1, || {
                        validate_document(payload, depth + 1).map_err(|e| e.shifted(at))
                    })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode;

    fn s(x: &str) -> Value {
        Value::Str(x.to_owned())
    }

    /// A checkpoint dict whose channel values cover every shape: a plain message list of
    /// pydantic exts, a `_DeltaSnapshot` of a list, a kwargs ext (`Overwrite`), a map, a
    /// string, a number, queued sends.
    fn checkpoint() -> Vec<u8> {
        let msg = |id: &str| {
            Value::new_ext(
                EXT_PYDANTIC_V2,
                Value::Array(vec![
                    s("langchain_core.messages.human"),
                    s("HumanMessage"),
                    Value::Map(vec![(s("content"), s("hé")), (s("id"), s(id))]),
                ]),
            )
        };
        let values = Value::Map(vec![
            (s("messages"), Value::Array(vec![msg("a"), msg("b")])),
            (
                s("snap"),
                Value::new_ext(7, Value::Array(vec![msg("c"), Value::Nil])),
            ),
            (
                s("over"),
                Value::new_ext(
                    2,
                    Value::Array(vec![
                        s("langgraph.types"),
                        s("Overwrite"),
                        Value::Map(vec![(s("value"), Value::Array(vec![Value::Int(1)]))]),
                    ]),
                ),
            ),
            (s("title"), s("t")),
            (s("n"), Value::Int(-3)),
            (s("__pregel_tasks"), Value::Array(vec![msg("d")])),
            (s("m"), Value::Map(vec![(Value::Int(1), Value::F64(0.5))])),
        ]);
        encode(&Value::Map(vec![
            (s("v"), Value::Int(4)),
            (s("channel_values"), values),
            (
                s("channel_versions"),
                Value::Map(vec![(s("messages"), s("1"))]),
            ),
        ]))
    }

    fn outcome(r: &Result<Value, CodecError>) -> Option<String> {
        r.as_ref().err().map(ToString::to_string)
    }

    #[test]
    fn shallow_fails_exactly_where_full_decoding_fails() {
        let good = checkpoint();
        let shallow = Depth::Shallow {
            keep: &["__pregel_tasks"],
        };
        let mut cases: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
        for i in 0..good.len() {
            for b in [
                0x00,
                0x7f,
                0x91,
                0xa1,
                0xc1,
                0xc7,
                0xd4,
                0xdc,
                0xff,
                good[i] ^ 0x80,
            ] {
                let mut m = good.clone();
                m[i] = b;
                cases.push(m);
            }
        }
        let mut failures = 0;
        for bytes in cases {
            let bytes = Bytes::from(bytes);
            let full = decode_shared(&bytes);
            let lean = decode_checkpoint(&bytes, shallow);
            assert_eq!(outcome(&full), outcome(&lean), "{:02x?}", &bytes[..]);
            failures += usize::from(full.is_err());
            if let (Ok(Value::Map(f)), Ok(Value::Map(l))) = (&full, &lean) {
                assert_eq!(f.len(), l.len());
            }
        }
        assert!(
            failures > 1000,
            "the mutations must exercise the error paths"
        );
    }

    #[test]
    fn shallow_keeps_names_classes_and_kept_channels() {
        let bytes = Bytes::from(checkpoint());
        let full = decode_shared(&bytes).unwrap();
        let lean = decode_checkpoint(
            &bytes,
            Depth::Shallow {
                keep: &["__pregel_tasks"],
            },
        )
        .unwrap();
        let values = |v: &Value| v.get("channel_values").cloned().unwrap();
        let (Value::Map(f), Value::Map(l)) = (values(&full), values(&lean)) else {
            panic!("channel_values is a map");
        };
        for ((fk, fv), (lk, lv)) in f.iter().zip(&l) {
            assert_eq!(fk, lk);
            assert_eq!(fv.ext_class(), lv.ext_class(), "{fk:?}");
            assert_eq!(fv.is_delta_snapshot(), lv.is_delta_snapshot(), "{fk:?}");
            match fk.as_str() {
                Some("__pregel_tasks") | Some("title") | Some("n") => assert_eq!(fv, lv),
                Some("messages") => assert_eq!(lv, &Value::Array(Vec::new())),
                Some("m") => assert_eq!(lv, &Value::Map(Vec::new())),
                // Exts keep their bytes and decode to the same value on first use.
                _ => assert_eq!(encode(fv), encode(lv)),
            }
        }
        assert_eq!(full.get("channel_versions"), lean.get("channel_versions"));
        assert_eq!(
            outcome(&decode_value_shallow(&Bytes::from(encode(&values(&full))))),
            None
        );
    }
}
