//! Lineage: parent walks, the checkpoint tree, integrity findings (dangling parents, cycles,
//! walk depth, roots, ordering, unsettled heads, duration-only checkpoints), and the
//! ownership analysis of delta writes at fork points (DeerFlow #4458).

mod reach;

pub use reach::{REGENERATE_SCAN_LIMIT, Reach, TurnInputs, regenerate_findings, regenerate_reach};

use crate::finding::{Finding, FindingCode};
use crate::model::thread::LoadedThread;
use crate::model::{Checkpoint, MESSAGES, NULL_TASK_ID};
use std::collections::HashSet;

/// How a parent walk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkEnd {
    /// Reached a parentless checkpoint.
    Root,
    /// A parent id names no checkpoint of the namespace.
    Dangling(String),
    /// Returned to a checkpoint already visited.
    Cycle(String),
    /// Stopped after the depth budget.
    Budget,
}

/// The parent chain from `from` (inclusive) towards the root, and how it ended.
pub fn chain(t: &LoadedThread, from: usize, budget: usize) -> (Vec<usize>, WalkEnd) {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut cur = from;
    loop {
        if !seen.insert(cur) {
            return (out, WalkEnd::Cycle(t.nodes[cur].id.clone()));
        }
        out.push(cur);
        if out.len() > budget {
            return (out, WalkEnd::Budget);
        }
        let n = &t.nodes[cur];
        match (&n.parent, n.parent_index) {
            (None, _) => return (out, WalkEnd::Root),
            (Some(p), None) => return (out, WalkEnd::Dangling(p.clone())),
            (Some(_), Some(p)) => cur = p,
        }
    }
}

/// Nodes with pending tasks at a checkpoint, by DeerFlow's heuristic
/// (docs/storage-format.md#versions-seen): a trigger channel newer than what its node has seen, or queued `Send`s.
pub fn pending_tasks(ck: &Checkpoint) -> Vec<String> {
    let mut out = Vec::new();
    for (ch, v) in &ck.channel_values {
        let node = if let Some(x) = ch.strip_prefix("branch:to:") {
            x
        } else if ch == "__start__" {
            "__start__"
        } else if ch == "__pregel_tasks" {
            if v.as_array().is_some_and(|a| !a.is_empty()) {
                out.push("(Send)".to_owned());
            }
            continue;
        } else {
            continue;
        };
        let version = ck.version(ch).unwrap_or("");
        let seen = ck.seen(node, ch).unwrap_or("");
        if version > seen {
            out.push(node.to_owned());
        }
    }
    out
}

/// A duration-only checkpoint (DeerFlow's run-duration writer): SQLite metadata
/// `writes.runtime_run_duration`; on Postgres (where `writes` is stripped) `source: update`
/// with `run_durations` and the parent's channel versions.
pub fn is_duration_only(t: &LoadedThread, i: usize) -> bool {
    let n = &t.nodes[i];
    if n.facts.duration_write {
        return true;
    }
    if n.source() != Some("update") || !n.facts.run_durations {
        return false;
    }
    match (
        n.parent_index.and_then(|p| t.checkpoint(p)),
        t.checkpoint(i),
    ) {
        (Some(p), Some(c)) => p.channel_versions == c.channel_versions,
        _ => false,
    }
}

/// A finding located in `t`.
pub fn finding(
    t: &LoadedThread,
    code: FindingCode,
    checkpoint_id: Option<&str>,
    message: String,
) -> Finding {
    Finding::new(code, &t.thread_id, &t.checkpoint_ns, checkpoint_id, message)
}

