//! `dfck diff`: a structural diff of two materialized states (two checkpoints of a thread,
//! of two threads, or of two stores). Messages are matched by id (by position when they have
//! none): added, removed, changed (with a line diff of their content and the other fields
//! that differ). Other channels are compared key by key when both values are objects, whole
//! otherwise. docs/diff.md describes the output.

use crate::commands::inspect::StateReport;
use dfck_core::codec::to_json;
use serde::Serialize;
use serde_json::{Map, Value as Json};

/// One side of the diff.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// Where the store is (redacted).
    pub store: String,
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// The full checkpoint id.
    pub checkpoint_id: String,
    /// How many messages the state holds.
    pub messages: usize,
}

/// How a message or key changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Only on the right side (B).
    Added,
    /// Only on the left side (A).
    Removed,
    /// On both sides, different.
    Changed,
}

impl Change {
    /// `added`, `removed`, `changed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Changed => "changed",
        }
    }
}

/// A message that differs.
#[derive(Debug, Clone, Serialize)]
pub struct MessageDiff {
    /// `added`, `removed` or `changed`.
    pub change: Change,
    /// The message id (`null` for id-less messages, matched by position).
    pub id: Option<String>,
    /// Its message type (`human`, `ai`, `tool`, …).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its index in A's list.
    pub index_a: Option<usize>,
    /// Its index in B's list.
    pub index_b: Option<usize>,
    /// Fields whose values differ (changed messages).
    pub fields: Vec<String>,
    /// A unified line diff of the content (changed messages whose content differs).
    pub content_diff: Option<String>,
    /// The message in A.
    pub a: Option<Json>,
    /// The message in B.
    pub b: Option<Json>,
}

/// A channel (other than `messages`) that differs.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelDiff {
    /// Channel name.
    pub channel: String,
    /// `added`, `removed` or `changed`.
    pub change: Change,
    /// Key-level changes when both values are objects.
    pub keys: Vec<KeyDiff>,
    /// A's value (when not compared key by key).
    pub a: Option<Json>,
    /// B's value (when not compared key by key).
    pub b: Option<Json>,
}

/// One key of an object channel that differs.
#[derive(Debug, Clone, Serialize)]
pub struct KeyDiff {
    /// The key.
    pub key: String,
    /// `added`, `removed` or `changed`.
    pub change: Change,
    /// A's value.
    pub a: Option<Json>,
    /// B's value.
    pub b: Option<Json>,
}

/// The whole diff.
#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    /// Left side.
    pub a: Side,
    /// Right side.
    pub b: Side,
    /// Whether the two states are equal.
    pub identical: bool,
    /// Messages that differ, in A's order then B's additions.
    pub messages: Vec<MessageDiff>,
    /// Whether the common messages appear in another order.
    pub reordered: bool,
    /// Channels that differ, by name.
    pub channels: Vec<ChannelDiff>,
}

fn side(r: &StateReport, store: &str, messages: usize) -> Side {
    Side {
        store: store.to_owned(),
        thread_id: r.thread_id.clone(),
        checkpoint_ns: r.checkpoint_ns.clone(),
        checkpoint_id: r.checkpoint_id.clone(),
        messages,
    }
}

fn values_json(r: &StateReport) -> Map<String, Json> {
    r.values
        .0
        .iter()
        .map(|(k, v)| (k.clone(), to_json(v)))
        .collect()
}

/// A message's matching key: its id, else its position.
fn key_of(m: &Json, i: usize) -> String {
    match m.get("id").and_then(Json::as_str) {
        Some(id) => format!("id:{id}"),
        None => format!("#{i}"),
    }
}

fn str_field(m: &Json, k: &str) -> Option<String> {
    m.get(k).and_then(Json::as_str).map(str::to_owned)
}

fn text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// A unified line diff of two texts.
pub fn line_diff(a: &str, b: &str) -> String {
    let d = similar::TextDiff::from_lines(a, b);
    let mut out = String::new();
    for change in d.iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Delete => '-',
            similar::ChangeTag::Insert => '+',
            similar::ChangeTag::Equal => ' ',
        };
        out.push(sign);
        out.push_str(change.value().trim_end_matches('\n'));
        out.push('\n');
    }
    out
}

fn diff_messages(a: &[Json], b: &[Json]) -> (Vec<MessageDiff>, bool) {
    let keys_a: Vec<String> = a.iter().enumerate().map(|(i, m)| key_of(m, i)).collect();
    let keys_b: Vec<String> = b.iter().enumerate().map(|(i, m)| key_of(m, i)).collect();
    let index_b: std::collections::HashMap<&str, usize> = keys_b
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let index_a: std::collections::HashMap<&str, usize> = keys_a
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let mut out = Vec::new();
    let mut common_b_order = Vec::new();
    for (i, ma) in a.iter().enumerate() {
        let id = str_field(ma, "id");
        match index_b.get(keys_a[i].as_str()) {
            None => out.push(MessageDiff {
                change: Change::Removed,
                id,
                kind: str_field(ma, "type"),
                index_a: Some(i),
                index_b: None,
                fields: Vec::new(),
                content_diff: None,
                a: Some(ma.clone()),
                b: None,
            }),
            Some(&j) => {
                common_b_order.push(j);
                let mb = &b[j];
                if ma == mb {
                    continue;
                }
                let mut fields: Vec<String> = Vec::new();
                if let (Some(oa), Some(ob)) = (ma.as_object(), mb.as_object()) {
                    for (k, v) in oa {
                        if ob.get(k) != Some(v) {
                            fields.push(k.clone());
                        }
                    }
                    for k in ob.keys() {
                        if !oa.contains_key(k) {
                            fields.push(k.clone());
                        }
                    }
                }
                let content_diff = (ma.get("content") != mb.get("content")).then(|| {
                    line_diff(
                        &ma.get("content").map(text).unwrap_or_default(),
                        &mb.get("content").map(text).unwrap_or_default(),
                    )
                });
                out.push(MessageDiff {
                    change: Change::Changed,
                    id,
                    kind: str_field(mb, "type"),
                    index_a: Some(i),
                    index_b: Some(j),
                    fields,
                    content_diff,
                    a: Some(ma.clone()),
                    b: Some(mb.clone()),
                });
            }
        }
    }
    for (j, mb) in b.iter().enumerate() {
        if !index_a.contains_key(keys_b[j].as_str()) {
            out.push(MessageDiff {
                change: Change::Added,
                id: str_field(mb, "id"),
                kind: str_field(mb, "type"),
                index_a: None,
                index_b: Some(j),
                fields: Vec::new(),
                content_diff: None,
                a: None,
                b: Some(mb.clone()),
            });
        }
    }
    let reordered = common_b_order.windows(2).any(|w| w[0] > w[1]);
    (out, reordered)
}

