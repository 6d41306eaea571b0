//! LangGraph's `EncryptedSerializer.from_pycryptodome_aes`: AES-EAX with a 16-byte nonce
//! and a 16-byte tag, the stored tag `<inner>+aes`, the body nonce ‖ tag ‖ ciphertext; the
//! process's key (docs/security.md), and opening and sealing stored values with it.
//!
//! The cipher is RustCrypto's (`aes`, `eax`); nothing here is hand-written cryptography.

use super::CodecError;
use eax::aead::{AeadInPlace, KeyInit};
use std::path::Path;
use std::sync::OnceLock;
use thiserror::Error;

/// The variable LangGraph reads the key from (its UTF-8 bytes are the key).
pub const KEY_ENV: &str = "LANGGRAPH_AES_KEY";
/// The cipher name LangGraph's AES cipher puts after `+` in the stored tag.
pub const AES: &str = "aes";
/// Nonce and tag lengths at the front of an encrypted body.
const NONCE_LEN: usize = 16;
const TAG_LEN: usize = 16;

/// An AES key of 16, 24 or 32 bytes. Its bytes are never displayed or debug-printed.
#[derive(Clone)]
pub struct AesKey(Vec<u8>);

impl std::fmt::Debug for AesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AesKey({} bytes)", self.0.len())
    }
}

/// Why a key could not be taken.
#[derive(Debug, Error)]
pub enum KeyError {
    /// The key has a length AES does not take.
    #[error("{source_name}: the AES key is {len} bytes; it must be exactly 16, 24 or 32 bytes")]
    Length {
        /// Where the key came from (`--aes-key-file PATH`, `LANGGRAPH_AES_KEY`).
        source_name: String,
        /// Its length.
        len: usize,
    },
    /// The key file could not be read.
    #[error("--aes-key-file {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        reason: String,
    },
}

impl AesKey {
    /// A key from raw bytes; `source_name` names where they came from in the error.
    pub fn new(bytes: Vec<u8>, source_name: &str) -> Result<Self, KeyError> {
        match bytes.len() {
            16 | 24 | 32 => Ok(AesKey(bytes)),
            len => Err(KeyError::Length {
                source_name: source_name.to_owned(),
                len,
            }),
        }
    }

    /// The key as LangGraph reads `LANGGRAPH_AES_KEY`: the variable's UTF-8 bytes.
    pub fn from_env_value(value: &str) -> Result<Self, KeyError> {
        Self::new(value.as_bytes().to_vec(), KEY_ENV)
    }

    /// The key in a file: its bytes less one trailing newline (`\n` or `\r\n`).
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let mut bytes = std::fs::read(path).map_err(|e| KeyError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        Self::new(bytes, &format!("--aes-key-file {}", path.display()))
    }

    /// Decrypts an `EncryptedSerializer` body (nonce ‖ tag ‖ ciphertext).
    pub fn decrypt(&self, body: &[u8]) -> Result<Vec<u8>, CodecError> {
        if body.len() < NONCE_LEN + TAG_LEN {
            return Err(CodecError::Decrypt(format!(
                "encrypted body is {} bytes, shorter than its 32-byte nonce and tag",
                body.len()
            )));
        }
        let (nonce, rest) = body.split_at(NONCE_LEN);
        let (tag, ciphertext) = rest.split_at(TAG_LEN);
        let mut buf = ciphertext.to_vec();
        let failed = |_| {
            CodecError::Decrypt(
                "the AES-EAX tag does not match: a wrong key, or a damaged value".to_owned(),
            )
        };
        macro_rules! open_with {
            ($aes:ty) => {{
                let c = eax::Eax::<$aes>::new_from_slice(&self.0)
                    .map_err(|_| CodecError::Decrypt("key length".into()))?;
                c.decrypt_in_place_detached(nonce.into(), b"", &mut buf, tag.into())
                    .map_err(failed)?
            }};
        }
        match self.0.len() {
            16 => open_with!(aes::Aes128),
            24 => open_with!(aes::Aes192),
            _ => open_with!(aes::Aes256),
        }
        Ok(buf)
    }

    /// Encrypts `plain` with a fresh random nonce, as LangGraph's cipher does.
    pub fn encrypt(&self, plain: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::getrandom(&mut nonce)
            .map_err(|e| CodecError::Encrypt(format!("no random nonce: {e}")))?;
        let mut buf = plain.to_vec();
        macro_rules! seal_with {
            ($aes:ty) => {{
                let c = eax::Eax::<$aes>::new_from_slice(&self.0)
                    .map_err(|_| CodecError::Encrypt("key length".into()))?;
                c.encrypt_in_place_detached((&nonce).into(), b"", &mut buf)
                    .map_err(|_| CodecError::Encrypt("encryption failed".into()))?
            }};
        }
        let tag = match self.0.len() {
            16 => seal_with!(aes::Aes128),
            24 => seal_with!(aes::Aes192),
            _ => seal_with!(aes::Aes256),
        };
        let mut out = Vec::with_capacity(NONCE_LEN + TAG_LEN + buf.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&tag);
        out.extend_from_slice(&buf);
        Ok(out)
    }
}

