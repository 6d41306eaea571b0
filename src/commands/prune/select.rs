//! What a prune may delete from one (thread, namespace): the protected set and the deletion
//! shapes (`docs/prune.md`). Pure logic over a loaded namespace; nothing here touches a
//! store.
//!
//! The protected set is the resume head (the newest checkpoint, by id, that is not
//! duration-only) and its whole ancestor chain, every checkpoint the user protects, and
//! every leaf that still owns pending writes or has pending tasks (an interrupted or
//! errored branch head) — each with its ancestors, so a kept checkpoint never loses its
//! parent. The newest checkpoint of any kind, where LangGraph resumes, joins the set when
//! deleting it would leave a checkpoint of another conversation the newest (the protected
//! head: a late duration-only checkpoint on an older branch). Outside that set:
//! - **duration-only leaves** (always): duration-only checkpoints with only duration-only
//!   descendants — clones of their parent that no later run forked from;
//! - **leaf branches** (`--branches`): everything else outside the set.

use dfck_core::lineage::{is_duration_only, pending_tasks};
use dfck_core::model::MESSAGES;
use dfck_core::model::thread::LoadedThread;
use serde::Serialize;
use std::collections::HashSet;

/// Why a checkpoint is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// A trailing duration-only leaf.
    DurationLeaf,
    /// Part of a leaf branch off the kept lineage (`--branches`).
    Branch,
    /// Before the oldest kept turn (`--keep-last-turns`).
    Cut,
}

/// What one namespace loses and keeps.
#[derive(Debug, Default)]
pub struct Selection {
    /// Node indexes to delete, with their shape, in id order.
    pub delete: Vec<(usize, Shape)>,
    /// Node indexes kept.
    pub kept: Vec<usize>,
    /// Why something that looked deletable is kept (the protected head).
    pub note: Option<String>,
}

/// Whether `--protect` names checkpoint `id` (the values are resolved to whole ids before
/// any work, see [`dfck_core::address::protected_checkpoints`]).
pub fn is_protected(protect: &HashSet<String>, id: &str) -> bool {
    protect.contains(id)
}

/// Why a checkpoint is protected beside the resume head.
fn protected_seeds(
    t: &LoadedThread,
    protect: &HashSet<String>,
    duration: &[bool],
) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    for (i, node) in t.nodes.iter().enumerate() {
        let leaf = node.children.is_empty();
        if is_protected(protect, &node.id) {
            out.push((i, "is protected (--protect)"));
        } else if leaf && !node.writes.is_empty() {
            out.push((i, "owns pending writes"));
        } else if leaf
            && !duration[i]
            && t.checkpoint(i)
                .is_some_and(|c| !pending_tasks(c).is_empty())
        {
            out.push((i, "is a branch head with pending tasks"));
        }
    }
    out
}

/// The resume head: the newest checkpoint, by id, that is not duration-only.
fn resume_head(t: &LoadedThread, duration: &[bool]) -> Option<usize> {
    (0..t.nodes.len())
        .filter(|&i| !duration[i])
        .max_by(|&a, &b| t.nodes[a].id.cmp(&t.nodes[b].id))
}

/// The newest checkpoint by id among those `keep` admits: where LangGraph resumes
/// (`get_state` without a checkpoint id).
fn newest(t: &LoadedThread, keep: impl Fn(usize) -> bool) -> Option<usize> {
    (0..t.nodes.len())
        .filter(|&i| keep(i))
        .max_by(|&a, &b| t.nodes[a].id.cmp(&t.nodes[b].id))
}

/// The nearest ancestor of `i` (itself included) that is not duration-only.
fn anchor(t: &LoadedThread, duration: &[bool], i: usize) -> Option<usize> {
    let mut cur = Some(i);
    let mut steps = 0;
    while let Some(c) = cur {
        if !duration[c] {
            return Some(c);
        }
        steps += 1;
        if steps > t.nodes.len() {
            return None;
        }
        cur = t.nodes[c].parent_index;
    }
    None
}

