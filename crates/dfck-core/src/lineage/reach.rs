//! How far back DeerFlow's regenerate and branch can reach (docs/replay-and-forks.md,
//! "The regenerate walk"). To find "the settled checkpoint just before human message H",
//! DeerFlow walks parents from the head, fetching at most [`REGENERATE_SCAN_LIMIT`]
//! checkpoints (duration-only ones are skipped but still fetched), and stops at the first
//! ancestor that is settled (no pending tasks) and does not yet hold H. A run's input lands
//! on a `source: "input"` checkpoint (which has pending tasks), so the base of that turn is
//! the first settled, non-duration-only ancestor above it: a turn is within reach when that
//! base is fetched within the budget.

use super::{is_duration_only, pending_tasks};
use crate::codec::Value;
use crate::finding::{Finding, FindingCode, Severity};
use crate::model::thread::{LoadVisitor, LoadedThread};
use crate::model::{MESSAGES, Write};
use crate::store::WriteRow;
use std::collections::{HashMap, HashSet};

/// DeerFlow's raw scan limit for regenerate and branch (`*_RAW_SCAN_LIMIT`).
pub const REGENERATE_SCAN_LIMIT: usize = 400;

/// Sees the run inputs stored on checkpoints and keeps the ids of their human messages, so
/// findings can name a turn by its message. A run's input is stored on its `input`
/// checkpoint as a `messages` write of the `__start__` task.
#[derive(Debug, Default)]
pub struct TurnInputs {
    /// Human message ids written on each checkpoint, in write order.
    pub humans: HashMap<String, Vec<String>>,
}

impl TurnInputs {
    /// Notes the human messages of one decoded `messages` write stored on `checkpoint_id`.
    pub fn messages_write(&mut self, checkpoint_id: &str, value: &Value) {
        let ids = human_ids(value.overwrite_value().unwrap_or(value));
        if !ids.is_empty() {
            self.humans
                .entry(checkpoint_id.to_owned())
                .or_default()
                .extend(ids);
        }
    }
}

impl LoadVisitor for TurnInputs {
    fn write(&mut self, w: &WriteRow) {
        if w.channel != MESSAGES {
            return;
        }
        let Ok(dw) = Write::from_row(w.clone(), "") else {
            return;
        };
        self.messages_write(&w.checkpoint_id, &dw.value);
    }
}

/// Ids of the human messages in an input value (a message, a list of them, or dicts).
fn human_ids(v: &Value) -> Vec<String> {
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        Value::Nil => Vec::new(),
        other => vec![other],
    };
    items
        .into_iter()
        .filter_map(|m| {
            let kind = m
                .model_field_str("type")
                .or_else(|| m.get("type").and_then(Value::as_str))
                .or_else(|| m.get("role").and_then(Value::as_str))?;
            if !matches!(kind, "human" | "user") {
                return None;
            }
            m.model_field_str("id")
                .or_else(|| m.get("id").and_then(Value::as_str))
                .map(str::to_owned)
        })
        .collect()
}

/// The turns on the head's parent chain and which of them the regenerate walk reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// Input checkpoints on the head's chain, newest first.
    pub turns: Vec<usize>,
    /// How many of them (the newest ones) are within reach: all of them unless the walk
    /// spent its whole budget.
    pub reachable: usize,
}

/// The regenerate reach from the head of `t`; `None` when the namespace is empty.
pub fn regenerate_reach(t: &LoadedThread) -> Option<Reach> {
    let head = t.head()?;
    // Every turn on the chain (the walk is bounded by cycle detection, not by a budget).
    let mut turns = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = Some(head);
    while let Some(i) = cur {
        if !seen.insert(i) {
            break;
        }
        if t.nodes[i].source() == Some("input") {
            turns.push(i);
        }
        cur = t.nodes[i].parent_index;
    }
    // DeerFlow's scan: at most REGENERATE_SCAN_LIMIT parent fetches from the head.
    let mut reachable = 0;
    let mut pending = 0;
    let mut visited = HashSet::from([head]);
    let mut cur = head;
    for _ in 0..REGENERATE_SCAN_LIMIT {
        // The walk ends before its budget (at the root, a dangling parent or a cycle): what
        // it did not find is not the budget's doing (other findings cover broken lineage).
        let Some(p) = t.nodes[cur].parent_index.filter(|&p| visited.insert(p)) else {
            return Some(Reach {
                reachable: turns.len(),
                turns,
            });
        };
        cur = p;
        if is_duration_only(t, p) {
            continue;
        }
        let settled = t
            .checkpoint(p)
            .is_some_and(|ck| pending_tasks(ck).is_empty());
        if settled {
            reachable += pending;
            pending = 0;
        }
        if t.nodes[p].source() == Some("input") {
            pending += 1;
        }
    }
    Some(Reach { turns, reachable })
}

/// `lineage.regenerate_budget` for `t`: a warning when older turns are out of the walk's
/// reach, an error when even the last one is; nothing when every turn is reachable.
pub fn regenerate_findings(t: &LoadedThread, inputs: Option<&TurnInputs>) -> Vec<Finding> {
    let Some(reach) = regenerate_reach(t) else {
        return Vec::new();
    };
    let total = reach.turns.len();
    if reach.reachable >= total {
        return Vec::new();
    }
    let head = &t.nodes[t.head().unwrap_or(0)].id;
    let name = |i: usize| {
        let id = &t.nodes[i].id;
        match inputs.and_then(|m| m.humans.get(id)).and_then(|h| h.last()) {
            Some(h) => format!("human message {h} (input checkpoint {id})"),
            None => format!("the turn whose input is checkpoint {id}"),
        }
    };
    let out_of_reach = total - reach.reachable;
    let finding = if reach.reachable == 0 {
        Finding::new(
            FindingCode::LineageRegenerateBudget,
            &t.thread_id,
            &t.checkpoint_ns,
            Some(head),
            format!(
                "DeerFlow's regenerate/branch walk fetches at most {REGENERATE_SCAN_LIMIT} checkpoints from the head and does not reach the settled checkpoint before even the last turn ({}): regenerating or branching the last answer fails",
                name(reach.turns[0])
            ),
        )
        .with_severity(Severity::Error)
    } else {
        Finding::new(
            FindingCode::LineageRegenerateBudget,
            &t.thread_id,
            &t.checkpoint_ns,
            Some(head),
            format!(
                "DeerFlow's regenerate/branch walk ({REGENERATE_SCAN_LIMIT} checkpoints from the head) reaches the last {} of {total} turns; the oldest still in reach is {}; the {out_of_reach} older turn(s) can no longer be regenerated or branched from",
                reach.reachable,
                name(reach.turns[reach.reachable - 1])
            ),
        )
    };
    vec![finding]
}
