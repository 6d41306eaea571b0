//! LangGraph's strict deserialization as `langgraph-checkpoint==4.3.2` (the version the
//! project pins) defines it: its safe set mirrored from `SAFE_MSGPACK_TYPES` and
//! `SAFE_MSGPACK_METHODS` (`langgraph/checkpoint/serde/_msgpack.py` of that version), dfck's
//! denylist of modules no stored value has a reason to name, and the class of every import a
//! stored value asks for ([`classify`]; `dfck audit`, docs/security.md).
//!
//! What 4.3.2's loader does (`_create_msgpack_ext_hook` in `jsonplus.py`): ext 0, 1, 2, 4 and
//! 5 import `module.name` when `(module, name)` is in the safe set, or in
//! `allowed_msgpack_modules`, or when that list is `True` (the permissive default; strict
//! mode is `LANGGRAPH_STRICT_MSGPACK=true` or an explicit list); otherwise the value comes
//! back as its payload (a dict, a list, a string). Ext 3 calls `module.name.method` only when
//! the triple is in `SAFE_MSGPACK_METHODS`, in every mode: no allowlist adds a method. Ext 6
//! imports numpy without any check; ext 7 imports nothing. A legacy `json` row's `lc: 2`
//! constructor is revived when its `(namespace, name)` is in the safe set or its id is in
//! `allowed_json_modules` (a separate switch, off by default in every mode); `lc: 1` is
//! langchain-core's `Reviver` with its own allowlist (`allowed_objects='core'`).

use crate::codec::imports::Via;
use serde::Serialize;

/// The `langgraph-checkpoint` release whose safe set this module mirrors.
pub const LANGGRAPH_CHECKPOINT: &str = "4.3.2";

/// `SAFE_MSGPACK_TYPES` of langgraph-checkpoint 4.3.2: `(module, name)` pairs every mode
/// revives.
pub const SAFE_MSGPACK_TYPES: &[(&str, &str)] = &[
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("datetime", "time"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("uuid", "UUID"),
    ("decimal", "Decimal"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("collections", "deque"),
    ("ipaddress", "IPv4Address"),
    ("ipaddress", "IPv4Interface"),
    ("ipaddress", "IPv4Network"),
    ("ipaddress", "IPv6Address"),
    ("ipaddress", "IPv6Interface"),
    ("ipaddress", "IPv6Network"),
    ("pathlib", "Path"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("pathlib._local", "Path"),
    ("pathlib._local", "PosixPath"),
    ("pathlib._local", "WindowsPath"),
    ("zoneinfo", "ZoneInfo"),
    ("re", "compile"),
    ("langchain_core.messages.base", "BaseMessage"),
    ("langchain_core.messages.base", "BaseMessageChunk"),
    ("langchain_core.messages.human", "HumanMessage"),
    ("langchain_core.messages.human", "HumanMessageChunk"),
    ("langchain_core.messages.ai", "AIMessage"),
    ("langchain_core.messages.ai", "AIMessageChunk"),
    ("langchain_core.messages.system", "SystemMessage"),
    ("langchain_core.messages.system", "SystemMessageChunk"),
    ("langchain_core.messages.chat", "ChatMessage"),
    ("langchain_core.messages.chat", "ChatMessageChunk"),
    ("langchain_core.messages.tool", "ToolMessage"),
    ("langchain_core.messages.tool", "ToolMessageChunk"),
    ("langchain_core.messages.function", "FunctionMessage"),
    ("langchain_core.messages.function", "FunctionMessageChunk"),
    ("langchain_core.messages.modifier", "RemoveMessage"),
    ("langchain_core.documents.base", "Document"),
    ("langgraph.types", "Send"),
    ("langgraph.types", "TimeoutPolicy"),
    ("langgraph.types", "Interrupt"),
    ("langgraph.types", "Command"),
    ("langgraph.types", "StateSnapshot"),
    ("langgraph.types", "PregelTask"),
    ("langgraph.types", "Overwrite"),
    ("langgraph.store.base", "Item"),
    ("langgraph.store.base", "GetOp"),
];

/// `SAFE_MSGPACK_METHODS` of langgraph-checkpoint 4.3.2: the only `(module, name, method)`
/// an ext 3 may call, in every mode.
pub const SAFE_MSGPACK_METHODS: &[(&str, &str, &str)] =
    &[("datetime", "datetime", "fromisoformat")];

/// Modules (and every submodule of them) no stored value has a reason to name: their
/// callables run code or processes, load code or objects, or open files and sockets when
/// called with the arguments a value carries. A value naming one is possible tampering.
/// `builtins` is denied outside the safe set (`set`, `frozenset`). docs/security.md lists
/// them with the reasons; the safe set and the allowlist, not this list, are the boundary.
pub const DENIED_MODULES: &[&str] = &[
    // run code or processes
    "os",
    "posix",
    "nt",
    "subprocess",
    "_posixsubprocess",
    "pty",
    "runpy",
    "code",
    "codeop",
    "timeit",
    "pdb",
    "bdb",
    "trace",
    "profile",
    "cProfile",
    "multiprocessing",
    "concurrent",
    "asyncio",
    "threading",
    "_thread",
    "signal",
    "webbrowser",
    // load code or objects, reach the interpreter
    "sys",
    "importlib",
    "imp",
    "zipimport",
    "pkgutil",
    "pickle",
    "_pickle",
    "cPickle",
    "marshal",
    "shelve",
    "dill",
    "cloudpickle",
    "copyreg",
    "builtins",
    "__builtin__",
    "ctypes",
    "_ctypes",
    "cffi",
    "gc",
    "inspect",
    "operator",
    "functools",
    // files
    "io",
    "_io",
    "shutil",
    "tempfile",
    "fcntl",
    "mmap",
    // sockets
    "socket",
    "_socket",
    "ssl",
    "socketserver",
    "http.client",
    "http.server",
    "urllib.request",
    "urllib3",
    "ftplib",
    "smtplib",
    "telnetlib",
    "poplib",
    "imaplib",
    "nntplib",
    "xmlrpc",
    "requests",
    "httpx",
];

/// How strict mode treats one import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Revived in every mode without an allowlist entry.
    Safe,
    /// Revived under strict mode only when an allowlist names it (else it comes back as a
    /// dict of its fields, or its argument).
    NeedsAllowlist,
    /// Never revived in 4.3.2 (a method call outside `SAFE_MSGPACK_METHODS`), or naming a
    /// denied module or a shape LangGraph does not write: possible tampering.
    NeverAllowed,
}

impl Class {
    /// How tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Class::Safe => "safe",
            Class::NeedsAllowlist => "needs allowlist",
            Class::NeverAllowed => "never allowed",
        }
    }
}

