//! LangChain messages as LangGraph's serializer stores them (ext 5, pydantic v2 `model_dump()`
//! fields in model order, langchain-core 1.x): shared by the channel workload
//! ([`crate::native::channels`]) and the production workload
//! ([`crate::production::workload`]).

use dfck_core::codec::{EXT_PYDANTIC_V2, Ext, Value, encode};

/// A string value.
pub(crate) fn s(x: &str) -> Value {
    Value::Str(x.to_owned())
}

/// A map value with string keys, in the given order.
pub(crate) fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (s(k), v)).collect())
}

/// A LangChain message as LangGraph's serializer stores it (ext 5, `model_dump()` fields in
/// model order, langchain-core 1.x).
pub fn message(kind: &str, id: &str, content: Value, extra: Vec<(&str, Value)>) -> Value {
    let (module, class) = match kind {
        "human" => ("langchain_core.messages.human", "HumanMessage"),
        "ai" => ("langchain_core.messages.ai", "AIMessage"),
        "tool" => ("langchain_core.messages.tool", "ToolMessage"),
        _ => ("langchain_core.messages.system", "SystemMessage"),
    };
    let mut fields = vec![
        ("content", content),
        ("additional_kwargs", map(vec![])),
        ("response_metadata", map(vec![])),
        ("type", s(kind)),
        ("name", Value::Nil),
        ("id", s(id)),
    ];
    fields.extend(extra);
    let inner = Value::Array(vec![
        s(module),
        s(class),
        map(fields),
        s("model_validate_json"),
    ]);
    // Kept raw (decoded on demand), like values read from a store: cheap to clone.
    Value::Ext(Box::new(Ext::lazy(
        EXT_PYDANTIC_V2,
        bytes::Bytes::from(encode(&inner)),
    )))
}

/// An `AIMessage` (with `tool_calls`, `invalid_tool_calls`, `usage_metadata`).
pub fn ai_message(id: &str, content: Value, tool_calls: Vec<Value>) -> Value {
    message(
        "ai",
        id,
        content,
        vec![
            ("tool_calls", Value::Array(tool_calls)),
            ("invalid_tool_calls", Value::Array(vec![])),
            ("usage_metadata", Value::Nil),
        ],
    )
}
