//! Allocation-free reading of msgpack bytes: a token cursor, full structural validation
//! (`skip`), and field look-ups inside undecoded pydantic payloads.

use super::CodecError;

/// One msgpack header-level item.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Token<'a> {
    Nil,
    Bool(bool),
    Int(i64),
    UInt(u64),
    F32(f32),
    F64(f64),
    Str(&'a str),
    Bin(&'a [u8]),
    Array(usize),
    Map(usize),
    Ext(i8, &'a [u8]),
}

/// A read position in a msgpack buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cur<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Cur<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cur { buf, pos: 0 }
    }

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

    fn be<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn len8(&mut self) -> Result<usize, CodecError> {
        Ok(self.take(1)?[0] as usize)
    }

    fn len16(&mut self) -> Result<usize, CodecError> {
        Ok(u16::from_be_bytes(self.be()?) as usize)
    }

    fn len32(&mut self) -> Result<usize, CodecError> {
        Ok(u32::from_be_bytes(self.be()?) as usize)
    }

    fn str(&mut self, n: usize) -> Result<Token<'a>, CodecError> {
        let at = self.pos;
        let s = self.take(n)?;
        // The field names and type tags every message repeats are recognised by their
        // bytes, which is cheaper than validating a short string (docs/performance.md).
        if let Some(known) = known_str(s) {
            return Ok(Token::Str(known));
        }
        // SIMD validation: the scanner checks every string of every value it reads.
        simdutf8::basic::from_utf8(s)
            .map(Token::Str)
            .map_err(|_| CodecError::InvalidUtf8 { offset: at })
    }

    fn ext(&mut self, n: usize) -> Result<Token<'a>, CodecError> {
        let code = self.take(1)?[0] as i8;
        Ok(Token::Ext(code, self.take(n)?))
    }

    /// Reads one header (and the bytes of a str/bin/ext).
    pub fn token(&mut self) -> Result<Token<'a>, CodecError> {
        let at = self.pos;
        let m = self.take(1)?[0];
        Ok(match m {
            0x00..=0x7f => Token::Int(m as i64),
            0x80..=0x8f => Token::Map((m & 0x0f) as usize),
            0x90..=0x9f => Token::Array((m & 0x0f) as usize),
            0xa0..=0xbf => self.str((m & 0x1f) as usize)?,
            0xc0 => Token::Nil,
            0xc2 => Token::Bool(false),
            0xc3 => Token::Bool(true),
            0xc4 => {
                let n = self.len8()?;
                Token::Bin(self.take(n)?)
            }
            0xc5 => {
                let n = self.len16()?;
                Token::Bin(self.take(n)?)
            }
            0xc6 => {
                let n = self.len32()?;
                Token::Bin(self.take(n)?)
            }
            0xc7 => {
                let n = self.len8()?;
                self.ext(n)?
            }
            0xc8 => {
                let n = self.len16()?;
                self.ext(n)?
            }
            0xc9 => {
                let n = self.len32()?;
                self.ext(n)?
            }
            0xca => Token::F32(f32::from_be_bytes(self.be()?)),
            0xcb => Token::F64(f64::from_be_bytes(self.be()?)),
            0xcc => Token::Int(self.take(1)?[0] as i64),
            0xcd => Token::Int(u16::from_be_bytes(self.be()?) as i64),
            0xce => Token::Int(u32::from_be_bytes(self.be()?) as i64),
            0xcf => {
                let u = u64::from_be_bytes(self.be()?);
                match i64::try_from(u) {
                    Ok(i) => Token::Int(i),
                    Err(_) => Token::UInt(u),
                }
            }
            0xd0 => Token::Int(self.take(1)?[0] as i8 as i64),
            0xd1 => Token::Int(i16::from_be_bytes(self.be()?) as i64),
            0xd2 => Token::Int(i32::from_be_bytes(self.be()?) as i64),
            0xd3 => Token::Int(i64::from_be_bytes(self.be()?)),
            0xd4 => self.ext(1)?,
            0xd5 => self.ext(2)?,
            0xd6 => self.ext(4)?,
            0xd7 => self.ext(8)?,
            0xd8 => self.ext(16)?,
            0xd9 => {
                let n = self.len8()?;
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
            0xdc => Token::Array(self.len16()?),
            0xdd => Token::Array(self.len32()?),
            0xde => Token::Map(self.len16()?),
            0xdf => Token::Map(self.len32()?),
            0xe0..=0xff => Token::Int(m as i8 as i64),
            0xc1 => {
                return Err(CodecError::InvalidMarker {
                    offset: at,
                    byte: m,
                });
            }
        })
    }

    /// Skips one complete value, validating it exactly as decoding would (UTF-8, lengths,
    /// nesting depth, ext payloads 0–7 as complete documents; a message payload already
    /// validated in the current scope is not validated again: `super::seen`).
    pub fn skip(&mut self, depth: usize) -> Result<(), CodecError> {
        if depth > super::MAX_DEPTH {
            return Err(CodecError::TooDeep { offset: self.pos });
        }
        match self.token()? {
            Token::Array(n) => {
                for _ in 0..n {
                    self.skip(depth + 1)?;
                }
            }
            Token::Map(n) => {
                for _ in 0..2 * n as u64 {
                    self.skip(depth + 1)?;
                }
            }
            Token::Ext(code, payload) if (0..=7).contains(&code) => {
                let start = self.pos - payload.len();
                let check = || validate_document(payload, depth + 1).map_err(|e| e.shifted(start));
                // A message repeated across the thread's checkpoints is validated once.
                if code == super::EXT_PYDANTIC_V1 || code == super::EXT_PYDANTIC_V2 {
                    super::seen::validate_once(payload, depth + 1, check)?;
                } else {
                    check()?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The bytes of the next complete value, advancing past it. Only lengths are read:
    /// use it on bytes that were validated when they were decoded.
    pub fn value_slice(&mut self) -> Result<&'a [u8], CodecError> {
        let start = self.pos;
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            let m = self.take(1)?[0];
            let skip = match m {
                0x00..=0x7f | 0xc0 | 0xc2 | 0xc3 | 0xe0..=0xff => 0,
                0x80..=0x8f => {
                    pending += 2 * (m & 0x0f) as u64;
                    0
                }
                0x90..=0x9f => {
                    pending += (m & 0x0f) as u64;
                    0
                }
                0xa0..=0xbf => (m & 0x1f) as usize,
                0xc4 | 0xd9 => self.len8()?,
                0xc5 | 0xda => self.len16()?,
                0xc6 | 0xdb => self.len32()?,
                0xc7 => self.len8()? + 1,
                0xc8 => self.len16()? + 1,
                0xc9 => self.len32()? + 1,
                0xca => 4,
                0xcb => 8,
                0xcc | 0xd0 => 1,
                0xcd | 0xd1 => 2,
                0xce | 0xd2 => 4,
                0xcf | 0xd3 => 8,
                0xd4 => 2,
                0xd5 => 3,
                0xd6 => 5,
                0xd7 => 9,
                0xd8 => 17,
                0xdc => {
                    pending += self.len16()? as u64;
                    0
                }
                0xdd => {
                    pending += self.len32()? as u64;
                    0
                }
                0xde => {
                    pending += 2 * self.len16()? as u64;
                    0
                }
                0xdf => {
                    pending += 2 * self.len32()? as u64;
                    0
                }
                0xc1 => {
                    return Err(CodecError::InvalidMarker {
                        offset: self.pos - 1,
                        byte: m,
                    });
                }
            };
            self.take(skip)?;
        }
        Ok(&self.buf[start..self.pos])
    }
}

/// Strings that LangChain messages repeat in every message: their fields, type tags, and
/// modules and classes. Equal bytes are valid UTF-8, so a match needs no validation.
fn known_str(b: &[u8]) -> Option<&'static str> {
    Some(match b {
        b"content" => "content",
        b"additional_kwargs" => "additional_kwargs",
        b"response_metadata" => "response_metadata",
        b"type" => "type",
        b"name" => "name",
        b"id" => "id",
        b"example" => "example",
        b"tool_calls" => "tool_calls",
        b"invalid_tool_calls" => "invalid_tool_calls",
        b"usage_metadata" => "usage_metadata",
        b"tool_call_id" => "tool_call_id",
        b"artifact" => "artifact",
        b"status" => "status",
        b"human" => "human",
        b"ai" => "ai",
        b"tool" => "tool",
        b"system" => "system",
        b"text" => "text",
        b"args" => "args",
        b"success" => "success",
        b"HumanMessage" => "HumanMessage",
        b"AIMessage" => "AIMessage",
        b"ToolMessage" => "ToolMessage",
        b"SystemMessage" => "SystemMessage",
        b"langchain_core.messages.human" => "langchain_core.messages.human",
        b"langchain_core.messages.ai" => "langchain_core.messages.ai",
        b"langchain_core.messages.tool" => "langchain_core.messages.tool",
        b"langchain_core.messages.system" => "langchain_core.messages.system",
        b"model_validate_json" => "model_validate_json",
        b"_DeltaSnapshot" => "_DeltaSnapshot",
        b"langgraph.channels.delta" => "langgraph.channels.delta",
        _ => return None,
    })
}