/// Lineage integrity findings of one (thread, ns).
pub fn integrity(t: &LoadedThread, max_depth: Option<usize>) -> Vec<Finding> {
    let mut out = Vec::new();
    if t.nodes.is_empty() {
        return out;
    }
    for n in &t.nodes {
        if let (Some(p), None) = (&n.parent, n.parent_index) {
            out.push(finding(
                t,
                FindingCode::LineageDanglingParent,
                Some(&n.id),
                format!(
                    "parent {p} does not exist in this namespace: delta replay stops here and silently loses every earlier message; full-mode history ends here"
                ),
            ));
        }
    }
    // Cycles: each one reported once, at its smallest id.
    let mut state = vec![0u8; t.nodes.len()]; // 0 new, 1 on the current path, 2 done
    for start in 0..t.nodes.len() {
        let mut path = Vec::new();
        let mut cur = Some(start);
        while let Some(i) = cur {
            match state[i] {
                2 => break,
                1 => {
                    let pos = path.iter().position(|&x| x == i).unwrap_or(0);
                    let cycle = &path[pos..];
                    let min = cycle.iter().copied().min().unwrap_or(i);
                    out.push(finding(
                        t,
                        FindingCode::LineageCycle,
                        Some(&t.nodes[min].id),
                        format!(
                            "following parents returns to this checkpoint ({} checkpoints in the loop): LangGraph's history walk stops early, replay is incomplete",
                            cycle.len()
                        ),
                    ));
                    break;
                }
                _ => {
                    state[i] = 1;
                    path.push(i);
                    cur = t.nodes[i].parent_index;
                }
            }
        }
        for i in path {
            state[i] = 2;
        }
    }
    let roots: Vec<usize> = (0..t.nodes.len())
        .filter(|&i| t.nodes[i].parent.is_none())
        .collect();
    if roots.len() > 1 {
        for &r in &roots[1..] {
            out.push(finding(
                t,
                FindingCode::LineageMultipleRoots,
                Some(&t.nodes[r].id),
                format!(
                    "{} parentless checkpoints in this namespace (oldest {}): lineage is severed here (DeerFlow #4292); delta replay from below stops at this root",
                    roots.len(),
                    t.nodes[roots[0]].id
                ),
            ));
        }
    }
    for n in &t.nodes {
        if let Some(p) = n.parent_index {
            if n.id <= t.nodes[p].id {
                out.push(finding(
                    t,
                    FindingCode::LineageOrderAnomaly,
                    Some(&n.id),
                    format!(
                        "id sorts at or below its parent {}: \"latest\" (the greatest id) no longer follows the lineage",
                        t.nodes[p].id
                    ),
                ));
            }
        }
    }
    if let Some(h) = t.head() {
        let head = &t.nodes[h];
        if !head.children.is_empty() {
            out.push(finding(
                t,
                FindingCode::LineageOrderAnomaly,
                Some(&head.id),
                format!(
                    "the head (greatest id) is not a leaf: it has {} child(ren), so LangGraph resumes from a checkpoint whose descendants exist",
                    head.children.len()
                ),
            ));
        }
        let budget_hit = max_depth.is_some_and(|d| chain(t, h, d).1 == WalkEnd::Budget);
        if let (true, Some(max_depth)) = (budget_hit, max_depth) {
            out.push(finding(
                t,
                FindingCode::LineageDepthExceeded,
                Some(&head.id),
                format!(
                    "the parent walk from the head is longer than {max_depth} checkpoints without reaching a root (the --max-depth you asked for)"
                ),
            ));
        }
        if let Some(ck) = t.checkpoint(h) {
            let pending = pending_tasks(ck);
            if !pending.is_empty() {
                out.push(finding(
                    t,
                    FindingCode::LineageUnsettledHead,
                    Some(&head.id),
                    format!(
                        "the head has pending tasks ({}): a run stopped mid-graph or waits on an interrupt; DeerFlow refuses to branch or edit from unsettled bases (#4534)",
                        pending.join(", ")
                    ),
                ));
            }
        }
    }
    for i in 0..t.nodes.len() {
        if is_duration_only(t, i) {
            out.push(finding(
                t,
                FindingCode::LineageDurationOnly,
                Some(&t.nodes[i].id),
                "a duration-only checkpoint (DeerFlow's run-duration writer): lineage walks skip it".into(),
            ));
        }
    }
    out
}

/// `uuid5(UUID(checkpoint_id), "__interrupt__")`: the task id of `update_state` writes.
pub fn update_task_id(checkpoint_id: &str) -> Option<String> {
    // The id without its dashes: 32 bytes, read two at a time as `u8::from_str_radix` reads
    // them (a leading `+` included). Built on the stack: this runs for every fork point.
    let mut hex = [0u8; 32];
    let mut n = 0;
    for b in checkpoint_id.bytes().filter(|b| *b != b'-') {
        *hex.get_mut(n)? = b;
        n += 1;
    }
    if n != 32 {
        return None;
    }
    let digit = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let mut ns = [0u8; 16];
    for (b, pair) in ns.iter_mut().zip(hex.chunks_exact(2)) {
        *b = match pair {
            [b'+', lo] => digit(*lo)?,
            [hi, lo] => digit(*hi)? << 4 | digit(*lo)?,
            _ => return None,
        };
    }
    let mut h = sha1_smol::Sha1::new();
    h.update(&ns);
    h.update(b"__interrupt__");
    let d = h.digest().bytes();
    let mut u = [0u8; 16];
    u.copy_from_slice(&d[..16]);
    u[6] = (u[6] & 0x0f) | 0x50;
    u[8] = (u[8] & 0x3f) | 0x80;
    let x = hex::encode(u);
    Some(format!(
        "{}-{}-{}-{}-{}",
        &x[..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..]
    ))
}

