//! Message payloads already validated while one thread is read ([`validated_once`]): a
//! thread's checkpoints repeat its messages (each checkpoint of a full thread stores the whole
//! list, each snapshot of a delta thread too), and bytes equal to a payload validated before
//! are valid again. Kept on the reading thread, for one scope, as copies compared byte for
//! byte (a hash with a per-process seed only finds them), up to [`MAX_BYTES`] a scope, what
//! they are kept in counted.

use super::CodecError;
use std::cell::RefCell;
use std::collections::HashMap;

/// Shorter payloads are validated each time: looking them up costs about as much.
const MIN_LEN: usize = 128;

/// The most bytes one scope keeps, each payload counted with [`ENTRY_BYTES`]: later
/// payloads are validated each time.
const MAX_BYTES: usize = 8 << 20;

/// What keeping one payload costs beside its bytes (its box, its list, its table slot).
const ENTRY_BYTES: usize = 160;

/// The most payloads kept under one hash: equal hashes beyond it (which a crafted store
/// could aim at) are validated each time, so a look-up never scans a long list.
const SAME_HASH: usize = 4;

/// A payload kept, with the deepest nesting depth it was validated from (a payload valid
/// from one depth is valid from any shallower one).
type Kept = (Box<[u8]>, usize);

/// The payloads of one scope.
#[derive(Default)]
struct Seen {
    /// xxh3 of a payload → each payload of that hash.
    by_hash: HashMap<u64, Vec<Kept>>,
    bytes: usize,
}

impl Seen {
    fn entry(&mut self, hash: u64, payload: &[u8]) -> Option<&mut usize> {
        let same = self.by_hash.get_mut(&hash)?;
        same.iter_mut()
            .find(|(p, _)| **p == *payload)
            .map(|(_, depth)| depth)
    }

    /// Remembers `payload`, validated from `depth`, where it fits.
    fn keep(&mut self, hash: u64, payload: &[u8], depth: usize) {
        if let Some(d) = self.entry(hash, payload) {
            *d = (*d).max(depth);
            return;
        }
        let cost = payload.len() + ENTRY_BYTES;
        if self.bytes + cost > MAX_BYTES {
            return;
        }
        let same = self.by_hash.entry(hash).or_default();
        if same.len() < SAME_HASH {
            same.push((payload.into(), depth));
            self.bytes += cost;
        }
    }
}

thread_local! {
    static SEEN: RefCell<Option<Seen>> = const { RefCell::new(None) };
}

/// The process's hash seed, from the standard library's random keys.
fn seed() -> u64 {
    use std::hash::BuildHasher;
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u8))
}

/// Runs `f` with the message payloads it validates remembered until it returns (a scope
/// inside another shares the outer one).
pub fn validated_once<R>(f: impl FnOnce() -> R) -> R {
    /// Ends the scope however `f` ends.
    struct End(bool);
    impl Drop for End {
        fn drop(&mut self) {
            if self.0 {
                SEEN.with(|s| *s.borrow_mut() = None);
            }
        }
    }
    let opened = SEEN.with(|s| {
        let mut s = s.borrow_mut();
        let open = s.is_none();
        if open {
            *s = Some(Seen::default());
        }
        open
    });
    let _end = End(opened);
    f()
}

