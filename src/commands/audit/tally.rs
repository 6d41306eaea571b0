//! The audit's aggregate: one [`Tally`] per thread, filled value by value as the store
//! streams them, merged into the store's. Memory follows the distinct imports (one entry per
//! (via, module, name, method)), the serializer tags and a bounded list of undecodable
//! examples, never the values.

use dfck_core::codec::CodecError;
use dfck_core::codec::aes;
use dfck_core::codec::imports::{self, Found, Via};
use dfck_core::store::{StoredValue, ValueRow};
use dfck_core::strict::{self, Class, Switch, Verdict};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Undecodable values named in the report (the first by location; the count is complete).
pub const UNDECODABLE_EXAMPLES: usize = 20;

/// Where a value sits: its thread, namespace, checkpoint and channel.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Place {
    /// The checkpoint holding it (the first or last one, for a shared blob).
    pub checkpoint_id: String,
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// The channel (`None` inside a SQLite checkpoint, outside `channel_values`).
    pub channel: Option<String>,
    /// The row kind: `checkpoint`, `blob` or `write`.
    pub row: &'static str,
}

/// Why a value was not audited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotAudited {
    /// `<inner>+aes` without a key.
    NoKey,
    /// Another cipher (`msgpack+xor`): dfck cannot open it.
    Cipher,
    /// `pickle`: only Python can look inside, and no allowlist applies.
    Pickle,
    /// A tag dfck does not know (or SQL NULL).
    UnknownTag,
}

/// One serializer tag's rows.
#[derive(Debug, Clone, Default)]
pub struct SerializerTally {
    /// Rows with the tag.
    pub rows: u64,
    /// Rows read and walked.
    pub audited: u64,
    /// Rows that did not decode (or decrypt).
    pub undecodable: u64,
    /// Why the rest were not audited.
    pub not_audited: Option<NotAudited>,
}

/// One distinct import.
#[derive(Debug, Clone)]
pub struct EntryTally {
    /// How values name it.
    pub via: Via,
    /// Module.
    pub module: String,
    /// Attribute.
    pub name: String,
    /// Method (ext 3).
    pub method: Option<String>,
    /// For `json lc:2`: the id as stored (what `allowed_json_modules` takes).
    pub json_id: Option<Vec<String>>,
    /// Its class.
    pub verdict: Verdict,
    /// Values holding it.
    pub rows: u64,
    /// Distinct checkpoints holding it (SQLite checkpoint rows; PostgreSQL checkpoints whose
    /// `channel_versions` name a blob holding it), summed over threads.
    pub checkpoints: u64,
    /// While one thread is read: the checkpoints (`ns\0id`) holding it.
    in_thread: HashSet<String>,
    /// Pending writes holding it.
    pub writes: u64,
    /// Threads holding it.
    pub threads: u64,
    /// The smallest checkpoint id holding it.
    pub first: Option<Place>,
    /// The greatest.
    pub last: Option<Place>,
    /// The last row that counted it (a value holding it twice counts once).
    stamp: u64,
}

/// An undecodable value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Undecodable {
    /// Where it is (the first checkpoint holding it).
    #[serde(flatten)]
    pub place: Place,
    /// Its serializer tag.
    pub type_tag: String,
    /// Why it does not decode.
    pub error: String,
}

/// The aggregate of one thread, then of the store.
#[derive(Debug, Default)]
pub struct Tally {
    /// Values read.
    pub values: u64,
    /// By serializer tag (`NULL` for SQL NULL).
    pub serializers: BTreeMap<String, SerializerTally>,
    /// By key `via\0module\0name\0method`.
    pub entries: HashMap<String, EntryTally>,
    /// Values holding an import that needs `allowed_msgpack_modules`.
    pub rows_needing_allowlist: u64,
    /// Values holding an import that is never allowed.
    pub rows_never_allowed: u64,
    /// Undecodable values: the total and the first [`UNDECODABLE_EXAMPLES`] by place.
    pub undecodable: u64,
    /// See [`Tally::undecodable`].
    pub undecodable_examples: Vec<Undecodable>,
    /// Threads merged in.
    pub threads: u64,
    row: u64,
    key: String,
}

fn row_name(row: ValueRow) -> &'static str {
    match row {
        ValueRow::Checkpoint => "checkpoint",
        ValueRow::Blob => "blob",
        ValueRow::Write => "write",
    }
}

/// Flags of one value.
#[derive(Default)]
struct RowFlags {
    needs_allowlist: bool,
    never: bool,
}