/// Why the newest checkpoint is kept although it is a deletable duration-only leaf.
fn head_note(t: &LoadedThread, newest: usize, head: usize) -> String {
    format!(
        "kept {}: the newest checkpoint, where LangGraph resumes, is a duration-only checkpoint on another branch than the newest turn ({}); deleting it would switch the conversation",
        t.nodes[newest].id, t.nodes[head].id
    )
}

/// History trimming (`--keep-last-turns N`): the new oldest checkpoint and what goes
/// before it.
#[derive(Debug)]
pub struct Cut {
    /// The input checkpoint that starts the oldest kept turn: it becomes a root and stores
    /// its materialized value of every delta channel.
    pub root: usize,
    /// Its ancestors, and every branch off them.
    pub delete: Vec<usize>,
    /// The input checkpoints of the turns cut (oldest first): turns nobody can branch from
    /// or regenerate any more.
    pub turns: Vec<usize>,
}

/// Plans `--keep-last-turns keep`: `Ok(None)` when the resume lineage has no more turns.
/// A protected checkpoint, a leaf owning pending writes or a branch off the cut turns
/// (without `--branches`) before the cut refuses the thread.
pub fn cut(
    t: &LoadedThread,
    keep: usize,
    protect: &HashSet<String>,
    branches: bool,
) -> Result<Option<Cut>, String> {
    let n = t.nodes.len();
    let duration: Vec<bool> = (0..n).map(|i| is_duration_only(t, i)).collect();
    let Some(head) = resume_head(t, &duration) else {
        return Ok(None);
    };
    if let Some(n) = newest(t, |_| true).filter(|&n| anchor(t, &duration, n) != Some(head)) {
        return Err(format!(
            "the newest checkpoint {}, where LangGraph resumes, is a duration-only checkpoint on another branch than the newest turn ({}): the turns to keep cannot be told apart; prune without --keep-last-turns keeps both lineages",
            t.nodes[n].id, t.nodes[head].id
        ));
    }
    let mut chain = Vec::new();
    let mut on_chain = vec![false; n];
    let mut cur = Some(head);
    while let Some(i) = cur {
        if on_chain[i] {
            return Err("its lineage has a cycle".into());
        }
        on_chain[i] = true;
        chain.push(i);
        cur = t.nodes[i].parent_index;
    }
    chain.reverse();
    let inputs: Vec<usize> = chain
        .iter()
        .copied()
        .filter(|&i| t.nodes[i].source() == Some("input"))
        .collect();
    if keep == 0 || inputs.len() <= keep {
        return Ok(None);
    }
    let root = inputs[inputs.len() - keep];
    // The subtree of the new root stays; everything else goes.
    let mut inside = vec![false; n];
    let mut stack = vec![root];
    while let Some(i) = stack.pop() {
        if !inside[i] {
            inside[i] = true;
            stack.extend(t.nodes[i].children.iter().copied());
        }
    }
    let ancestors: HashSet<usize> = chain.iter().copied().take_while(|&i| i != root).collect();
    let delete: Vec<usize> = (0..n).filter(|&i| !inside[i]).collect();
    for (i, why) in protected_seeds(t, protect, &duration) {
        if !inside[i] {
            return Err(format!(
                "checkpoint {} {why} and lies before the oldest kept turn; keep more turns",
                t.nodes[i].id
            ));
        }
    }
    if !branches {
        if let Some(&b) = delete.iter().find(|i| !ancestors.contains(i)) {
            return Err(format!(
                "the cut would delete the ancestors of a branch (at {}); add --branches to delete such branches too",
                t.nodes[b].id
            ));
        }
    }
    let turns = inputs[..inputs.len() - keep].to_vec();
    Ok(Some(Cut {
        root,
        delete,
        turns,
    }))
}

