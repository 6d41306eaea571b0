//! Message payloads already validated while one thread is read ([`validated_once`]): a
//! thread's checkpoints repeat its messages (each checkpoint of a full thread stores the whole
//! list, each snapshot of a delta thread too), and bytes equal to a payload validated before
//! are valid again. Kept on the reading thread, for one scope, as copies compared byte for
//! byte (a hash only finds them), up to [`MAX_BYTES`].

use super::CodecError;
use std::cell::RefCell;
use std::collections::HashMap;

/// Shorter payloads are validated each time: looking them up costs about as much.
const MIN_LEN: usize = 128;

/// The most payload bytes one scope keeps: later payloads are validated each time.
const MAX_BYTES: usize = 8 << 20;

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
}

thread_local! {
    static SEEN: RefCell<Option<Seen>> = const { RefCell::new(None) };
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
/// passes.
pub(super) fn validate_once(
    payload: &[u8],
    depth: usize,
    validate: impl FnOnce() -> Result<(), CodecError>,
) -> Result<(), CodecError> {
    if payload.len() < MIN_LEN {
        return validate();
    }
    let hash = xxhash_rust::xxh3::xxh3_64(payload);
    let known = SEEN.with(|s| {
        let mut s = s.borrow_mut();
        let seen = s.as_mut()?;
        Some(seen.entry(hash, payload).is_some_and(|d| *d >= depth))
    });
    match known {
        None => validate(),
        Some(true) => Ok(()),
        Some(false) => {
            // The borrow is released: the payload's own ext values look themselves up.
            validate()?;
            SEEN.with(|s| {
                let mut s = s.borrow_mut();
                let Some(seen) = s.as_mut() else {
                    return;
                };
                if let Some(d) = seen.entry(hash, payload) {
                    *d = (*d).max(depth);
                } else if seen.bytes + payload.len() <= MAX_BYTES {
                    seen.bytes += payload.len();
                    seen.by_hash
                        .entry(hash)
                        .or_default()
                        .push((payload.into(), depth));
                }
            });
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

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
            // Deeper than it was validated from, and other bytes: validated.
            assert!(run(&calls, &a, 4, true));
            assert!(run(&calls, &b, 1, true));
            assert_eq!(calls.get(), 3);
            // A failed validation is not remembered.
            let c = vec![9u8; MIN_LEN];
            assert!(!run(&calls, &c, 1, false));
            assert!(!run(&calls, &c, 1, false));
            assert_eq!(calls.get(), 5);
            // A scope inside shares this one.
            validated_once(|| assert!(run(&calls, &b, 1, true)));
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
    }

    #[test]
    fn a_scope_keeps_at_most_its_bytes() {
        let calls = Cell::new(0);
        let big = vec![1u8; MAX_BYTES];
        let small = vec![2u8; MIN_LEN];
        validated_once(|| {
            assert!(run(&calls, &big, 1, true));
            assert!(run(&calls, &small, 1, true));
            assert!(run(&calls, &small, 1, true));
            assert!(run(&calls, &big, 1, true));
        });
        assert_eq!(calls.get(), 3, "the small payload no longer fits");
    }
}
