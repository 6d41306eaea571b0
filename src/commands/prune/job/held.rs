//! A prune verified from the namespace it planned. Every prune's verification checks that the
//! deletions took exactly the planned rows (the counts the deletion statements returned: the
//! planned checkpoints, the writes stored on them and the orphan writes counted before).
//! Where the plan held every value of a namespace and makes no new root, the deletions only
//! took rows away, by key: the states of what is left are then checked from the held rows
//! without those checkpoints, instead of reading the namespace back and decoding it again
//! (docs/prune.md, "Verified before commit"). A plan made on the planner's thread beside the
//! writes (`plan_held`) checks what is left there, and drops the rows there: the connection's
//! thread, which writes, only reads the outcome. On PostgreSQL, orphan blobs are those no
//! remaining checkpoint's `channel_versions` names, the same match the reads use, so no blob
//! a kept checkpoint reads is deleted; their count is not checked.

use super::{NsWork, Pruned, Work, compare_states, contaminated, fingerprints, newest_id};
use dfck_core::model::thread::LoadedThread;
use dfck_core::store::Store;
use dfck_core::write::Refusal;
use std::collections::HashSet;

/// How a namespace's verification gets what its deletions leave.
pub(super) enum Held {
    /// Read back inside the transaction.
    No,
    /// Every value held: the namespace as planned until apply [`settle`]s it into what the
    /// deletions leave.
    Rows(LoadedThread),
    /// What the deletions leave, checked when it was planned ([`check_ahead`]): the outcome.
    Checked(Result<(), Refusal>),
}

/// `t` without the checkpoints `ns` deletes.
fn left(ns: &NsWork, t: LoadedThread) -> LoadedThread {
    let gone: HashSet<&str> = ns.delete.iter().map(String::as_str).collect();
    t.without(&gone)
}

/// Turns each held namespace of `work` into what its deletions leave.
pub(super) fn settle(work: &mut Work) {
    let Work::Checkpoints(namespaces) = work else {
        return;
    };
    for ns in namespaces {
        ns.held = match std::mem::replace(&mut ns.held, Held::No) {
            Held::Rows(t) => Held::Rows(left(ns, t)),
            other => other,
        };
    }
}

/// Checks now, for each held namespace of `work`, what its deletions will leave, and keeps
/// only the outcome ([`Held::Checked`]): for a plan made on the planner's thread, so the rows
/// are checked and dropped there. Pure: what is left is the held rows without the planned
/// checkpoints, whenever it is checked.
pub(super) fn check_ahead(store: &dyn Store, work: &mut Work) {
    let Work::Checkpoints(namespaces) = work else {
        return;
    };
    for ns in namespaces {
        if let Held::Rows(t) = std::mem::replace(&mut ns.held, Held::No) {
            let after = left(ns, t);
            ns.held = Held::Checked(check(store, ns, &after));
        }
    }
}

/// The states of what `ns`'s deletions leave (`after`): no kept checkpoint lost its parent,
/// each shows the state it showed, the latest state is unchanged, and no kept checkpoint
/// newly replays another branch's writes.
pub(super) fn check(store: &dyn Store, ns: &NsWork, after: &LoadedThread) -> Result<(), Refusal> {
    let fail = |what: String| Err(Refusal(format!("verification failed: {what}")));
    if let Some(n) = after
        .nodes
        .iter()
        .find(|n| n.parent.is_some() && n.parent_index.is_none())
    {
        return fail(format!("kept checkpoint {} lost its parent", n.id));
    }
    let shown = fingerprints(store, after, ns.reducer)?;
    compare_states(&ns.kept, &shown)?;
    // What LangGraph resumes from shows the same conversation.
    let now = newest_id(after).and_then(|id| shown.get(id).copied());
    if now != ns.latest {
        return fail(format!(
            "the latest state (get_state without a checkpoint id, now at {}) would change",
            newest_id(after).unwrap_or("no checkpoint")
        ));
    }
    // The fork analysis judges a replay by its siblings: deleting one must not leave a kept
    // checkpoint looking contaminated.
    if let Some(id) = contaminated(after)
        .into_iter()
        .find(|id| !ns.contaminated.contains(id))
    {
        return fail(format!(
            "the deletion would leave {id} replaying writes no kept sibling owns"
        ));
    }
    Ok(())
}

/// Whether every namespace of `work` is verified from its held rows.
pub(super) fn in_memory(work: &Work) -> bool {
    match work {
        Work::Whole => false,
        Work::Checkpoints(namespaces) => namespaces.iter().all(|ns| !matches!(ns.held, Held::No)),
    }
}

