//! Which threads a command works on: the named ones, checked to exist, or every thread of
//! the store a page at a time ([`for_each_page`]), so that no list of a whole store's
//! threads is ever held; and the "did you mean" of a thread that does not exist.

use super::Store;
use crate::error::StoreError;

/// Thread ids in one page of a whole-store listing.
pub const THREAD_PAGE: usize = 16_384;

/// Hands `f` every thread of a store, a page of at most `size` ids at a time in the
/// store's order, each page read by `page(after, size)` only once the previous one is done
/// (a thread created meanwhile after the last page read is listed too).
pub fn for_each_page<E: From<StoreError>>(
    mut page: impl FnMut(Option<&str>, usize) -> Result<Vec<String>, StoreError>,
    size: usize,
    mut f: impl FnMut(&[String]) -> Result<(), E>,
) -> Result<(), E> {
    let size = size.max(1);
    let mut after: Option<String> = None;
    loop {
        let ids = page(after.as_deref(), size)?;
        let Some(last) = ids.last() else {
            return Ok(());
        };
        if after.as_ref() == Some(last) {
            // A listing that does not move on would go round for ever.
            return Err(StoreError::Query {
                what: "listing threads".into(),
                reason: format!("the page after thread {last} ends with it again"),
            }
            .into());
        }
        f(&ids)?;
        if ids.len() < size {
            return Ok(());
        }
        after = Some(last.clone());
    }
}

/// The threads a command works on: the given ones (each once, in first-seen order), or
/// every thread of the store when none are given.
pub fn select_threads(store: &dyn Store, given: &[String]) -> Result<Vec<String>, StoreError> {
    if !given.is_empty() {
        // Named threads must exist now (a typo is an error, exit 2); one that vanishes later,
        // between this listing and its transaction, is the command's to skip and name.
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for t in given.iter().filter(|t| seen.insert(t.as_str())) {
            if store.namespaces(t)?.is_empty() {
                return Err(thread_not_found(store, t, ""));
            }
            out.push(t.clone());
        }
        return Ok(out);
    }
    let mut v = Vec::new();
    store.scan_thread_ids(&mut |t| {
        v.push(t);
        Ok(())
    })?;
    Ok(v)
}

/// [`StoreError::ThreadNotFound`] for `thread_id`, with the nearest existing thread ids as a
/// "did you mean" ([`StoreError::Suggested`]) when some are close; the thread ids are
/// streamed, never all held.
pub fn thread_not_found(store: &dyn Store, thread_id: &str, ns: &str) -> StoreError {
    let error = StoreError::ThreadNotFound {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: ns.to_owned(),
    };
    let mut best: Vec<String> = Vec::new();
    let scanned = store.scan_thread_ids(&mut |t| {
        best.push(t);
        best = crate::suggest::nearest(thread_id, best.iter().map(String::as_str))
            .into_iter()
            .map(str::to_owned)
            .collect();
        Ok(())
    });
    if scanned.is_err() || best.is_empty() {
        return error;
    }
    StoreError::Suggested {
        error: Box::new(error),
        hint: best.join(", "),
    }
}