/// The serializer argument that allows an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Switch {
    /// `JsonPlusSerializer(allowed_msgpack_modules=[(module, name), …])`, or
    /// `checkpointer.serde.allowed_msgpack_modules` in `langgraph.json`.
    AllowedMsgpackModules,
    /// `JsonPlusSerializer(allowed_json_modules=[(*namespace, name), …])`.
    AllowedJsonModules,
}

/// The class of one import, the switch that would allow it, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The class.
    pub class: Class,
    /// For [`Class::NeedsAllowlist`]: the list it must go into.
    pub switch: Option<Switch>,
    /// Why, in a few words.
    pub reason: &'static str,
}

/// Whether `(module, name)` is in `SAFE_MSGPACK_TYPES`.
pub fn is_safe_type(module: &str, name: &str) -> bool {
    SAFE_MSGPACK_TYPES.contains(&(module, name))
}

/// Whether `(module, name, method)` is in `SAFE_MSGPACK_METHODS`.
pub fn is_safe_method(module: &str, name: &str, method: &str) -> bool {
    SAFE_MSGPACK_METHODS.contains(&(module, name, method))
}

/// The entry of [`DENIED_MODULES`] that `module` is, or is a submodule of.
pub fn denied(module: &str) -> Option<&'static str> {
    DENIED_MODULES.iter().copied().find(|d| {
        module == *d || (module.starts_with(d) && module.as_bytes().get(d.len()) == Some(&b'.'))
    })
}

const DENIED: &str = "a module on dfck's denylist: possible tampering";