impl Tally {
    /// Reads one stored value of (thread, ns).
    pub fn value(&mut self, thread_id: &str, ns: &str, mut v: StoredValue) {
        self.values += 1;
        self.row += 1;
        let tag = v.type_tag.clone().unwrap_or_else(|| "NULL".to_owned());
        let bytes = bytes::Bytes::from(v.bytes.take().unwrap_or_default());
        let first_id = v.checkpoint_ids.iter().min().cloned();
        let last_id = v.checkpoint_ids.iter().max().cloned();
        let place = |checkpoint: &Option<String>, channel: Option<&str>| {
            checkpoint.as_ref().map(|id| Place {
                checkpoint_id: id.clone(),
                thread_id: thread_id.to_owned(),
                checkpoint_ns: ns.to_owned(),
                channel: channel.map(str::to_owned).or_else(|| v.channel.clone()),
                row: row_name(v.row),
            })
        };
        let opened = match aes::open(v.type_tag.as_deref(), bytes) {
            Ok(o) => o,
            Err(CodecError::UnsupportedSerializer(_)) => {
                let why = match v.type_tag.as_deref().and_then(|t| t.split_once('+')) {
                    Some((_, aes::AES)) => NotAudited::NoKey,
                    _ => NotAudited::Cipher,
                };
                self.not_audited(tag, why);
                return;
            }
            Err(e) => {
                let at = place(&first_id, None);
                self.undecodable(tag, at, &e, thread_id, ns, v.row);
                return;
            }
        };
        let inner = opened.tag.as_deref();
        let mut flags = RowFlags::default();
        let outcome: Result<(), CodecError> = match inner {
            Some("msgpack") => {
                let checkpoint = v.row == ValueRow::Checkpoint;
                imports::msgpack_imports(&opened.bytes, checkpoint, &mut |channel, found| {
                    let first = place(&first_id, channel);
                    let last = place(&last_id, channel);
                    self.found(found, &v, ns, first, last, &mut flags);
                })
            }
            Some("json") => match serde_json::from_slice::<serde_json::Value>(&opened.bytes) {
                Ok(doc) => {
                    imports::json_imports(&doc, &mut |found| {
                        let first = place(&first_id, None);
                        let last = place(&last_id, None);
                        self.found(found, &v, ns, first, last, &mut flags);
                    });
                    Ok(())
                }
                Err(e) => Err(CodecError::InvalidJson(e.to_string())),
            },
            Some("null" | "bytes" | "bytearray" | "empty") => Ok(()),
            Some("pickle") => {
                self.not_audited(tag, NotAudited::Pickle);
                return;
            }
            _ => {
                self.not_audited(tag, NotAudited::UnknownTag);
                return;
            }
        };
        match outcome {
            Ok(()) => {
                let s = self.serializers.entry(tag).or_default();
                s.rows += 1;
                s.audited += 1;
                self.rows_needing_allowlist += u64::from(flags.needs_allowlist);
                self.rows_never_allowed += u64::from(flags.never);
            }
            Err(e) => {
                let at = place(&first_id, None);
                self.undecodable(tag, at, &e, thread_id, ns, v.row);
            }
        }
    }

    fn not_audited(&mut self, tag: String, why: NotAudited) {
        let s = self.serializers.entry(tag).or_default();
        s.rows += 1;
        s.not_audited = Some(why);
    }

    fn undecodable(
        &mut self,
        tag: String,
        at: Option<Place>,
        e: &CodecError,
        thread_id: &str,
        ns: &str,
        row: ValueRow,
    ) {
        self.undecodable += 1;
        let place = at.unwrap_or_else(|| Place {
            checkpoint_id: String::new(),
            thread_id: thread_id.to_owned(),
            checkpoint_ns: ns.to_owned(),
            channel: None,
            row: row_name(row),
        });
        self.undecodable_examples.push(Undecodable {
            place,
            type_tag: tag.clone(),
            error: e.to_string(),
        });
        trim_examples(&mut self.undecodable_examples);
        let s = self.serializers.entry(tag).or_default();
        s.rows += 1;
        s.undecodable += 1;
    }