static KEY: OnceLock<AesKey> = OnceLock::new();
static ENCRYPT_ALL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--encrypt-all`: every value dfck writes is encrypted, plaintext ones included (the
/// command line sets it once, with a key installed).
pub fn set_encrypt_all(on: bool) {
    ENCRYPT_ALL.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `--encrypt-all` is on.
pub fn encrypt_all() -> bool {
    ENCRYPT_ALL.load(std::sync::atomic::Ordering::Relaxed)
}

/// Makes `key` the process's key (the command line does this once, before any read).
/// A second call keeps the first key.
pub fn install_key(key: AesKey) {
    let _ = KEY.set(key);
}

/// The process's key, when one was installed.
pub fn key() -> Option<&'static AesKey> {
    KEY.get()
}

/// How a stored value is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protection {
    /// Plaintext (`msgpack`, `json`, …).
    Plain,
    /// `EncryptedSerializer` with AES (`<inner>+aes`).
    Aes,
}

impl Protection {
    /// The protection a stored tag says (`msgpack+aes` → [`Protection::Aes`]). Other
    /// ciphers count as plain here: dfck cannot read them at all.
    pub fn of_tag(tag: Option<&str>) -> Self {
        match tag.and_then(|t| t.split_once('+')) {
            Some((_, AES)) => Protection::Aes,
            _ => Protection::Plain,
        }
    }

    /// Is this encrypted?
    pub fn is_encrypted(self) -> bool {
        self == Protection::Aes
    }

    /// The protection of a value dfck writes from a value stored with this one: the same,
    /// or [`Protection::Aes`] under `--encrypt-all`.
    pub fn for_write(self) -> Self {
        if encrypt_all() { Protection::Aes } else { self }
    }

    /// Seals a serialized value `(tag, plain)` for storage: the same pair when plain, or
    /// `(<tag>+aes, nonce ‖ tag ‖ ciphertext)` under the process's key (a fresh nonce).
    pub fn seal(self, tag: &str, plain: Vec<u8>) -> Result<(String, Vec<u8>), CodecError> {
        match self {
            Protection::Plain => Ok((tag.to_owned(), plain)),
            Protection::Aes => {
                let key = key().ok_or_else(|| CodecError::UnsupportedSerializer(aes_tag(tag)))?;
                Ok((aes_tag(tag), key.encrypt(&plain)?))
            }
        }
    }

    /// [`Protection::seal`] of a stored pair whose tag may be missing (a NULL tag is never
    /// encrypted: LangGraph never writes one) or already sealed (kept as it is).
    pub fn seal_stored(
        self,
        tag: Option<String>,
        bytes: Vec<u8>,
    ) -> Result<(Option<String>, Vec<u8>), CodecError> {
        match tag {
            Some(t) if self.is_encrypted() && !t.contains('+') => {
                let (t, b) = self.seal(&t, bytes)?;
                Ok((Some(t), b))
            }
            other => Ok((other, bytes)),
        }
    }
}

fn aes_tag(tag: &str) -> String {
    format!("{tag}+{AES}")
}

/// A stored value with its encryption taken off.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The serializer tag under the encryption (`msgpack` for `msgpack+aes`).
    pub tag: Option<String>,
    /// The plaintext bytes.
    pub bytes: bytes::Bytes,
    /// How it was stored.
    pub protection: Protection,
}

/// Takes a stored value's encryption off, as `EncryptedSerializer.loads_typed` does: a tag
/// without `+` is plaintext and passes through; `<inner>+aes` is decrypted with the process's
/// key; without a key, or with another cipher, the value is refused.
pub fn open(tag: Option<&str>, bytes: bytes::Bytes) -> Result<Opened, CodecError> {
    let Some((inner, cipher)) = tag.and_then(|t| t.split_once('+')) else {
        return Ok(Opened {
            tag: tag.map(str::to_owned),
            bytes,
            protection: Protection::Plain,
        });
    };
    let (Some(key), AES) = (key(), cipher) else {
        return Err(CodecError::UnsupportedSerializer(
            tag.unwrap_or_default().to_owned(),
        ));
    };
    Ok(Opened {
        tag: Some(inner.to_owned()),
        bytes: key.decrypt(&bytes)?.into(),
        protection: Protection::Aes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_failures() {
        for len in [16, 24, 32] {
            let key = AesKey::new(vec![7u8; len], "test").unwrap();
            let sealed = key.encrypt(b"hello").unwrap();
            assert_eq!(sealed.len(), 32 + 5);
            assert_eq!(key.decrypt(&sealed).unwrap(), b"hello");
            let other = AesKey::new(vec![8u8; len], "test").unwrap();
            assert!(matches!(
                other.decrypt(&sealed),
                Err(CodecError::Decrypt(_))
            ));
            assert!(matches!(
                key.decrypt(&sealed[..20]),
                Err(CodecError::Decrypt(_))
            ));
            let mut bad = sealed.clone();
            bad[40 - 4] ^= 1;
            assert!(key.decrypt(&bad).is_err());
        }
        assert!(AesKey::new(vec![1; 15], "x").is_err());
        assert_eq!(
            format!("{:?}", AesKey::new(vec![b'k'; 16], "x").unwrap()),
            "AesKey(16 bytes)"
        );
    }

    /// A vector from pycryptodome: `AES.new(b"0123456789abcdef", AES.MODE_EAX,
    /// nonce=bytes(16)).encrypt_and_digest(b"\x90")`.
    #[test]
    fn pycryptodome_vector() {
        let key = AesKey::new(b"0123456789abcdef".to_vec(), "x").unwrap();
        let body = hex_bytes(PYCRYPTODOME_BODY);
        assert_eq!(key.decrypt(&body).unwrap(), vec![0x90]);
    }

    const PYCRYPTODOME_BODY: &str =
        "000000000000000000000000000000000a1710932a76888a5440c73756af48ca02";

    fn hex_bytes(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