/// Validates that `buf` is exactly one msgpack document.
pub(crate) fn validate_document(buf: &[u8], depth: usize) -> Result<(), CodecError> {
    let mut c = Cur::new(buf);
    c.skip(depth)?;
    if c.pos != buf.len() {
        return Err(CodecError::TrailingBytes {
            offset: c.pos,
            len: buf.len(),
        });
    }
    Ok(())
}

/// `(module, class)` of an ext 0–5 payload `[module, class, …]`.
pub(crate) fn class_of(payload: &[u8]) -> Option<(&str, &str)> {
    let mut c = Cur::new(payload);
    match c.token().ok()? {
        Token::Array(n) if n >= 2 => {}
        _ => return None,
    }
    let Token::Str(m) = c.token().ok()? else {
        return None;
    };
    let Token::Str(k) = c.token().ok()? else {
        return None;
    };
    Some((m, k))
}

/// A string field of a pydantic payload `[module, class, {fields}, …]`, read in place. The
/// payload must have been validated: the values before the field are passed by their
/// lengths only ([`Cur::value_slice`]), which is what makes a message's id cheap to find
/// again behind a long `content`. A decoded value's lazy [`super::value::Ext`] was validated
/// when it was read; a stand-in's ([`super::decode::stand_in`]) was not, and no caller asks
/// one for a field.
pub(crate) fn model_field_str<'a>(payload: &'a [u8], field: &str) -> Option<&'a str> {
    let mut c = Cur::new(payload);
    match c.token().ok()? {
        Token::Array(n) if n >= 3 => {}
        _ => return None,
    }
    c.value_slice().ok()?;
    c.value_slice().ok()?;
    let Token::Map(n) = c.token().ok()? else {
        return None;
    };
    for _ in 0..n {
        let key = c.token().ok()?;
        if matches!(key, Token::Str(k) if k == field) {
            return match c.token().ok()? {
                Token::Str(v) => Some(v),
                _ => None,
            };
        }
        if let Token::Array(_) | Token::Map(_) = key {
            return None;
        }
        c.value_slice().ok()?;
    }
    None
}