    fn found(
        &mut self,
        found: Found<'_>,
        v: &StoredValue,
        ns: &str,
        first: Option<Place>,
        last: Option<Place>,
        flags: &mut RowFlags,
    ) {
        let (via, module, name, method, verdict, json_id) = match found {
            Found::Import {
                via,
                module,
                name,
                method,
            } => {
                let verdict = if is_dotted_identifier(&module) && is_identifier(&name) {
                    strict::classify(via, &module, &name, method)
                } else {
                    strict::classify_malformed()
                };
                let json_id = (via == Via::JsonLc2).then(|| {
                    module
                        .split('.')
                        .chain(std::iter::once(name.as_ref()))
                        .map(str::to_owned)
                        .collect()
                });
                (via, module, name, method, verdict, json_id)
            }
            Found::Malformed(via) => (
                via,
                "?".into(),
                "?".into(),
                None,
                strict::classify_malformed(),
                None,
            ),
        };
        self.key.clear();
        self.key.push_str(&via.label());
        for part in [module.as_ref(), name.as_ref(), method.unwrap_or("")] {
            self.key.push('\0');
            self.key.push_str(part);
        }
        let row = self.row;
        if !self.entries.contains_key(self.key.as_str()) {
            self.entries.insert(
                self.key.clone(),
                EntryTally {
                    via,
                    module: module.into_owned(),
                    name: name.into_owned(),
                    method: method.map(str::to_owned),
                    json_id,
                    verdict,
                    rows: 0,
                    checkpoints: 0,
                    in_thread: HashSet::new(),
                    writes: 0,
                    threads: 1,
                    first: None,
                    last: None,
                    stamp: 0,
                },
            );
        }
        let Some(e) = self.entries.get_mut(self.key.as_str()) else {
            return;
        };
        match e.verdict {
            Verdict {
                class: Class::NeedsAllowlist,
                switch: Some(Switch::AllowedMsgpackModules),
                ..
            } => flags.needs_allowlist = true,
            Verdict {
                class: Class::NeverAllowed,
                ..
            } => flags.never = true,
            _ => {}
        }
        if e.stamp == row {
            return;
        }
        e.stamp = row;
        e.rows += 1;
        if v.row == ValueRow::Write {
            e.writes += 1;
        } else {
            for id in &v.checkpoint_ids {
                e.in_thread.insert(format!("{ns}\0{id}"));
            }
        }
        keep_min(&mut e.first, first);
        keep_max(&mut e.last, last);
    }

    /// Adds a thread's tally (each entry it holds counts one thread more).
    pub fn merge(&mut self, t: Tally) {
        self.values += t.values;
        self.threads += 1;
        for (tag, s) in t.serializers {
            let m = self.serializers.entry(tag).or_default();
            m.rows += s.rows;
            m.audited += s.audited;
            m.undecodable += s.undecodable;
            m.not_audited = m.not_audited.or(s.not_audited);
        }
        for (key, mut e) in t.entries {
            e.checkpoints += e.in_thread.len() as u64;
            e.in_thread = HashSet::new();
            match self.entries.get_mut(&key) {
                None => {
                    self.entries.insert(key, e);
                }
                Some(m) => {
                    m.rows += e.rows;
                    m.checkpoints += e.checkpoints;
                    m.writes += e.writes;
                    m.threads += e.threads;
                    keep_min(&mut m.first, e.first);
                    keep_max(&mut m.last, e.last);
                }
            }
        }
        self.rows_needing_allowlist += t.rows_needing_allowlist;
        self.rows_never_allowed += t.rows_never_allowed;
        self.undecodable += t.undecodable;
        self.undecodable_examples.extend(t.undecodable_examples);
        trim_examples(&mut self.undecodable_examples);
    }
}

fn keep_min(slot: &mut Option<Place>, p: Option<Place>) {
    if let Some(p) = p {
        if slot.as_ref().is_none_or(|s| p < *s) {
            *slot = Some(p);
        }
    }
}

fn keep_max(slot: &mut Option<Place>, p: Option<Place>) {
    if let Some(p) = p {
        if slot.as_ref().is_none_or(|s| p > *s) {
            *slot = Some(p);
        }
    }
}

fn trim_examples(v: &mut Vec<Undecodable>) {
    if v.len() > UNDECODABLE_EXAMPLES {
        v.sort();
        v.truncate(UNDECODABLE_EXAMPLES);
    }
}

/// A Python identifier (letters, digits and `_`, not starting with a digit).
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

/// A dotted module path of identifiers (`pkg.mod`).
fn is_dotted_identifier(s: &str) -> bool {
    s.split('.').all(is_identifier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_identifier("Point"));
        assert!(is_identifier("_DeltaSnapshot"));
        assert!(is_identifier("été"));
        assert!(!is_identifier("1x"));
        assert!(!is_identifier("a b"));
        assert!(!is_identifier(""));
        assert!(is_dotted_identifier("langchain_core.messages.ai"));
        assert!(!is_dotted_identifier("a..b"));
        assert!(!is_dotted_identifier("os; rm"));
    }
}