/// That the deletions took exactly the planned checkpoints, the writes stored on them and the
/// orphan writes counted before (`Err` says what differs).
pub(super) fn counted(namespaces: &[NsWork], done: &Pruned) -> Result<(), String> {
    let checkpoints: u64 = namespaces.iter().map(|ns| ns.delete.len() as u64).sum();
    let writes: u64 =
        namespaces.iter().map(|ns| ns.writes_deleted).sum::<u64>() + done.orphans_before.writes;
    let deleted = &done.deleted;
    if (deleted.checkpoints, deleted.writes) != (checkpoints, writes) {
        return Err(format!(
            "{} checkpoints and {} writes deleted where the plan deletes {checkpoints} and {writes}",
            deleted.checkpoints, deleted.writes
        ));
    }
    Ok(())
}

/// About the bytes a held namespace keeps in memory until it is verified: its rows as read
/// (on PostgreSQL with their blobs) and its writes, twice for their decoded form.
pub(super) fn held_bytes(ns: &NsWork) -> usize {
    let Held::Rows(t) = &ns.held else {
        return 0;
    };
    let read: u64 = t
        .nodes
        .iter()
        .map(|n| n.read_bytes + n.writes.iter().map(|w| w.value.len() as u64).sum::<u64>())
        .sum();
    usize::try_from(read.saturating_mul(2)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::{Prune, Work};
    use crate::commands::prune::PruneOptions;
    use dfck_core::store::sqlite::SqliteStore;
    use dfck_core::store::{Store, ThreadLock, WriteRow, WriteStore};
    use dfck_core::write::{ApplyContext, Planned, ThreadJob, ThreadPlan};

    /// The store of a fixture, copied; the prune job; its plan of `thread`, under its lock.
    fn planned(thread: &str) -> (tempfile::TempDir, SqliteStore, Work) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        std::fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/sqlite/retention_race.db"),
            &db,
        )
        .unwrap();
        let store = SqliteStore::open_read_write(&db).unwrap();
        assert!(matches!(
            store.lock_thread(thread).unwrap(),
            ThreadLock::Held
        ));
        let opts = PruneOptions::default();
        let Planned::Write { work, .. } = Prune { opts: &opts }.plan(&store, thread).unwrap()
        else {
            panic!("nothing planned for {thread}");
        };
        (dir, store, work)
    }

    const THREAD: &str = "r-late-duration-delta";

    /// A plan held in memory is verified from it: what the deletions leave shows the states
    /// the plan kept, and nothing is read back.
    #[test]
    fn a_held_plan_verifies_from_memory_and_commits() {
        let (_dir, store, work) = planned(THREAD);
        let opts = PruneOptions::default();
        let job = Prune { opts: &opts };
        let cx = ApplyContext::without_failpoints();
        let done = job.apply(&store, THREAD, work, &cx).unwrap();
        assert!(
            ThreadJob::<SqliteStore>::verifies_from_memory(&job, &done),
            "the plan held the thread"
        );
        job.verify(&store, THREAD, &done).unwrap();
        WriteStore::rollback(&store).unwrap();
    }

    /// Verification compares the latest state too: a plan that deleted the newest
    /// checkpoint (its writes counted with it), and so moved what `get_state` resumes, is
    /// refused before commit.
    #[test]
    fn deleting_the_newest_checkpoint_fails_verification() {
        let opts = PruneOptions::default();
        let job = Prune { opts: &opts };
        let cx = ApplyContext::without_failpoints();
        let (_dir, store, mut work) = planned(THREAD);
        let newest = store.head_id(THREAD, "").unwrap().unwrap();
        let Work::Checkpoints(namespaces) = &mut work else {
            panic!("a whole-thread plan");
        };
        let ns = &mut namespaces[0];
        assert!(!ns.delete.contains(&newest), "the plan keeps it");
        let super::Held::Rows(held) = &ns.held else {
            panic!("not held");
        };
        ns.writes_deleted += held.nodes[held.index[&newest]].writes.len() as u64;
        ns.delete.push(newest.clone());
        ns.kept.remove(&newest);
        let done = job.apply(&store, THREAD, work, &cx).unwrap();
        let refusal = job.verify(&store, THREAD, &done).unwrap_err();
        assert!(refusal.0.contains("latest state"), "{refusal}");
        WriteStore::rollback(&store).unwrap();
        assert_eq!(store.head_id(THREAD, "").unwrap(), Some(newest));
    }

    /// A plan made on the planner's thread (`plan_held`) keeps only the outcome of checking
    /// what its deletions leave, and verification takes that outcome: a sound plan commits,
    /// one that deletes the newest checkpoint is refused for the latest state, as it is
    /// when checked from the rows.
    #[test]
    fn a_plan_checked_ahead_keeps_the_outcome_and_verification_takes_it() {
        use dfck_core::store::ReadOnly;
        let opts = PruneOptions::default();
        let job = Prune { opts: &opts };
        let cx = ApplyContext::without_failpoints();
        let (_dir, store, _) = planned(THREAD);
        let Planned::Write { work, .. } =
            ThreadJob::<SqliteStore>::plan_held(&job, &ReadOnly(&store), THREAD).unwrap()
        else {
            panic!("nothing planned for {THREAD}");
        };
        let Work::Checkpoints(namespaces) = &work else {
            panic!("a whole-thread plan");
        };
        assert!(matches!(namespaces[0].held, super::Held::Checked(Ok(()))));
        let done = job.apply(&store, THREAD, work, &cx).unwrap();
        assert!(ThreadJob::<SqliteStore>::verifies_from_memory(&job, &done));
        job.verify(&store, THREAD, &done).unwrap();
        WriteStore::rollback(&store).unwrap();

        let (_dir, store, mut work) = planned(THREAD);
        let newest = store.head_id(THREAD, "").unwrap().unwrap();
        let Work::Checkpoints(namespaces) = &mut work else {
            panic!("a whole-thread plan");
        };
        let ns = &mut namespaces[0];
        let super::Held::Rows(held) = &ns.held else {
            panic!("not held");
        };
        ns.writes_deleted += held.nodes[held.index[&newest]].writes.len() as u64;
        ns.delete.push(newest.clone());
        ns.kept.remove(&newest);
        super::check_ahead(&store, &mut work);
        let Work::Checkpoints(namespaces) = &work else {
            panic!("a whole-thread plan");
        };
        assert!(
            matches!(&namespaces[0].held, super::Held::Checked(Err(r)) if r.0.contains("latest state"))
        );
        let done = job.apply(&store, THREAD, work, &cx).unwrap();
        let refusal = job.verify(&store, THREAD, &done).unwrap_err();
        assert!(refusal.0.contains("latest state"), "{refusal}");
        WriteStore::rollback(&store).unwrap();
        assert_eq!(store.head_id(THREAD, "").unwrap(), Some(newest));
    }

    /// A deletion that took other rows than the plan's is refused, though what is left
    /// would show the same states: a checkpoint the plan names that is not there (held or
    /// read back), and a write stored on a deleted checkpoint after the plan read the thread.
    #[test]
    fn a_deletion_of_other_rows_than_planned_fails_verification() {
        let opts = PruneOptions::default();
        let job = Prune { opts: &opts };
        let cx = ApplyContext::without_failpoints();

        let (_dir, store, mut work) = planned(THREAD);
        let Work::Checkpoints(namespaces) = &mut work else {
            panic!("a whole-thread plan");
        };
        namespaces[0].delete.push("not-a-checkpoint".into());
        let done = job.apply(&store, THREAD, work, &cx).unwrap();
        let refusal = job.verify(&store, THREAD, &done).unwrap_err();
        assert!(refusal.0.contains("where the plan deletes"), "{refusal}");
        WriteStore::rollback(&store).unwrap();

        let (_dir, store, work) = planned(THREAD);
        let Work::Checkpoints(namespaces) = &work else {
            panic!("a whole-thread plan");
        };
        let write = WriteRow {
            checkpoint_id: namespaces[0].delete[0].clone(),
            task_id: "slipped-in".into(),
            task_path: String::new(),
            idx: 0,
            channel: "note".into(),
            type_tag: Some("msgpack".into()),
            value: vec![0xc0],
        };
        store.insert_write_row(THREAD, "", &write).unwrap();
        let done = job.apply(&store, THREAD, work, &cx).unwrap();
        let refusal = job.verify(&store, THREAD, &done).unwrap_err();
        assert!(refusal.0.contains("where the plan deletes"), "{refusal}");
        WriteStore::rollback(&store).unwrap();

        // A namespace read back (not held) is counted too.
        let (_dir, store, mut work) = planned(THREAD);
        let Work::Checkpoints(namespaces) = &mut work else {
            panic!("a whole-thread plan");
        };
        namespaces[0].held = super::Held::No;
        namespaces[0].delete.push("not-a-checkpoint".into());
        let done = job.apply(&store, THREAD, work, &cx).unwrap();
        assert!(!ThreadJob::<SqliteStore>::verifies_from_memory(&job, &done));
        let refusal = job.verify(&store, THREAD, &done).unwrap_err();
        assert!(refusal.0.contains("where the plan deletes"), "{refusal}");
        WriteStore::rollback(&store).unwrap();
    }
}