/// The outcome of the fork-ownership analysis of one (thread, ns).
#[derive(Debug, Default)]
pub struct ForkAnalysis {
    /// (checkpoint, fork point) pairs: checkpoints whose replay picks up another branch's
    /// writes stored on the fork point.
    pub contaminated: Vec<(usize, usize)>,
    /// Fork points whose write ownership cannot be decided.
    pub ambiguous: Vec<usize>,
}

fn stores_messages(ck: &Checkpoint) -> bool {
    ck.value(MESSAGES).is_some()
}

/// Decides, for every checkpoint P with pending `messages` writes, which children own them
/// (docs/replay-and-forks.md#fork-ownership): `update_state` writes
/// (`uuid5(P, "__interrupt__")`) belong to the `update` child, all others to `loop` children
/// (several may share them); `__copy__` siblings share their original's. A child
/// that stores no value and replays writes it does not own is contaminated, and so is every
/// descendant whose replay reaches P before a stored value.
pub fn fork_analysis(t: &LoadedThread) -> ForkAnalysis {
    let mut out = ForkAnalysis::default();
    for (pi, p) in t.nodes.iter().enumerate() {
        let writes: Vec<_> = p.writes.iter().filter(|w| w.channel == MESSAGES).collect();
        if writes.is_empty() {
            continue;
        }
        // Children that replay P's writes: readable, `messages` versioned but not stored.
        let replaying: Vec<usize> = p
            .children
            .iter()
            .copied()
            // A checkpoint naming itself as parent (a corrupt store) replays nothing of its own.
            .filter(|&k| k != pi)
            .filter(|&k| {
                t.checkpoint(k)
                    .is_some_and(|c| !stores_messages(c) && c.version(MESSAGES).is_some())
            })
            .collect();
        if replaying.is_empty() {
            continue;
        }
        let update_id = update_task_id(&p.id);
        let is_update = |task_id: &str, task_path: &str| {
            Some(task_id) == update_id.as_deref() || task_path.starts_with("~__interrupt__")
        };
        let has_update = writes.iter().any(|w| is_update(&w.task_id, &w.task_path));
        let has_other = writes.iter().any(|w| !is_update(&w.task_id, &w.task_path));
        // Loop children own the node writes. (Their step is P's + 1, except after a
        // `durability="exit"` run, whose only saved checkpoint is several steps on.)
        let is_loop = |k: usize| t.nodes[k].source() == Some("loop");
        let is_update_child = |k: usize| t.nodes[k].source() == Some("update");
        let updates: Vec<usize> = replaying
            .iter()
            .copied()
            .filter(|&k| is_update_child(k))
            .collect();
        // `Command(update=…)` resumes add NULL-task writes to P, cumulatively (each resume
        // saves the earlier ones again, then its own at the next index). With writes of more
        // than one resume on P, a loop child older than the newest loop child replays writes
        // of resumes that came after it.
        let null_writes: HashSet<i64> = writes
            .iter()
            .filter(|w| is_null_task(&w.task_id))
            .map(|w| w.idx)
            .collect();
        let newest_loop = p
            .children
            .iter()
            .copied()
            .filter(|&k| is_loop(k))
            .max_by(|&a, &b| t.nodes[a].id.cmp(&t.nodes[b].id));
        let later_resumes = |k: usize| null_writes.len() >= 2 && newest_loop != Some(k);
        let mut owners: Vec<usize> = Vec::new();
        let mut bad: Vec<usize> = Vec::new();
        for &k in &replaying {
            let owns = if is_loop(k) {
                !has_update && !later_resumes(k)
            } else if is_update_child(k) {
                // Two update siblings collide on one write key: the first keeps it.
                !has_other && updates.first() == Some(&k)
            } else if t.nodes[k].source().is_none() {
                // A child written without metadata (a raw writer): nothing says which
                // operation made it.
                out.ambiguous.push(pi);
                continue;
            } else {
                false
            };
            if owns {
                owners.push(k);
            } else {
                bad.push(k);
            }
        }
        // `__copy__` forks share what their original (same messages version) owns.
        bad.retain(|&k| {
            let copy = t.nodes[k].source() == Some("fork")
                && owners.iter().any(|&o| {
                    t.checkpoint(o).and_then(|c| c.version(MESSAGES))
                        == t.checkpoint(k).and_then(|c| c.version(MESSAGES))
                });
            !copy
        });
        // K and every descendant that replays through P. Each checkpoint is visited once:
        // a parent cycle (a corrupt store) would otherwise make this walk endless.
        let mut visited: HashSet<usize> = HashSet::new();
        let mut stack = bad;
        while let Some(d) = stack.pop() {
            if !visited.insert(d) {
                continue;
            }
            out.contaminated.push((d, pi));
            for &c in &t.nodes[d].children {
                if t.checkpoint(c)
                    .is_some_and(|c| !stores_messages(c) && c.version(MESSAGES).is_some())
                {
                    stack.push(c);
                }
            }
        }
    }
    out.ambiguous.dedup();
    // One entry per checkpoint: the nearest fork point it replays through.
    out.contaminated
        .sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    out.contaminated.dedup_by_key(|c| c.0);
    out
}

