//! The two messages reducers a delta thread may have been written with:
//! LangGraph's `_messages_delta_reducer` and DeerFlow's `merge_message_writes`.

use crate::codec::{EXT_PYDANTIC_V2, Value};
use std::collections::{HashMap, HashSet};

/// DeerFlow/LangChain's "remove every message" id.
pub const REMOVE_ALL_MESSAGES: &str = "__remove_all__";

/// Which messages reducer replays delta writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reducer {
    /// `langgraph.graph.message._messages_delta_reducer`.
    Langgraph,
    /// DeerFlow's `merge_message_writes` (add_messages semantics).
    Deerflow,
}

impl Reducer {
    /// Folds `writes` into `state` in one batch call.
    pub fn apply(self, state: Vec<Value>, writes: &[&Value]) -> Result<Vec<Value>, String> {
        match self {
            Reducer::Langgraph => langgraph_delta(state, writes),
            Reducer::Deerflow => deerflow_merge(state, writes),
        }
    }
}

/// The message id, if the value is a message (or message dict) with a string id.
pub fn message_id(m: &Value) -> Option<&str> {
    if m.is_model() {
        return m.model_field_str("id");
    }
    if m.as_map().is_some() {
        return m.get("id").and_then(Value::as_str);
    }
    None
}

/// Is the value a `RemoveMessage`?
pub fn is_remove(m: &Value) -> bool {
    if let Some((_, class)) = m.ext_class() {
        return class == "RemoveMessage";
    }
    m.as_map().is_some() && m.get("type").and_then(Value::as_str) == Some("remove")
}

fn s(x: &str) -> Value {
    Value::Str(x.to_owned())
}

/// Builds a LangChain message (ext 5, langchain-core 1.8 field order) from a role and content,
/// as `convert_to_messages` does for strings, `(role, content)` tuples and role dicts.
fn make_message(role: &str, content: Value, extra: &Value) -> Option<Value> {
    let (module, class, ty) = match role {
        "human" | "user" => ("langchain_core.messages.human", "HumanMessage", "human"),
        "ai" | "assistant" => ("langchain_core.messages.ai", "AIMessage", "ai"),
        "system" | "developer" => ("langchain_core.messages.system", "SystemMessage", "system"),
        "tool" => ("langchain_core.messages.tool", "ToolMessage", "tool"),
        "remove" => (
            "langchain_core.messages.modifier",
            "RemoveMessage",
            "remove",
        ),
        _ => return None,
    };
    let get = |k: &str| extra.get(k).cloned().unwrap_or(Value::Nil);
    let empty_map = || Value::Map(vec![]);
    let mut fields = vec![
        (s("content"), content),
        (
            s("additional_kwargs"),
            extra
                .get("additional_kwargs")
                .cloned()
                .unwrap_or_else(empty_map),
        ),
        (
            s("response_metadata"),
            extra
                .get("response_metadata")
                .cloned()
                .unwrap_or_else(empty_map),
        ),
        (s("type"), s(ty)),
        (s("name"), get("name")),
        (s("id"), get("id")),
    ];
    match ty {
        "ai" => {
            fields.push((
                s("tool_calls"),
                extra
                    .get("tool_calls")
                    .cloned()
                    .unwrap_or(Value::Array(vec![])),
            ));
            fields.push((
                s("invalid_tool_calls"),
                extra
                    .get("invalid_tool_calls")
                    .cloned()
                    .unwrap_or(Value::Array(vec![])),
            ));
            fields.push((s("usage_metadata"), get("usage_metadata")));
        }
        "tool" => {
            fields.push((s("tool_call_id"), get("tool_call_id")));
            fields.push((s("artifact"), get("artifact")));
            fields.push((
                s("status"),
                extra.get("status").cloned().unwrap_or_else(|| s("success")),
            ));
        }
        _ => {}
    }
    Some(Value::new_ext(
        EXT_PYDANTIC_V2,
        Value::Array(vec![
            s(module),
            s(class),
            Value::Map(fields),
            s("model_validate_json"),
        ]),
    ))
}