fn diff_channel(channel: &str, a: Option<&Json>, b: Option<&Json>) -> Option<ChannelDiff> {
    let whole = |change| ChannelDiff {
        channel: channel.to_owned(),
        change,
        keys: Vec::new(),
        a: a.cloned(),
        b: b.cloned(),
    };
    match (a, b) {
        (None, None) => None,
        (Some(_), None) => Some(whole(Change::Removed)),
        (None, Some(_)) => Some(whole(Change::Added)),
        (Some(x), Some(y)) if x == y => None,
        (Some(Json::Object(x)), Some(Json::Object(y))) => {
            let mut keys = Vec::new();
            for (k, v) in x {
                match y.get(k) {
                    None => keys.push(KeyDiff {
                        key: k.clone(),
                        change: Change::Removed,
                        a: Some(v.clone()),
                        b: None,
                    }),
                    Some(w) if w != v => keys.push(KeyDiff {
                        key: k.clone(),
                        change: Change::Changed,
                        a: Some(v.clone()),
                        b: Some(w.clone()),
                    }),
                    Some(_) => {}
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    keys.push(KeyDiff {
                        key: k.clone(),
                        change: Change::Added,
                        a: None,
                        b: Some(w.clone()),
                    });
                }
            }
            Some(ChannelDiff {
                channel: channel.to_owned(),
                change: Change::Changed,
                keys,
                a: None,
                b: None,
            })
        }
        (Some(_), Some(_)) => Some(whole(Change::Changed)),
    }
}

/// Diffs two materialized states; `store_a`/`store_b` say where each came from.
pub fn diff(a: &StateReport, store_a: &str, b: &StateReport, store_b: &str) -> DiffReport {
    let va = values_json(a);
    let vb = values_json(b);
    let msgs = |v: &Map<String, Json>| match v.get("messages") {
        Some(Json::Array(m)) => Some(m.clone()),
        _ => None,
    };
    let (ma, mb) = (msgs(&va), msgs(&vb));
    let (messages, reordered) = match (&ma, &mb) {
        (Some(x), Some(y)) => diff_messages(x, y),
        _ => (Vec::new(), false),
    };
    let mut names: Vec<&String> = va.keys().chain(vb.keys()).collect();
    names.sort();
    names.dedup();
    let channels: Vec<ChannelDiff> = names
        .into_iter()
        .filter(|k| !(*k == "messages" && ma.is_some() && mb.is_some()))
        .filter_map(|k| diff_channel(k, va.get(k), vb.get(k)))
        .collect();
    let identical = messages.is_empty() && !reordered && channels.is_empty();
    DiffReport {
        a: side(a, store_a, ma.as_ref().map_or(0, Vec::len)),
        b: side(b, store_b, mb.as_ref().map_or(0, Vec::len)),
        identical,
        messages,
        reordered,
        channels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_by_id_and_channels_by_key() {
        let a = vec![
            json!({"id": "h-1", "type": "human", "content": "hi"}),
            json!({"id": "ai-1", "type": "ai", "content": "one\ntwo"}),
            json!({"id": "gone", "type": "ai", "content": "x"}),
        ];
        let b = vec![
            json!({"id": "h-1", "type": "human", "content": "hi"}),
            json!({"id": "ai-1", "type": "ai", "content": "one\nthree"}),
            json!({"id": "new", "type": "tool", "content": "y"}),
        ];
        let (d, reordered) = diff_messages(&a, &b);
        assert!(!reordered);
        let summary: Vec<(Change, Option<&str>)> =
            d.iter().map(|m| (m.change, m.id.as_deref())).collect();
        assert_eq!(
            summary,
            vec![
                (Change::Changed, Some("ai-1")),
                (Change::Removed, Some("gone")),
                (Change::Added, Some("new")),
            ]
        );
        assert_eq!(d[0].fields, vec!["content"]);
        assert_eq!(d[0].content_diff.as_deref(), Some(" one\n-two\n+three\n"));
        let c = diff_channel(
            "todos",
            Some(&json!({"a": 1, "b": 2})),
            Some(&json!({"a": 1, "b": 3, "c": 4})),
        )
        .unwrap();
        let keys: Vec<(&str, Change)> = c.keys.iter().map(|k| (k.key.as_str(), k.change)).collect();
        assert_eq!(keys, vec![("b", Change::Changed), ("c", Change::Added)]);
        assert!(diff_channel("x", Some(&json!(1)), Some(&json!(1))).is_none());
        let (_, reordered) = diff_messages(&b, &[b[1].clone(), b[0].clone()]);
        assert!(reordered);
    }
}