/// Fork findings of one (thread, ns).
pub fn fork_findings(t: &LoadedThread, analysis: &ForkAnalysis) -> Vec<Finding> {
    let mut out = Vec::new();
    for &(k, p) in &analysis.contaminated {
        out.push(finding(
            t,
            FindingCode::DeltaForkContaminated,
            Some(&t.nodes[k].id),
            format!(
                "delta replay passes fork point {} and picks up pending messages writes that belong to a sibling branch (DeerFlow #4458): delta-mode DeerFlow shows another branch's messages here",
                t.nodes[p].id
            ),
        ));
    }
    for &p in &analysis.ambiguous {
        let kids: Vec<String> = t.nodes[p]
            .children
            .iter()
            .map(|&k| format!("{} ({})", t.nodes[k].id, t.nodes[k].source().unwrap_or("?")))
            .collect();
        out.push(finding(
            t,
            FindingCode::DeltaForkAmbiguous,
            Some(&t.nodes[p].id),
            format!(
                "fork point with pending messages writes replayed by a child written without metadata ({}): which branch owns them cannot be decided",
                kids.join(", ")
            ),
        ));
    }
    out
}

/// True for the task id of a checkpoint's own writes.
pub fn is_null_task(task_id: &str) -> bool {
    task_id == NULL_TASK_ID
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid5_matches_python() {
        // python: uuid.uuid5(uuid.UUID("1f1ee294-41b5-6c15-bfff-73ebddaa7159"), "__interrupt__")
        assert_eq!(
            update_task_id("1f1ee294-41b5-6c15-bfff-73ebddaa7159").as_deref(),
            Some("6f636ae8-fc5f-5e47-bd2e-d53c6fd11bc8")
        );
        assert!(update_task_id("nope").is_none());
    }

    #[test]
    fn odd_ids_read_as_the_string_parse_reads_them() {
        // The parse this replaced: dashes dropped, then `from_str_radix` on each pair.
        fn namespace(id: &str) -> Option<Vec<u8>> {
            let hex: String = id.chars().filter(|c| *c != '-').collect();
            if hex.len() != 32 {
                return None;
            }
            (0..16)
                .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
                .collect()
        }
        for id in [
            "1f1ee294-41b5-6c15-bfff-73ebddaa7159",
            "1F1EE29441B56C15BFFF73EBDDAA7159",
            "+f1ee294-41b5-6c15-bfff-73ebddaa7159",
            "1f+ee294-41b5-6c15-bfff-73ebddaa715+",
            "f+1ee294-41b5-6c15-bfff-73ebddaa7159",
            "1f1ee294-41b5-6c15-bfff-73ebddaa71é",
            "1f1ee294-41b5-6c15-bfff-73ebddaa7159-0",
            "-1f1ee294--41b5-6c15-bfff-73ebddaa7159-",
            "1f1ee294-41b5-6c15-bfff-73ebddaa715g",
            "",
        ] {
            assert_eq!(
                update_task_id(id).is_some(),
                namespace(id).is_some(),
                "{id}"
            );
        }
        assert_eq!(
            update_task_id("1F1EE29441B56C15BFFF73EBDDAA7159"),
            update_task_id("1f1ee294-41b5-6c15-bfff-73ebddaa7159")
        );
    }
}

