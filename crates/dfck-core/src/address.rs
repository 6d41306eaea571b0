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

/// Resolves `--protect` values the way `--checkpoint` is resolved: each must name exactly
/// one checkpoint of the selected threads (every thread when `threads` is empty), by its id
/// or a unique prefix of it. A value that names nothing or several checkpoints is a usage
/// error, before any work: a checkpoint meant to be kept is never deleted because its id was
/// mistyped.
pub fn protected_checkpoints<'a>(
    store: &dyn Store,
    threads: &[String],
    given: impl IntoIterator<Item = &'a str>,
) -> Result<std::collections::HashSet<String>, crate::error::Error> {
    let mut out = std::collections::HashSet::new();
    let mut given: Vec<&str> = given.into_iter().collect();
    given.sort_unstable();
    for value in given {
        let prefix = value.trim();
        let mut found: Vec<(String, String, String)> = Vec::new();
        if !prefix.is_empty() {
            if threads.is_empty() {
                found = store.checkpoints_with_prefix(prefix, SHOWN_CANDIDATES + 1)?;
            } else {
                for t in threads {
                    for ns in store.namespaces(t)? {
                        for id in store.checkpoint_ids_with_prefix(
                            t,
                            &ns,
                            prefix,
                            SHOWN_CANDIDATES + 1,
                        )? {
                            found.push((t.clone(), ns.clone(), id));
                        }
                    }
                }
            }
        }
        if let Some(exact) = found.iter().find(|(_, _, id)| id == prefix) {
            out.insert(exact.2.clone());
            continue;
        }
        match found.as_slice() {
            [(_, _, id)] => {
                out.insert(id.clone());
            }
            [] => {
                return Err(crate::error::Error::Usage(format!(
                    "--protect '{value}' names no checkpoint of the selected threads (give a checkpoint id, or a unique prefix of one)"
                )));
            }
            many => {
                let mut shown: Vec<String> = many
                    .iter()
                    .take(SHOWN_CANDIDATES)
                    .map(|(t, _, id)| format!("{id} ({t})"))
                    .collect();
                if many.len() > SHOWN_CANDIDATES {
                    shown.push("…".into());
                }
                return Err(crate::error::Error::Usage(format!(
                    "--protect '{value}' names several checkpoints: {}; give more of the id",
                    shown.join(", ")
                )));
            }
        }
    }
    Ok(out)
}