/// The message classes every LangGraph reader can rebuild: LangChain's own, from
/// `langchain_core.messages` (the module or one of its submodules, as the serializer stores
/// `__module__`). A message of another class is rebuilt only where its module imports; where
/// it does not, LangGraph's reader falls back to the class's fields as a plain dict, which
/// the messages reducer turns into a message of the type its `type` field names — so a
/// delta reader and a full-mode list can show it differently.
pub fn rebuildable_message_class(module: &str, class: &str) -> bool {
    const CLASSES: [&str; 7] = [
        "AIMessage",
        "HumanMessage",
        "SystemMessage",
        "ToolMessage",
        "ChatMessage",
        "FunctionMessage",
        "RemoveMessage",
    ];
    let core = module == "langchain_core.messages"
        || module
            .strip_prefix("langchain_core.messages.")
            .is_some_and(|sub| !sub.is_empty());
    core && CLASSES.contains(&class.strip_suffix("Chunk").unwrap_or(class))
}

/// The first message model in `items` whose class is not [`rebuildable_message_class`],
/// as `module.Class`.
pub fn unrebuildable_message<'a>(items: impl IntoIterator<Item = &'a Value>) -> Option<String> {
    items.into_iter().find_map(|m| {
        let (module, class) = m.ext_class().filter(|_| m.is_model())?;
        (!rebuildable_message_class(module, class)).then(|| format!("{module}.{class}"))
    })
}

/// `convert_to_messages` for one item: messages pass through (chunks become messages);
/// strings, `(role, content)` pairs and role dicts become messages; anything else is an
/// error, as it is for LangGraph (`Unsupported message type`).
pub fn coerce_message(v: Value) -> Result<Value, String> {
    if v.is_model() {
        return Ok(match v.ext_class() {
            Some((_, class)) if class.ends_with("Chunk") => chunk_to_message(&v),
            _ => v,
        });
    }
    let none = Value::Map(vec![]);
    let made = match &v {
        Value::Str(text) => make_message("human", s(text), &none),
        Value::Array(pair) if pair.len() == 2 => match &pair[0] {
            Value::Str(role) => make_message(role, pair[1].clone(), &none),
            _ => None,
        },
        Value::Map(_) => {
            let role = v
                .get("role")
                .or_else(|| v.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let content = v.get("content").cloned().unwrap_or_else(|| s(""));
            make_message(role, content, &v)
        }
        _ => None,
    };
    made.ok_or_else(|| {
        let kind = match &v {
            Value::Nil => "None".to_owned(),
            Value::Bool(_) => "bool".to_owned(),
            Value::Int(_) | Value::UInt(_) => "int".to_owned(),
            Value::F32(_) | Value::F64(_) => "float".to_owned(),
            Value::Bin(_) => "bytes".to_owned(),
            Value::Array(a) => format!("list of {}", a.len()),
            Value::Map(_) => "dict without a known 'role'/'type'".to_owned(),
            Value::Ext(_) => match v.ext_class() {
                Some((m, c)) => format!("{m}.{c}"),
                None => "ext value".to_owned(),
            },
            Value::Str(_) => "str".to_owned(),
        };
        format!("unsupported message type in messages: {kind}")
    })
}

/// `message_chunk_to_message`: a `*MessageChunk` becomes its message class (dropping the
/// chunk-only fields).
fn chunk_to_message(v: &Value) -> Value {
    let Some((module, class)) = v.ext_class() else {
        return v.clone();
    };
    let Some(base) = class.strip_suffix("Chunk") else {
        return v.clone();
    };
    let Some(fields) = v.model_fields().and_then(Value::as_map) else {
        return v.clone();
    };
    let kept: Vec<(Value, Value)> = fields
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                Some("tool_call_chunks") | Some("chunk_position")
            )
        })
        .map(|(k, val)| {
            if k.as_str() == Some("type") {
                if let Some(t) = val.as_str() {
                    return (k.clone(), s(t.strip_suffix("Chunk").unwrap_or(t)));
                }
            }
            (k.clone(), val.clone())
        })
        .collect();
    let code = v.as_ext().map(|e| e.code).unwrap_or(EXT_PYDANTIC_V2);
    Value::new_ext(
        code,
        Value::Array(vec![
            s(module),
            s(base),
            Value::Map(kept),
            s("model_validate_json"),
        ]),
    )
}

fn flatten<'a>(writes: &[&'a Value]) -> Vec<&'a Value> {
    let mut out = Vec::new();
    for w in writes {
        match w {
            Value::Array(items) => out.extend(items.iter()),
            other => out.push(*other),
        }
    }
    out
}