/// Decides what may go from `t`. `Err` names why nothing may: a broken lineage makes the
/// protected set unknowable.
pub fn select(
    t: &LoadedThread,
    protect: &HashSet<String>,
    branches: bool,
) -> Result<Selection, String> {
    let broken: Vec<String> = dfck_core::write::preamble::broken_lineage(t)
        .into_iter()
        .map(|f| format!("{} at {}", f.code, f.checkpoint_id.unwrap_or_default()))
        .collect();
    if !broken.is_empty() {
        return Err(format!(
            "its lineage is broken ({}): the checkpoints to keep cannot be told apart; run dfck verify",
            broken.join(", ")
        ));
    }
    let n = t.nodes.len();
    let duration: Vec<bool> = (0..n).map(|i| is_duration_only(t, i)).collect();
    let Some(head) = resume_head(t, &duration) else {
        // Only duration-only checkpoints: no resume head to measure against.
        return Ok(Selection {
            delete: Vec::new(),
            kept: (0..n).collect(),
            note: None,
        });
    };
    let mut seeds = vec![head];
    seeds.extend(
        protected_seeds(t, protect, &duration)
            .into_iter()
            .map(|(i, _)| i),
    );
    let mut out = choose(t, &seeds, &duration, branches);
    // The protected head: LangGraph resumes from the newest checkpoint of any kind. A
    // duration-only one may go only when its nearest non-duration ancestor is then the
    // newest; otherwise it stays, with its lineage (and the resume head's).
    if let Some(n) = newest(t, |_| true) {
        if out.delete.iter().any(|&(i, _)| i == n) {
            let gone: HashSet<usize> = out.delete.iter().map(|&(i, _)| i).collect();
            let after = newest(t, |i| !gone.contains(&i));
            if after.is_none() || after != anchor(t, &duration, n) {
                seeds.push(n);
                out = choose(t, &seeds, &duration, branches);
                out.note = Some(head_note(t, n, head));
            }
        }
    }
    Ok(out)
}

/// The selection given the protected seeds: each seed and its ancestors kept, trailing
/// duration-only leaves deleted, other checkpoints deleted as branches when `branches`.
fn choose(t: &LoadedThread, seeds: &[usize], duration: &[bool], branches: bool) -> Selection {
    let n = t.nodes.len();
    let mut kept = vec![false; n];
    for &s in seeds {
        // The lineage is acyclic here, so each walk ends at a root or a kept checkpoint.
        let mut cur = Some(s);
        while let Some(i) = cur {
            if kept[i] {
                break;
            }
            kept[i] = true;
            cur = t.nodes[i].parent_index;
        }
    }
    // A kept `__copy__` fork replays its parent's writes on the strength of its original (a
    // sibling at the same `messages` version that consumed them): the original stays too,
    // or the fork's replay would have no owner left to share.
    for k in 0..n {
        if !kept[k] || t.nodes[k].source() != Some("fork") {
            continue;
        }
        let Some(p) = t.nodes[k].parent_index else {
            continue;
        };
        let version = t.checkpoint(k).and_then(|c| c.version(MESSAGES));
        for &o in &t.nodes[p].children {
            if o != k
                && version.is_some()
                && t.checkpoint(o).and_then(|c| c.version(MESSAGES)) == version
            {
                kept[o] = true;
            }
        }
    }
    // A duration-only checkpoint is a trailing leaf when its whole subtree is duration-only.
    let mut all_duration = vec![false; n];
    let mut order: Vec<usize> = (0..n).collect();
    // Children sort after their parents by id in a healthy store; compute bottom-up by
    // repeated passes over the reverse id order, which is exact for any acyclic tree.
    order.sort_by(|&a, &b| t.nodes[b].id.cmp(&t.nodes[a].id));
    let mut changed = true;
    while changed {
        changed = false;
        for &i in &order {
            let v = duration[i] && t.nodes[i].children.iter().all(|&c| all_duration[c]);
            if v != all_duration[i] {
                all_duration[i] = v;
                changed = true;
            }
        }
    }
    let mut out = Selection::default();
    for i in order.into_iter().rev() {
        if kept[i] {
            out.kept.push(i);
        } else if all_duration[i] {
            out.delete.push((i, Shape::DurationLeaf));
        } else if branches {
            out.delete.push((i, Shape::Branch));
        } else {
            out.kept.push(i);
        }
    }
    // Every kept checkpoint keeps its parent: a kept branch (no --branches) is not
    // duration-only, so no ancestor of it is a trailing duration-only leaf.
    out
}