/// One checkpoint as `dfck lineage` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LineageEntry {
    /// Checkpoint id.
    pub checkpoint_id: String,
    /// Parent id as stored.
    pub parent_checkpoint_id: Option<String>,
    /// `metadata.source`.
    pub source: Option<String>,
    /// `metadata.step`.
    pub step: Option<i64>,
    /// `full` or `delta` (DeerFlow's metadata rule).
    pub mode: crate::model::ChannelMode,
    /// How `messages` is stored (`None`: unreadable checkpoint).
    pub messages_encoding: Option<crate::model::MessagesEncoding>,
    /// Pending-write rows stored on it.
    pub writes: usize,
    /// A DeerFlow run-duration checkpoint.
    pub duration_only: bool,
    /// Nodes with pending tasks (DeerFlow's heuristic).
    pub pending_tasks: Vec<String>,
    /// Its delta replay picks up another branch's writes.
    pub contaminated: bool,
    /// Children ids, ascending.
    pub children: Vec<String>,
}

/// `dfck lineage THREAD [--tree]`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LineageReport {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// `chain` (from a checkpoint to the root) or `tree` (the whole namespace).
    pub view: &'static str,
    /// Where the chain starts (the head by default).
    pub from: Option<String>,
    /// How the chain ends: `root`, `dangling`, `cycle` or `budget` (chain view only).
    pub end: Option<&'static str>,
    /// The checkpoints: the chain from `from` to the root, or every checkpoint by id.
    pub checkpoints: Vec<LineageEntry>,
    /// Integrity findings of the namespace (same codes as `verify`).
    pub findings: Vec<Finding>,
}

fn entry(t: &LoadedThread, i: usize, contaminated: &HashSet<usize>) -> LineageEntry {
    let n = &t.nodes[i];
    let ck = t.checkpoint(i);
    LineageEntry {
        checkpoint_id: n.id.clone(),
        parent_checkpoint_id: n.parent.clone(),
        source: n.source().map(str::to_owned),
        step: n.step(),
        mode: if n.facts.delta {
            crate::model::ChannelMode::Delta
        } else {
            crate::model::ChannelMode::Full
        },
        messages_encoding: n.messages_encoding,
        writes: n.writes.len(),
        duration_only: is_duration_only(t, i),
        pending_tasks: ck.map(pending_tasks).unwrap_or_default(),
        contaminated: contaminated.contains(&i),
        children: n.children.iter().map(|&c| t.nodes[c].id.clone()).collect(),
    }
}

/// Builds the chain (from `from`, default the head) or the whole tree of a loaded namespace.
pub fn report(
    t: &LoadedThread,
    from: Option<&str>,
    tree: bool,
    max_depth: Option<usize>,
    inputs: Option<&TurnInputs>,
) -> Result<LineageReport, crate::error::StoreError> {
    let analysis = fork_analysis(t);
    let contaminated: HashSet<usize> = analysis.contaminated.iter().map(|&(k, _)| k).collect();
    let mut findings = integrity(t, max_depth);
    findings.extend(regenerate_findings(t, inputs));
    findings.extend(fork_findings(t, &analysis));
    let start =
        match from {
            Some(id) => Some(*t.index.get(id).ok_or_else(|| {
                crate::error::StoreError::CheckpointNotFound {
                    thread_id: t.thread_id.clone(),
                    checkpoint_ns: t.checkpoint_ns.clone(),
                    checkpoint_id: id.to_owned(),
                }
            })?),
            None => t.head(),
        };
    let (checkpoints, end) = if tree {
        (
            (0..t.nodes.len())
                .map(|i| entry(t, i, &contaminated))
                .collect(),
            None,
        )
    } else {
        match start {
            Some(s) => {
                let (ids, end) = chain(t, s, usize::MAX);
                (
                    ids.iter().map(|&i| entry(t, i, &contaminated)).collect(),
                    Some(match end {
                        WalkEnd::Root => "root",
                        WalkEnd::Dangling(_) => "dangling",
                        WalkEnd::Cycle(_) => "cycle",
                        WalkEnd::Budget => "budget",
                    }),
                )
            }
            None => (Vec::new(), None),
        }
    };
    Ok(LineageReport {
        thread_id: t.thread_id.clone(),
        checkpoint_ns: t.checkpoint_ns.clone(),
        view: if tree { "tree" } else { "chain" },
        from: start.map(|s| t.nodes[s].id.clone()),
        end,
        checkpoints,
        findings,
    })
}
