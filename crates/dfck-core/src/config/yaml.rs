//! The YAML node builder: one document parsed with `yaml-rust2`'s event parser into a
//! [`Node`] tree resolved like PyYAML's `safe_load`, plus the accessors and the `$VAR`
//! substitution discovery uses. Alias expansion is bounded ([`MAX_NODES`]).

use super::invalid;
use crate::error::ConfigError;
use std::collections::HashMap;
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

/// A YAML value, resolved like PyYAML's `safe_load` (YAML 1.1 booleans, last duplicate key
/// wins, `<<` merge keys).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(String),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }

    /// A short rendering of a scalar, for error messages.
    pub(super) fn show(&self) -> String {
        match self {
            Node::Null => "null".into(),
            Node::Bool(b) => b.to_string(),
            Node::Int(i) => i.to_string(),
            Node::Float(f) => f.clone(),
            Node::Str(s) => format!("'{s}'"),
            other => other.kind().into(),
        }
    }

    fn size(&self) -> usize {
        match self {
            Node::Seq(v) => 1 + v.iter().map(Node::size).sum::<usize>(),
            Node::Map(m) => 1 + m.iter().map(|(k, v)| k.size() + v.size()).sum::<usize>(),
            _ => 1,
        }
    }
}

pub(super) fn get<'a>(map: &'a [(Node, Node)], key: &str) -> Option<&'a Node> {
    map.iter()
        .find(|(k, _)| matches!(k, Node::Str(s) if s == key))
        .map(|(_, v)| v)
}

/// A string-valued key: missing or null → `None`; numbers are taken as their text (pydantic's
/// lax mode); anything else is an error.
pub(super) fn opt_str(
    map: &[(Node, Node)],
    key: &str,
    cfg: &str,
) -> Result<Option<String>, ConfigError> {
    match get(map, key) {
        None | Some(Node::Null) => Ok(None),
        Some(Node::Str(s)) => Ok(Some(s.clone())),
        Some(Node::Int(i)) => Ok(Some(i.to_string())),
        Some(Node::Float(f)) => Ok(Some(f.clone())),
        Some(other) => Err(invalid(
            cfg,
            key,
            format!("expected a string, found {}", other.kind()),
        )),
    }
}

pub(super) fn positive_int(node: &Node) -> Option<u64> {
    let v = match node {
        Node::Int(i) => u64::try_from(*i).ok()?,
        Node::Str(s) => s.trim().parse::<u64>().ok()?,
        _ => return None,
    };
    (v >= 1).then_some(v)
}

/// Replaces every string starting with `$` by the variable it names (DeerFlow's
/// `resolve_env_variables`); `key` is the dotted path, for errors.
pub(super) fn substitute(
    node: Node,
    key: &str,
    var: &dyn Fn(&str, &str) -> Result<String, ConfigError>,
) -> Result<Node, ConfigError> {
    Ok(match node {
        Node::Str(s) => match s.strip_prefix('$') {
            Some(name) => Node::Str(var(name, key)?),
            None => Node::Str(s),
        },
        Node::Seq(v) => Node::Seq(
            v.into_iter()
                .enumerate()
                .map(|(i, n)| substitute(n, &format!("{key}[{i}]"), var))
                .collect::<Result<_, _>>()?,
        ),
        Node::Map(m) => Node::Map(
            m.into_iter()
                .map(|(k, v)| {
                    let sub = match &k {
                        Node::Str(s) => format!("{key}.{s}"),
                        other => format!("{key}.{}", other.show()),
                    };
                    Ok((k, substitute(v, &sub, var)?))
                })
                .collect::<Result<_, ConfigError>>()?,
        ),
        other => other,
    })
}

/// Upper bound on nodes built, so alias expansion ("billion laughs") cannot exhaust memory.
const MAX_NODES: usize = 1_000_000;

/// Parses one YAML document (an empty stream is null).
pub(super) fn parse_yaml(text: &str) -> Result<Node, String> {
    enum Frame {
        Seq(Vec<Node>, usize),
        Map(Vec<(Node, Node)>, Option<Node>, usize),
    }
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut doc: Option<Node> = None;
    let mut built = 0usize;
    loop {
        let (event, _mark) = parser.next_token().map_err(|e| e.to_string())?;
        let (node, anchor) = match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {
                continue;
            }
            Event::SequenceStart(aid, _) => {
                stack.push(Frame::Seq(Vec::new(), aid));
                continue;
            }
            Event::MappingStart(aid, _) => {
                stack.push(Frame::Map(Vec::new(), None, aid));
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(v, aid)) => (Node::Seq(v), aid),
                _ => return Err("unbalanced sequence".into()),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(m, _, aid)) => (Node::Map(merge_keys(m)), aid),
                _ => return Err("unbalanced mapping".into()),
            },
            Event::Scalar(v, style, aid, tag) => (scalar(v, style, tag.as_ref()), aid),
            Event::Alias(id) => {
                let n = anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| "alias to an unknown anchor".to_owned())?;
                built += n.size();
                (n, 0)
            }
        };
        built += 1;
        if built > MAX_NODES {
            return Err(format!(
                "document too large (over {MAX_NODES} nodes after aliases)"
            ));
        }
        if anchor > 0 {
            anchors.insert(anchor, node.clone());
        }
        match stack.last_mut() {
            None => {
                if doc.is_some() {
                    return Err("expected a single document, found several".into());
                }
                doc = Some(node);
            }
            Some(Frame::Seq(v, _)) => v.push(node),
            Some(Frame::Map(m, key, _)) => match key.take() {
                None => *key = Some(node),
                Some(k) => insert(m, k, node),
            },
        }
    }
    Ok(doc.unwrap_or(Node::Null))
}