/// The ext type code of one encoded value, `None` when it is not an ext (or unreadable).
pub fn ext_code(value: &[u8]) -> Option<i8> {
    match Cur::new(value).token() {
        Ok(Token::Ext(code, _)) => Some(code),
        _ => None,
    }
}

/// Where `messages` sits in an encoded checkpoint dict, found without decoding it: the bytes
/// of `channel_values["messages"]` (when stored) and whether `channel_versions` has the
/// channel. Only lengths are read: use it on bytes this process wrote or already validated.
pub fn checkpoint_messages_slice(body: &[u8]) -> Result<(Option<&[u8]>, bool), CodecError> {
    let mut cur = Cur::new(body);
    let Token::Map(n) = cur.token()? else {
        return Ok((None, false));
    };
    let mut slice = None;
    let mut versioned = false;
    // Keys are strings in every checkpoint dict; a container key would need a full skip.
    fn key<'a>(cur: &mut Cur<'a>) -> Result<Option<&'a str>, CodecError> {
        let at = cur.pos;
        match cur.token()? {
            Token::Str(s) => Ok(Some(s)),
            Token::Array(_) | Token::Map(_) | Token::Ext(..) => Err(CodecError::InvalidMarker {
                offset: at,
                byte: cur.buf[at],
            }),
            _ => Ok(None),
        }
    }
    for _ in 0..n {
        match key(&mut cur)? {
            Some(k @ ("channel_values" | "channel_versions")) => {
                let at = cur.pos;
                let Token::Map(m) = cur.token()? else {
                    cur.pos = at;
                    cur.value_slice()?;
                    continue;
                };
                for _ in 0..m {
                    let is_messages = key(&mut cur)? == Some("messages");
                    let v = cur.value_slice()?;
                    if is_messages {
                        if k == "channel_values" {
                            slice = Some(v);
                        } else {
                            versioned = true;
                        }
                    }
                }
            }
            _ => {
                cur.value_slice()?;
            }
        }
    }
    Ok((slice, versioned))
}