/// The class of an import found in a stored value ([`crate::codec::imports::Found::Import`]).
pub fn classify(via: Via, module: &str, name: &str, method: Option<&str>) -> Verdict {
    let verdict = |class, switch, reason| Verdict {
        class,
        switch,
        reason,
    };
    let never = |reason| verdict(Class::NeverAllowed, None, reason);
    match via {
        Via::Ext(3) => match method {
            Some(m) if is_safe_method(module, name, m) => {
                verdict(Class::Safe, None, "in SAFE_MSGPACK_METHODS")
            }
            _ if denied(module).is_some() => never(
                "a method call outside SAFE_MSGPACK_METHODS, on a module on dfck's denylist: possible tampering",
            ),
            _ => never(
                "a method call outside SAFE_MSGPACK_METHODS: blocked in every mode, the value comes back as its argument",
            ),
        },
        Via::Ext(6) => verdict(
            Class::Safe,
            None,
            "ext 6 is not gated in 4.3.2: every mode imports numpy",
        ),
        _ if is_safe_type(module, name) => verdict(Class::Safe, None, "in SAFE_MSGPACK_TYPES"),
        _ if denied(module).is_some() => never(DENIED),
        Via::JsonLc1 => verdict(
            Class::Safe,
            None,
            "langchain-core's Reviver decides (allowed_objects='core'), in every mode",
        ),
        Via::JsonLc2 => verdict(
            Class::NeedsAllowlist,
            Some(Switch::AllowedJsonModules),
            "comes back as a dict in every mode unless allowed_json_modules names it",
        ),
        Via::Ext(0) => verdict(
            Class::NeedsAllowlist,
            Some(Switch::AllowedMsgpackModules),
            "comes back as its argument (an enum's value) under strict mode unless allowed_msgpack_modules names it",
        ),
        Via::Ext(1) => verdict(
            Class::NeedsAllowlist,
            Some(Switch::AllowedMsgpackModules),
            "comes back as its arguments (a list) under strict mode unless allowed_msgpack_modules names it",
        ),
        Via::Ext(_) => verdict(
            Class::NeedsAllowlist,
            Some(Switch::AllowedMsgpackModules),
            "comes back as its fields (a dict) under strict mode unless allowed_msgpack_modules names it",
        ),
    }
}

/// The class of a constructor that is not LangGraph's `(module, name, …)` shape.
pub fn classify_malformed() -> Verdict {
    Verdict {
        class: Class::NeverAllowed,
        switch: None,
        reason: "not the (module, name, …) shape LangGraph writes: possible tampering",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let c = |via, m: &str, n: &str, meth| classify(via, m, n, meth).class;
        assert_eq!(
            c(Via::Ext(5), "langchain_core.messages.ai", "AIMessage", None),
            Class::Safe
        );
        assert_eq!(c(Via::Ext(0), "builtins", "set", None), Class::Safe);
        assert_eq!(
            c(Via::Ext(0), "builtins", "eval", None),
            Class::NeverAllowed
        );
        assert_eq!(
            c(Via::Ext(2), "app.models", "Point", None),
            Class::NeedsAllowlist
        );
        assert_eq!(
            c(Via::Ext(0), "subprocess", "Popen", None),
            Class::NeverAllowed
        );
        assert_eq!(c(Via::Ext(1), "os.path", "join", None), Class::NeverAllowed);
        assert_eq!(
            c(Via::Ext(1), "osmium", "Thing", None),
            Class::NeedsAllowlist
        );
        assert_eq!(
            c(Via::Ext(1), "http", "HTTPStatus", None),
            Class::NeedsAllowlist
        );
        assert_eq!(
            c(Via::Ext(1), "http.client", "HTTPConnection", None),
            Class::NeverAllowed
        );
        let dt = Some("fromisoformat");
        assert_eq!(c(Via::Ext(3), "datetime", "datetime", dt), Class::Safe);
        assert_eq!(
            c(Via::Ext(3), "datetime", "datetime", Some("now")),
            Class::NeverAllowed
        );
        assert_eq!(
            c(Via::Ext(3), "pendulum", "DateTime", dt),
            Class::NeverAllowed
        );
        assert_eq!(c(Via::Ext(6), "numpy", "ndarray", None), Class::Safe);
        assert_eq!(c(Via::JsonLc2, "uuid", "UUID", None), Class::Safe);
        let json = classify(Via::JsonLc2, "app.models", "Point", None);
        assert_eq!(json.class, Class::NeedsAllowlist);
        assert_eq!(json.switch, Some(Switch::AllowedJsonModules));
        assert_eq!(c(Via::JsonLc2, "os", "system", None), Class::NeverAllowed);
        assert_eq!(
            c(Via::JsonLc1, "langchain", "HumanMessage", None),
            Class::Safe
        );
        assert_eq!(denied("importlib.util"), Some("importlib"));
        assert_eq!(denied("iox"), None);
    }
}