/// Inserts, the last duplicate key winning (PyYAML).
fn insert(map: &mut Vec<(Node, Node)>, key: Node, value: Node) {
    match map.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => map.push((key, value)),
    }
}

/// Applies a `<<` merge key: keys of the merged mapping(s) that the mapping lacks are added
/// (with a list, earlier mappings win).
fn merge_keys(map: Vec<(Node, Node)>) -> Vec<(Node, Node)> {
    let merge = Node::Str("<<".into());
    let Some(pos) = map.iter().position(|(k, _)| *k == merge) else {
        return map;
    };
    let mut map = map;
    let (_, value) = map.remove(pos);
    let sources = match value {
        Node::Map(m) => vec![m],
        Node::Seq(v) => v
            .into_iter()
            .filter_map(|n| match n {
                Node::Map(m) => Some(m),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    for src in sources {
        for (k, v) in src {
            if !map.iter().any(|(existing, _)| *existing == k) {
                map.push((k, v));
            }
        }
    }
    map
}

/// Resolves a scalar like PyYAML's SafeLoader (YAML 1.1 core types).
fn scalar(v: String, style: TScalarStyle, tag: Option<&Tag>) -> Node {
    if let Some(tag) = tag.filter(|t| t.handle == "tag:yaml.org,2002:") {
        return match tag.suffix.as_str() {
            "str" => Node::Str(v),
            "null" => Node::Null,
            _ => plain(v),
        };
    }
    if style != TScalarStyle::Plain {
        return Node::Str(v);
    }
    plain(v)
}

fn plain(v: String) -> Node {
    match v.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return Node::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Node::Bool(true);
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Node::Bool(false);
        }
        _ => {}
    }
    let digits: String = v.chars().filter(|c| *c != '_').collect();
    let (neg, body) = match digits.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, digits.strip_prefix('+').unwrap_or(&digits)),
    };
    let int = if let Some(hex) = body.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()
    } else if let Some(oct) = body.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()
    } else if body.len() > 1 && body.starts_with('0') && body.bytes().all(|b| b.is_ascii_digit()) {
        i64::from_str_radix(body, 8).ok()
    } else if !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit()) {
        body.parse::<i64>().ok()
    } else {
        None
    };
    if let Some(i) = int {
        return Node::Int(if neg { -i } else { i });
    }
    let lower = v.to_ascii_lowercase();
    if matches!(lower.as_str(), ".inf" | "+.inf" | "-.inf" | ".nan")
        || (v.bytes().any(|b| b.is_ascii_digit())
            && v.bytes().all(|b| {
                b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-' | b'_')
            })
            && digits.parse::<f64>().is_ok())
    {
        return Node::Float(v);
    }
    Node::Str(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_like_pyyaml() {
        let n = parse_yaml("a: 1\na: 2\nb: yes\nc: '010'\nd: 010\ne: ~\nbase: &b {x: 1, y: 2}\nf:\n  <<: *b\n  y: 3\n").unwrap();
        let Node::Map(m) = n else { panic!() };
        assert_eq!(get(&m, "a"), Some(&Node::Int(2)));
        assert_eq!(get(&m, "b"), Some(&Node::Bool(true)));
        assert_eq!(get(&m, "c"), Some(&Node::Str("010".into())));
        assert_eq!(get(&m, "d"), Some(&Node::Int(8)));
        assert_eq!(get(&m, "e"), Some(&Node::Null));
        let Some(Node::Map(f)) = get(&m, "f") else {
            panic!()
        };
        assert_eq!(get(f, "x"), Some(&Node::Int(1)));
        assert_eq!(get(f, "y"), Some(&Node::Int(3)));
        assert!(parse_yaml("a: [1\n").is_err());
        assert!(parse_yaml("--- 1\n--- 2\n").is_err());
        // Alias bombs are bounded.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            bomb.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
        }
        assert!(parse_yaml(&bomb).unwrap_err().contains("too large"));
    }
}