/// What [`edit_checkpoint_messages`] does to `channel_values["messages"]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessagesEdit {
    /// The entry goes.
    Remove,
    /// The value is wrapped in an ext of this code (a `_DeltaSnapshot`).
    Wrap(i8),
}

/// `body` (an encoded checkpoint dict) with `channel_values["messages"]` removed or
/// wrapped, every other byte as it was, found without decoding anything. `None` when the
/// document is not that simple shape: not a map, no `messages` value, a key that is not a
/// string, or `channel_values` or `messages` present twice (decode it instead). Only lengths
/// are read: use it on bytes already validated.
pub fn edit_checkpoint_messages(
    body: &[u8],
    edit: MessagesEdit,
) -> Result<Option<Vec<u8>>, CodecError> {
    let mut cur = Cur::new(body);
    let Token::Map(n) = cur.token()? else {
        return Ok(None);
    };
    // (header start, header end, entries, messages entry start, value start, value end)
    let mut found: Option<(usize, usize, usize, usize, usize, usize)> = None;
    let mut maps = 0;
    for _ in 0..n {
        let Token::Str(k) = cur.token()? else {
            return Ok(None);
        };
        if k != "channel_values" {
            cur.value_slice()?;
            continue;
        }
        maps += 1;
        let head = cur.pos;
        let Token::Map(m) = cur.token()? else {
            return Ok(None);
        };
        let head_end = cur.pos;
        for _ in 0..m {
            let entry = cur.pos;
            let Token::Str(name) = cur.token()? else {
                return Ok(None);
            };
            let is_messages = name == "messages";
            let value = cur.pos;
            cur.value_slice()?;
            if is_messages {
                if found.is_some() {
                    return Ok(None);
                }
                found = Some((head, head_end, m, entry, value, cur.pos));
            }
        }
    }
    let Some((head, head_end, m, entry, value, end)) = found else {
        return Ok(None);
    };
    if maps != 1 {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(body.len() + 6);
    match edit {
        MessagesEdit::Remove => {
            out.extend_from_slice(&body[..head]);
            super::write_map_header(&mut out, m - 1);
            out.extend_from_slice(&body[head_end..entry]);
            out.extend_from_slice(&body[end..]);
        }
        MessagesEdit::Wrap(code) => {
            out.extend_from_slice(&body[..value]);
            super::write_ext_header(&mut out, code, end - value);
            out.extend_from_slice(&body[value..]);
        }
    }
    Ok(Some(out))
}

/// The string at top-level key `key` of a msgpack map document, found without decoding it:
/// the last such key wins, as in the decoded map; `None` when absent or not a string. The
/// whole document is validated first, so any stored bytes may be passed.
pub fn top_level_str<'a>(body: &'a [u8], key: &str) -> Result<Option<&'a str>, CodecError> {
    validate_document(body, 0)?;
    let mut cur = Cur::new(body);
    let Token::Map(n) = cur.token()? else {
        return Ok(None);
    };
    let mut found = None;
    for _ in 0..n {
        let k = cur.value_slice()?;
        let is_key = matches!(Cur::new(k).token(), Ok(Token::Str(s)) if s == key);
        let v = cur.value_slice()?;
        if is_key {
            found = match Cur::new(v).token()? {
                Token::Str(s) => Some(s),
                _ => None,
            };
        }
    }
    Ok(found)
}

/// Whether `buf` is exactly one well-formed msgpack document.
pub fn is_document(buf: &[u8]) -> bool {
    validate_document(buf, 0).is_ok()
}