/// `validate()` of a message payload found at nesting depth `depth`, unless equal bytes
/// were validated from that depth or a deeper one in the current scope; remembered when it
/// passes and fits.
pub(super) fn validate_once(
    payload: &[u8],
    depth: usize,
    validate: impl FnOnce() -> Result<(), CodecError>,
) -> Result<(), CodecError> {
    if payload.len() < MIN_LEN || SEEN.with(|s| s.borrow().is_none()) {
        return validate();
    }
    let hash = xxhash_rust::xxh3::xxh3_64_with_seed(payload, seed());
    let known = SEEN.with(|s| {
        let mut s = s.borrow_mut();
        let seen = s.as_mut()?;
        Some(seen.entry(hash, payload).is_some_and(|d| *d >= depth))
    });
    match known {
        None => validate(),
        Some(true) => {
            #[cfg(test)]
            tests::HITS.with(|h| h.set(h.get() + 1));
            Ok(())
        }
        Some(false) => {
            // The borrow is released: the payload's own ext values look themselves up.
            validate()?;
            SEEN.with(|s| {
                if let Some(seen) = s.borrow_mut().as_mut() {
                    seen.keep(hash, payload, depth);
                }
            });
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Depth, Ext, Value, decode_checkpoint, decode_shared, encode};
    use bytes::Bytes;
    use std::cell::Cell;

    thread_local! {
        /// Validations `validate_once` skipped on this thread.
        pub(super) static HITS: Cell<u32> = const { Cell::new(0) };
    }

    /// Counts the validations `validate_once` runs; `ok` says how they end.
    fn run(calls: &Cell<u32>, payload: &[u8], depth: usize, ok: bool) -> bool {
        validate_once(payload, depth, || {
            calls.set(calls.get() + 1);
            if ok {
                Ok(())
            } else {
                Err(CodecError::TooDeep { offset: 0 })
            }
        })
        .is_ok()
    }

    #[test]
    fn equal_bytes_are_validated_once_a_scope_from_as_deep() {
        let calls = Cell::new(0);
        let a = vec![7u8; MIN_LEN];
        let mut b = a.clone();
        b[MIN_LEN - 1] = 8;
        validated_once(|| {
            assert!(run(&calls, &a, 3, true));
            assert!(run(&calls, &a, 3, true));
            assert!(run(&calls, &a, 2, true));
            assert_eq!(calls.get(), 1, "equal bytes, as deep or shallower");
            // Deeper than it was validated from, and other bytes: validated; then the
            // deeper depth is remembered.
            assert!(run(&calls, &a, 4, true));
            assert!(run(&calls, &a, 4, true));
            assert!(run(&calls, &b, 1, true));
            assert_eq!(calls.get(), 3);
            // A failed validation is not remembered.
            let c = vec![9u8; MIN_LEN];
            assert!(!run(&calls, &c, 1, false));
            assert!(!run(&calls, &c, 1, false));
            assert_eq!(calls.get(), 5);
            // A scope inside shares this one, and its end does not end this one.
            validated_once(|| assert!(run(&calls, &b, 1, true)));
            assert!(run(&calls, &a, 4, true));
            assert_eq!(calls.get(), 5);
            // Short payloads are validated each time.
            assert!(run(&calls, &a[..MIN_LEN - 1], 1, true));
            assert!(run(&calls, &a[..MIN_LEN - 1], 1, true));
            assert_eq!(calls.get(), 7);
        });
        // Outside a scope (and after one ended), every validation runs.
        assert!(run(&calls, &a, 1, true));
        assert!(run(&calls, &a, 1, true));
        assert_eq!(calls.get(), 9);
        // A scope that panics is ended all the same.
        let caught = std::panic::catch_unwind(|| {
            validated_once(|| {
                assert!(run(&Cell::new(0), &a, 1, true));
                panic!("inside the scope");
            })
        });
        assert!(caught.is_err());
        assert!(run(&calls, &a, 1, true));
        assert_eq!(calls.get(), 10);
    }

    #[test]
    fn a_scope_keeps_at_most_its_bytes_and_a_few_payloads_a_hash() {
        let mut seen = Seen::default();
        let big = vec![1u8; MAX_BYTES - 2 * ENTRY_BYTES - MIN_LEN];
        seen.keep(1, &big, 1);
        seen.keep(2, &[2u8; MIN_LEN], 1);
        seen.keep(3, &[3u8; MIN_LEN], 1);
        assert!(seen.entry(1, &big).is_some() && seen.entry(2, &[2u8; MIN_LEN]).is_some());
        assert!(seen.entry(3, &[3u8; MIN_LEN]).is_none(), "no room left");
        let mut seen = Seen::default();
        for i in 0..=SAME_HASH as u8 {
            seen.keep(7, &[i; MIN_LEN], 1);
        }
        assert!(seen.entry(7, &[0u8; MIN_LEN]).is_some());
        assert!(seen.entry(7, &[SAME_HASH as u8; MIN_LEN]).is_none());
        assert_eq!(seen.by_hash.len(), 1);
    }

    /// A message payload: `depth` nested lists, padded past [`MIN_LEN`].
    fn message(depth: usize) -> Value {
        let mut v = Value::Str("x".repeat(MIN_LEN));
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        let raw = Bytes::from(encode(&v));
        Value::Ext(Box::new(Ext::decoded(
            crate::codec::EXT_PYDANTIC_V2,
            raw,
            None,
        )))
    }

    /// A checkpoint whose `messages` holds `items`.
    fn checkpoint(items: Vec<Value>) -> Bytes {
        let s = |x: &str| Value::Str(x.into());
        let values = Value::Map(vec![(s("messages"), Value::Array(items))]);
        Bytes::from(encode(&Value::Map(vec![(s("channel_values"), values)])))
    }

    /// Both decoders skip a repeated message inside a scope, and give what they give outside
    /// one, also where the repeat sits too deep to be valid.
    #[test]
    fn decoding_in_a_scope_skips_repeats_and_decides_as_outside_one() {
        let m = message(3);
        // The deepest message valid in the list; two lists deeper, it is too deep.
        let n = (0..crate::codec::MAX_DEPTH)
            .rev()
            .find(|&n| decode_shared(&checkpoint(vec![message(n)])).is_ok())
            .unwrap_or_default();
        let shallow = message(n);
        let deep = Value::Array(vec![Value::Array(vec![shallow.clone()])]);
        let cases = [
            checkpoint(vec![m.clone(), m.clone(), m]),
            checkpoint(vec![shallow.clone(), deep.clone()]),
            checkpoint(vec![shallow, Value::Array(vec![deep])]),
        ];
        let shallow_depth = Depth::Shallow { keep: &[] };
        for (i, bytes) in cases.iter().enumerate() {
            let outside = (
                decode_shared(bytes).map_err(|e| e.to_string()),
                decode_checkpoint(bytes, shallow_depth).map_err(|e| e.to_string()),
            );
            HITS.with(|h| h.set(0));
            let inside = validated_once(|| {
                (
                    decode_shared(bytes).map_err(|e| e.to_string()),
                    decode_checkpoint(bytes, shallow_depth).map_err(|e| e.to_string()),
                )
            });
            assert_eq!(inside, outside, "case {i}");
            if i == 0 {
                assert!(outside.0.is_ok() && outside.1.is_ok());
                // Full: the second and third; shallow: all three (the full decode kept it).
                assert_eq!(HITS.with(Cell::get), 5);
            } else {
                assert!(outside.0.is_err() && outside.1.is_err(), "case {i}");
            }
        }
    }
}
