//! Addressing threads and checkpoints as people type them: a checkpoint id may be given by a
//! unique prefix, and an unknown thread comes back with the nearest thread ids.

use crate::error::StoreError;
use crate::store::Store;

/// How many candidates an ambiguous prefix lists.
const SHOWN_CANDIDATES: usize = 8;

/// The full id of the checkpoint of (thread, ns) that `given` names: the id itself, or the one
/// id it is a prefix of. Unknown → [`StoreError::CheckpointNotFound`] (with a "did you mean" for
/// a thread without checkpoints); ambiguous → [`StoreError::AmbiguousCheckpoint`] listing the
/// candidates.
pub fn checkpoint_id(
    store: &dyn Store,
    thread_id: &str,
    ns: &str,
    given: &str,
) -> Result<String, StoreError> {
    let given = given.trim();
    let found = store.checkpoint_ids_with_prefix(thread_id, ns, given, SHOWN_CANDIDATES + 1)?;
    if found.iter().any(|id| id == given) {
        return Ok(given.to_owned());
    }
    match found.as_slice() {
        [only] => Ok(only.clone()),
        [] => {
            if store.head_id(thread_id, ns)?.is_none() {
                return Err(crate::store::thread_not_found(store, thread_id, ns));
            }
            Err(StoreError::CheckpointNotFound {
                thread_id: thread_id.to_owned(),
                checkpoint_ns: ns.to_owned(),
                checkpoint_id: given.to_owned(),
            })
        }
        many => {
            let mut candidates = many
                .iter()
                .take(SHOWN_CANDIDATES)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if many.len() > SHOWN_CANDIDATES {
                candidates.push_str(", …");
            }
            Err(StoreError::AmbiguousCheckpoint {
                thread_id: thread_id.to_owned(),
                checkpoint_ns: ns.to_owned(),
                prefix: given.to_owned(),
                candidates,
            })
        }
    }
}

/// Adds a "did you mean" to a thread-not-found error; other errors pass unchanged.
pub fn with_thread_hint(store: &dyn Store, e: StoreError) -> StoreError {
    match e {
        StoreError::ThreadNotFound {
            thread_id,
            checkpoint_ns,
        } => crate::store::thread_not_found(store, &thread_id, &checkpoint_ns),
        other => other,
    }
}

/// [`with_thread_hint`] for a command's error.
pub fn hint_error(store: &dyn Store, e: crate::error::Error) -> crate::error::Error {
    match e {
        crate::error::Error::Store(e) => crate::error::Error::Store(with_thread_hint(store, e)),
        other => other,
    }
}
