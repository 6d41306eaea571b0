//! Codec: LangGraph's serializer tags, msgpack with ext codes 0–7 (byte-exact round trip),
//! the JSON rendering of decoded values fixed by the CLI contract, what a stored value
//! makes LangGraph import (`imports`), and message payloads validated once a load (`seen`).

pub mod aes;
mod decode;
mod encode;
mod error;
pub mod imports;
mod json;
pub mod pyjson;
mod scan;
mod seen;
mod value;

pub use decode::{
    Depth, MAX_DEPTH, decode, decode_checkpoint, decode_shared, decode_value_shallow, stand_in,
};
pub use encode::{encode, write_array_header, write_ext_header, write_map_header, write_value};
pub use error::CodecError;
pub use json::{Rendered, RenderedMap, from_json, to_json};
pub use scan::{
    MessagesEdit, checkpoint_channel_sizes, checkpoint_messages_slice, edit_checkpoint_messages,
    ext_code, is_document, top_level_str,
};
pub use seen::validated_once;
pub use value::*;

use bytes::Bytes;

/// Decodes a `(type, bytes)` pair the way `JsonPlusSerializer.loads_typed` does.
///
/// `msgpack`, `null`, `bytes`, `bytearray` and legacy `json` are read, and `<tag>+aes`
/// (an `EncryptedSerializer` with AES) when the process has a key ([`aes::install_key`]);
/// `pickle`, other ciphers and `+aes` without a key are refused with
/// [`CodecError::UnsupportedSerializer`], a failed decryption is [`CodecError::Decrypt`].
pub fn decode_typed(tag: Option<&str>, bytes: impl Into<Bytes>) -> Result<Value, CodecError> {
    decode_typed_checkpoint(tag, bytes, Depth::Full)
}

/// [`decode_typed`] of a checkpoint dict at a [`Depth`] (msgpack only; the other
/// serializers hold no large channel values worth skipping).
pub fn decode_typed_checkpoint(
    tag: Option<&str>,
    bytes: impl Into<Bytes>,
    depth: Depth<'_>,
) -> Result<Value, CodecError> {
    let opened = aes::open(tag, bytes.into())?;
    let (tag, bytes) = (opened.tag.as_deref(), opened.bytes);
    match tag {
        Some("msgpack") => decode_checkpoint(&bytes, depth),
        Some("null") => Ok(Value::Nil),
        Some("bytes") | Some("bytearray") => Ok(Value::Bin(bytes.to_vec())),
        Some("json") => {
            let j: serde_json::Value = serde_json::from_slice(&bytes)
                .map_err(|e| CodecError::InvalidJson(e.to_string()))?;
            Ok(from_json(&j))
        }
        Some(other) => Err(CodecError::UnsupportedSerializer(other.to_owned())),
        None => Err(CodecError::UnsupportedSerializer("NULL".to_owned())),
    }
}

/// True when a serializer tag can be decoded without Python: the plain tags, and
/// `<tag>+aes` of one of them when the process has a key.
pub fn tag_supported(tag: Option<&str>) -> bool {
    let plain = |t: Option<&str>| {
        matches!(
            t,
            Some("msgpack") | Some("null") | Some("bytes") | Some("bytearray") | Some("json")
        )
    };
    match tag.and_then(|t| t.split_once('+')) {
        Some((inner, aes::AES)) => aes::key().is_some() && plain(Some(inner)),
        Some(_) => false,
        None => plain(tag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    const HUMAN: &str = "91c78e0594bd6c616e67636861696e5f636f72652e6d657373616765732e68756d616eac48756d616e4d65737361676586a7636f6e74656e74a6706c65617365b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a568756d616ea46e616d65c0a26964a3682d70b36d6f64656c5f76616c69646174655f6a736f6e";

    #[test]
    fn human_message_round_trips_and_renders() {
        let b = hex(HUMAN);
        let v = decode(&b).unwrap();
        assert_eq!(encode(&v), b);
        let j = to_json(&v);
        assert_eq!(
            j.to_string(),
            r#"[{"$class":"langchain_core.messages.human.HumanMessage","content":"please","additional_kwargs":{},"response_metadata":{},"type":"human","name":null,"id":"h-p"}]"#
        );
    }

    #[test]
    fn minimal_widths() {
        for (v, h) in [
            (Value::Int(2025), "cd07e9"),
            (Value::Int(-33), "d0df"),
            (Value::Int(-1), "ff"),
            (Value::Int(127), "7f"),
            (Value::Int(128), "cc80"),
            (Value::Array(vec![]), "90"),
        ] {
            assert_eq!(encode(&v), hex(h));
            assert_eq!(decode(&hex(h)).unwrap(), v);
        }
        let snap = hex("d40790");
        let v = decode(&snap).unwrap();
        assert!(v.is_delta_snapshot());
        assert_eq!(encode(&v), snap);
        let m = hex("8101a161");
        let v = decode(&m).unwrap();
        assert_eq!(to_json(&v).to_string(), r#"{"$map":[[1,"a"]]}"#);
        assert_eq!(encode(&v), m);
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        let b = hex(HUMAN);
        for cut in [1, 3, 10, b.len() - 1] {
            assert!(decode(&b[..cut]).is_err());
        }
        assert!(decode(&hex("c1")).is_err());
        assert!(decode(&hex("9090")).is_err());
        assert!(decode(&hex("a2ff00")).is_err());
        // A hostile length must not allocate.
        assert!(decode(&hex("dd7fffffff")).is_err());
        let deep = vec![0x91u8; 10_000];
        assert!(decode(&deep).is_err());
    }

    #[test]
    fn tags() {
        assert_eq!(decode_typed(Some("null"), &b""[..]).unwrap(), Value::Nil);
        assert!(matches!(
            decode_typed(Some("pickle"), &b"x"[..]),
            Err(CodecError::UnsupportedSerializer(t)) if t == "pickle"
        ));
        assert!(matches!(
            decode_typed(Some("msgpack+aes"), &b"x"[..]),
            Err(CodecError::UnsupportedSerializer(t)) if t == "msgpack+aes"
        ));
        assert_eq!(
            decode_typed(Some("bytes"), &b"ab"[..]).unwrap(),
            Value::Bin(b"ab".to_vec())
        );
    }

    #[test]
    fn overwrite_forms() {
        let ow = Value::new_ext(
            EXT_CONSTRUCTOR_KW_ARGS,
            Value::Array(vec![
                Value::Str("langgraph.types".into()),
                Value::Str("Overwrite".into()),
                Value::Map(vec![
                    (Value::Str("value".into()), Value::Array(vec![])),
                    (
                        Value::Str("type".into()),
                        Value::Str("__overwrite__".into()),
                    ),
                ]),
            ]),
        );
        assert_eq!(ow.overwrite_value(), Some(&Value::Array(vec![])));
        let d = Value::Map(vec![(Value::Str("__overwrite__".into()), Value::Nil)]);
        assert_eq!(d.overwrite_value(), Some(&Value::Nil));
    }
}
