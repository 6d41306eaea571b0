//! What a prune may delete from one (thread, namespace): the protected set and the deletion
//! shapes (`docs/prune.md`). Pure logic over a loaded namespace; nothing here touches a
//! store.
//!
//! The protected set is the resume head (the newest checkpoint, by id, that is not
//! duration-only) and its whole ancestor chain, every checkpoint the user protects, and
//! every leaf that still owns pending writes or has pending tasks (an interrupted or
//! errored branch head) — each with its ancestors, so a kept checkpoint never loses its
//! parent. Outside that set:
//! - **duration-only leaves** (always): duration-only checkpoints with only duration-only
//!   descendants — clones of their parent that no later run forked from;
//! - **leaf branches** (`--branches`): everything else outside the set.

use crate::finding::FindingCode;
use crate::lineage::{integrity, is_duration_only, pending_tasks};
use crate::model::thread::LoadedThread;
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
}

/// What one namespace loses and keeps.
#[derive(Debug, Default)]
pub struct Selection {
    /// Node indexes to delete, with their shape, in id order.
    pub delete: Vec<(usize, Shape)>,
    /// Node indexes kept.
    pub kept: Vec<usize>,
}

/// Decides what may go from `t`. `Err` names why nothing may: a broken lineage makes the
/// protected set unknowable.
pub fn select(
    t: &LoadedThread,
    protect: &HashSet<String>,
    branches: bool,
) -> Result<Selection, String> {
    let broken: Vec<String> = integrity(t, None)
        .into_iter()
        .filter(|f| {
            matches!(
                f.code,
                FindingCode::LineageCycle | FindingCode::LineageDanglingParent
            )
        })
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
    let head = (0..n)
        .filter(|&i| !duration[i])
        .max_by(|&a, &b| t.nodes[a].id.cmp(&t.nodes[b].id));
    let Some(head) = head else {
        // Only duration-only checkpoints: no resume head to measure against.
        return Ok(Selection {
            delete: Vec::new(),
            kept: (0..n).collect(),
        });
    };
    let mut seeds = vec![head];
    for (i, node) in t.nodes.iter().enumerate() {
        let leaf = node.children.is_empty();
        let owns_writes = leaf && !node.writes.is_empty();
        let resumable = leaf
            && !duration[i]
            && t.checkpoint(i)
                .is_some_and(|c| !pending_tasks(c).is_empty());
        if protect.contains(&node.id) || owns_writes || resumable {
            seeds.push(i);
        }
    }
    let mut kept = vec![false; n];
    for s in seeds {
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
    Ok(out)
}