/// The encoded size of every value in a checkpoint dict's `channel_values`, in stored
/// order, found without decoding them. The whole document is validated first, so any
/// stored bytes may be passed.
pub fn checkpoint_channel_sizes(body: &[u8]) -> Result<Vec<(String, u64)>, CodecError> {
    validate_document(body, 0)?;
    let mut cur = Cur::new(body);
    let Token::Map(n) = cur.token()? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for _ in 0..n {
        let key = cur.value_slice()?;
        let is_values = matches!(Cur::new(key).token(), Ok(Token::Str("channel_values")));
        if !is_values {
            cur.value_slice()?;
            continue;
        }
        let at = cur.pos;
        let Token::Map(m) = cur.token()? else {
            cur.pos = at;
            cur.value_slice()?;
            continue;
        };
        for _ in 0..m {
            let key = cur.value_slice()?;
            let name = match Cur::new(key).token()? {
                Token::Str(s) => s.to_owned(),
                _ => String::from_utf8_lossy(key).into_owned(),
            };
            out.push((name, cur.value_slice()?.len() as u64));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Value, encode};

    fn s(x: &str) -> Value {
        Value::Str(x.to_owned())
    }

    #[test]
    fn known_strings_read_as_themselves_and_others_are_still_validated() {
        for known in [
            "content",
            "langchain_core.messages.human",
            "ai",
            "tool_call_id",
        ] {
            let bytes = encode(&s(known));
            assert!(matches!(Cur::new(&bytes).token(), Ok(Token::Str(x)) if x == known));
            assert!(known_str(known.as_bytes()).is_some());
        }
        // Same length as "content", not one of the known strings, invalid UTF-8.
        let mut bytes = encode(&s("contenu"));
        let last = bytes.len() - 1;
        bytes[last] = 0xff;
        assert!(matches!(
            Cur::new(&bytes).token(),
            Err(CodecError::InvalidUtf8 { offset: 1 })
        ));
        assert!(known_str(b"contenu").is_none());
    }

    #[test]
    fn finds_messages_without_decoding() {
        let list = Value::Array(vec![s("m1"), s("m2")]);
        let body = Value::Map(vec![
            (s("v"), Value::Int(4)),
            (
                s("channel_values"),
                Value::Map(vec![(s("x"), Value::Int(1)), (s("messages"), list.clone())]),
            ),
            (
                s("channel_versions"),
                Value::Map(vec![(s("messages"), s("00001.0"))]),
            ),
        ]);
        let bytes = encode(&body);
        let (slice, versioned) = checkpoint_messages_slice(&bytes).unwrap();
        assert_eq!(slice, Some(&encode(&list)[..]));
        assert!(versioned);
        // Versioned but not stored (a delta checkpoint); neither.
        let body = Value::Map(vec![
            (s("channel_values"), Value::Map(vec![])),
            (
                s("channel_versions"),
                Value::Map(vec![(s("messages"), s("1"))]),
            ),
        ]);
        assert_eq!(
            checkpoint_messages_slice(&encode(&body)).unwrap(),
            (None, true)
        );
        assert_eq!(
            checkpoint_messages_slice(&encode(&Value::Map(vec![]))).unwrap(),
            (None, false)
        );
        // A container key is refused, a truncated document is an error, never a panic.
        let odd = Value::Map(vec![(Value::Array(vec![]), Value::Nil)]);
        assert!(checkpoint_messages_slice(&encode(&odd)).is_err());
        assert!(checkpoint_messages_slice(&bytes[..bytes.len() - 3]).is_err());
    }

    #[test]
    fn messages_are_cut_out_or_wrapped_where_they_sit_as_decoding_would_write_them() {
        let checkpoint = |extra: usize, messages: Option<Value>| {
            let mut cv: Vec<(Value, Value)> = (0..extra)
                .map(|i| (s(&format!("c{i:02}")), Value::Int(i as i64)))
                .collect();
            if let Some(m) = messages {
                cv.insert(cv.len() / 2, (s("messages"), m));
            }
            Value::Map(vec![
                (s("v"), Value::Int(4)),
                (s("channel_values"), Value::Map(cv)),
                (
                    s("channel_versions"),
                    Value::Map(vec![(s("messages"), s("00002"))]),
                ),
            ])
        };
        let list = Value::Array((0..40).map(|i| s(&"m".repeat(i))).collect());
        // 15 other channels: the map header shrinks from map16 to a fixmap when one goes.
        for extra in [0, 3, 15, 16, 70_000] {
            let body = encode(&checkpoint(extra, Some(list.clone())));
            let cut = edit_checkpoint_messages(&body, MessagesEdit::Remove).unwrap();
            assert_eq!(cut, Some(encode(&checkpoint(extra, None))), "{extra}");
            let wrapped = edit_checkpoint_messages(&body, MessagesEdit::Wrap(7)).unwrap();
            let snapshot = Value::new_ext(7, list.clone());
            assert_eq!(
                wrapped,
                Some(encode(&checkpoint(extra, Some(snapshot)))),
                "{extra}"
            );
        }
        let none = encode(&checkpoint(2, None));
        assert_eq!(
            edit_checkpoint_messages(&none, MessagesEdit::Remove).unwrap(),
            None
        );
        let twice = Value::Map(vec![
            (
                s("channel_values"),
                Value::Map(vec![(s("messages"), Value::Nil)]),
            ),
            (s("channel_values"), Value::Map(vec![])),
        ]);
        assert_eq!(
            edit_checkpoint_messages(&encode(&twice), MessagesEdit::Remove).unwrap(),
            None
        );
    }
}