/// LangGraph 1.2's `_messages_delta_reducer`: id-indexed in-place replace, silent removal
/// of unknown ids, no `REMOVE_ALL`, no id assignment.
pub fn langgraph_delta(state: Vec<Value>, writes: &[&Value]) -> Result<Vec<Value>, String> {
    let mut slots: Vec<Option<Value>> = state
        .into_iter()
        .map(|m| coerce_message(m).map(Some))
        .collect::<Result<_, _>>()?;
    let incoming: Vec<Value> = flatten(writes)
        .into_iter()
        .map(|w| coerce_message(w.clone()))
        .collect::<Result<_, _>>()?;
    // Only the writes' ids are ever looked up: the state's other messages are not indexed
    // (the last of equal ids wins, as it would in a whole index).
    let wanted: HashSet<&str> = incoming.iter().filter_map(message_id).collect();
    let mut index: HashMap<String, usize> = HashMap::with_capacity(wanted.len());
    if !wanted.is_empty() {
        for (i, m) in slots.iter().enumerate() {
            if let Some(id) = m.as_ref().and_then(message_id)
                && wanted.contains(id)
            {
                index.insert(id.to_owned(), i);
            }
        }
    }
    drop(wanted);
    for m in incoming {
        let Some(id) = message_id(&m).map(str::to_owned) else {
            slots.push(Some(m));
            continue;
        };
        if is_remove(&m) {
            if let Some(i) = index.remove(&id) {
                slots[i] = None;
            }
        } else if let Some(&i) = index.get(&id) {
            slots[i] = Some(m);
        } else {
            index.insert(id, slots.len());
            slots.push(Some(m));
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

/// Message id → position in `state`.
fn id_index(state: &[Value]) -> HashMap<String, usize> {
    let mut ix = HashMap::with_capacity(state.len());
    for (i, m) in state.iter().enumerate() {
        if let Some(id) = message_id(m) {
            ix.insert(id.to_owned(), i);
        }
    }
    ix
}

/// DeerFlow's `merge_message_writes`: per write, `REMOVE_ALL` resets to the items after
/// the last marker; known ids are replaced in place or marked for removal; removing an
/// unknown id is an error; marked ids are dropped at the end of each write. Linear in the
/// state plus the writes (the id index survives from one write to the next).
pub fn deerflow_merge(state: Vec<Value>, writes: &[&Value]) -> Result<Vec<Value>, String> {
    let mut merged = DeerflowMessages::new(state)?;
    merged.apply(writes)?;
    Ok(merged.into_vec())
}

/// A message list kept open under DeerFlow's reducer: its items stay coerced and its id
/// index survives from one batch to the next, so a writer that appends a few messages per
/// step pays for those messages only, not for the whole list ([`deerflow_merge`] of every
/// batch in turn gives the same list).
#[derive(Debug, Clone, Default)]
pub struct DeerflowMessages {
    state: Vec<Value>,
    /// id → position; rebuilt only after a reset or a removal moved positions.
    index: Option<HashMap<String, usize>>,
}

impl DeerflowMessages {
    /// Opens a list (its items coerced to messages).
    pub fn new(state: Vec<Value>) -> Result<Self, String> {
        let state = state
            .into_iter()
            .map(coerce_message)
            .collect::<Result<_, _>>()?;
        Ok(DeerflowMessages { state, index: None })
    }

    /// The current list.
    pub fn messages(&self) -> &[Value] {
        &self.state
    }

    /// The list, closed.
    pub fn into_vec(self) -> Vec<Value> {
        self.state
    }

    /// Merges one batch of writes. On an error the list may hold part of the batch;
    /// callers drop it.
    pub fn apply(&mut self, writes: &[&Value]) -> Result<(), String> {
        const NULL_ARG: &str =
            "Must specify non-null arguments for both 'left' and 'right'. Only received: 'left'.";
        let state = &mut self.state;
        for w in writes {
            if matches!(w, Value::Nil) {
                return Err(NULL_ARG.into());
            }
            let items: Vec<Value> = match w {
                Value::Array(items) => items
                    .iter()
                    .cloned()
                    .map(coerce_message)
                    .collect::<Result<_, _>>()?,
                other => vec![coerce_message((*other).clone())?],
            };
            if let Some(last) = items
                .iter()
                .rposition(|m| is_remove(m) && message_id(m) == Some(REMOVE_ALL_MESSAGES))
            {
                *state = items[last + 1..].to_vec();
                self.index = None;
                continue;
            }
            let index = self.index.get_or_insert_with(|| id_index(state));
            let mut removed: HashSet<String> = HashSet::new();
            for m in items {
                let Some(id) = message_id(&m).map(str::to_owned) else {
                    state.push(m);
                    continue;
                };
                match index.get(&id) {
                    Some(&i) => {
                        if is_remove(&m) {
                            removed.insert(id);
                        } else {
                            removed.remove(&id);
                            state[i] = m;
                        }
                    }
                    None => {
                        if is_remove(&m) {
                            return Err(format!(
                                "Attempting to delete a message with an ID that doesn't exist ('{id}')"
                            ));
                        }
                        index.insert(id, state.len());
                        state.push(m);
                    }
                }
            }
            if !removed.is_empty() {
                state.retain(|m| message_id(m).is_none_or(|id| !removed.contains(id)));
                *index = id_index(state);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, content: &str) -> Value {
        make_message("human", s(content), &Value::Map(vec![(s("id"), s(id))])).unwrap()
    }
    fn rm(id: &str) -> Value {
        make_message("remove", s(""), &Value::Map(vec![(s("id"), s(id))])).unwrap()
    }
    fn ids(v: &[Value]) -> Vec<String> {
        v.iter()
            .map(|m| message_id(m).unwrap().to_owned())
            .collect()
    }
    fn content(m: &Value) -> &str {
        m.model_fields()
            .unwrap()
            .get("content")
            .unwrap()
            .as_str()
            .unwrap()
    }

    #[test]
    fn langgraph_replace_remove_append() {
        let state = vec![msg("a", "1"), msg("b", "2")];
        let w1 = Value::Array(vec![msg("c", "3"), rm("a"), rm("zzz")]);
        let w2 = msg("b", "2'");
        let out = langgraph_delta(state, &[&w1, &w2]).unwrap();
        assert_eq!(ids(&out), ["b", "c"]);
        assert_eq!(content(&out[0]), "2'");
    }

    /// The reducer as it indexed every message of the state: the reference the reducer,
    /// which indexes only the ids its writes name, must equal.
    fn whole_index(state: Vec<Value>, writes: &[&Value]) -> Result<Vec<Value>, String> {
        let mut slots: Vec<Option<Value>> = state
            .into_iter()
            .map(|m| coerce_message(m).map(Some))
            .collect::<Result<_, _>>()?;
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, m) in slots.iter().enumerate() {
            if let Some(id) = m.as_ref().and_then(message_id) {
                index.insert(id.to_owned(), i);
            }
        }
        for w in flatten(writes) {
            let m = coerce_message(w.clone())?;
            let Some(id) = message_id(&m).map(str::to_owned) else {
                slots.push(Some(m));
                continue;
            };
            if is_remove(&m) {
                if let Some(i) = index.remove(&id) {
                    slots[i] = None;
                }
            } else if let Some(&i) = index.get(&id) {
                slots[i] = Some(m);
            } else {
                index.insert(id, slots.len());
                slots.push(Some(m));
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }

    #[test]
    fn langgraph_indexing_only_the_written_ids_changes_nothing() {
        let anon = make_message("human", s("no id"), &Value::Map(vec![])).unwrap();
        // Equal ids in the state (the last wins), removed then added again, written twice
        // in one batch, removed twice, id-less messages, and a write that is no message.
        let state = vec![
            msg("a", "1"),
            msg("b", "2"),
            msg("a", "3"),
            anon.clone(),
            msg("c", "4"),
        ];
        let cases: Vec<Vec<Value>> = vec![
            vec![msg("a", "x")],
            vec![Value::Array(vec![rm("a"), msg("a", "y")])],
            vec![Value::Array(vec![msg("d", "1"), msg("d", "2")]), rm("d")],
            vec![rm("a"), rm("a"), msg("b", "z")],
            vec![anon.clone(), msg("c", "w"), rm("zzz")],
            vec![Value::Array(vec![])],
            vec![msg("e", "1"), Value::Int(3)],
        ];
        for writes in &cases {
            let refs: Vec<&Value> = writes.iter().collect();
            let got = langgraph_delta(state.clone(), &refs);
            assert_eq!(got, whole_index(state.clone(), &refs), "{writes:?}");
        }
        // A state item that is no message fails first, as before.
        let bad = vec![msg("a", "1"), Value::Int(1)];
        assert_eq!(
            langgraph_delta(bad.clone(), &[&msg("a", "2")]),
            whole_index(bad, &[&msg("a", "2")])
        );
    }

    #[test]
    fn deerflow_remove_all_and_errors() {
        let state = vec![msg("a", "1"), msg("b", "2")];
        let w = Value::Array(vec![
            msg("x", "dropped"),
            rm(REMOVE_ALL_MESSAGES),
            msg("s", "sum"),
        ]);
        let out = deerflow_merge(state.clone(), &[&w]).unwrap();
        assert_eq!(ids(&out), ["s"]);
        let bad = Value::Array(vec![rm("nope")]);
        assert!(
            deerflow_merge(state.clone(), &[&bad])
                .unwrap_err()
                .contains("('nope')")
        );
        // [M(x), Remove(x)] in one write removes x; [Remove(a), M'(a)] replaces a.
        let w = Value::Array(vec![msg("x", "1"), rm("x")]);
        assert_eq!(
            ids(&deerflow_merge(state.clone(), &[&w]).unwrap()),
            ["a", "b"]
        );
        let w = Value::Array(vec![rm("a"), msg("a", "new")]);
        let out = deerflow_merge(state.clone(), &[&w]).unwrap();
        assert_eq!(ids(&out), ["a", "b"]);
        assert_eq!(content(&out[0]), "new");
        // Duplicate id inside one write keeps the last content at the first position.
        let w = Value::Array(vec![msg("d", "1"), msg("e", "x"), msg("d", "2")]);
        let out = deerflow_merge(vec![], &[&w]).unwrap();
        assert_eq!(ids(&out), ["d", "e"]);
        assert_eq!(content(&out[0]), "2");
        assert!(deerflow_merge(vec![], &[&Value::Nil]).is_err());
    }

    #[test]
    fn deerflow_batch_equals_one_write_at_a_time() {
        // The id index carried across writes must follow removals and resets: one batch of
        // writes gives what applying them one by one gives.
        let writes = [
            Value::Array(vec![msg("a", "1"), msg("b", "2"), msg("c", "3")]),
            rm("a"),
            msg("c", "3'"),
            msg("d", "4"),
            Value::Array(vec![rm("b"), rm("d")]),
            msg("c", "3''"),
            Value::Array(vec![rm(REMOVE_ALL_MESSAGES), msg("e", "5")]),
            msg("f", "6"),
            msg("e", "5'"),
        ];
        let refs: Vec<&Value> = writes.iter().collect();
        let batch = deerflow_merge(vec![], &refs).unwrap();
        let mut one = Vec::new();
        for w in &writes {
            one = deerflow_merge(one, &[w]).unwrap();
        }
        assert_eq!(ids(&batch), ["e", "f"]);
        assert_eq!(content(&batch[0]), "5'");
        assert_eq!(ids(&batch), ids(&one));
        let before_reset = deerflow_merge(vec![], &refs[..6]).unwrap();
        assert_eq!(ids(&before_reset), ["c"]);
        assert_eq!(content(&before_reset[0]), "3''");
    }

    #[test]
    fn open_list_equals_merging_each_write_from_scratch() {
        // The writer keeps one list open across writes; after each write it must hold what
        // merging that write into the previous list from scratch gives.
        let writes = [
            Value::Array(vec![msg("a", "1"), msg("b", "2")]),
            msg("c", "3"),
            msg("a", "1'"),
            Value::Array(vec![rm("b")]),
            msg("d", "4"),
            Value::Array(vec![rm(REMOVE_ALL_MESSAGES), msg("e", "5")]),
            msg("e", "5'"),
            msg("f", "6"),
        ];
        let mut open = DeerflowMessages::new(vec![msg("z", "0")]).unwrap();
        let mut scratch = vec![msg("z", "0")];
        for w in &writes {
            open.apply(&[w]).unwrap();
            scratch = deerflow_merge(scratch, &[w]).unwrap();
            assert_eq!(open.messages(), scratch.as_slice());
        }
        assert_eq!(ids(open.messages()), ["e", "f"]);
        assert!(open.apply(&[&rm("nope")]).is_err());
    }

    #[test]
    fn coercion() {
        let m = coerce_message(s("hello")).unwrap();
        assert_eq!(
            m.ext_class(),
            Some(("langchain_core.messages.human", "HumanMessage"))
        );
        let d = Value::Map(vec![
            (s("role"), s("assistant")),
            (s("content"), s("x")),
            (s("id"), s("q")),
        ]);
        let m = coerce_message(d).unwrap();
        assert!(coerce_message(Value::Int(5)).unwrap_err().contains("int"));
        let no_role = Value::Map(vec![(s("id"), s("x"))]);
        assert!(coerce_message(no_role).is_err());
        assert_eq!(message_id(&m), Some("q"));
        assert_eq!(m.ext_class().unwrap().1, "AIMessage");
    }
}
