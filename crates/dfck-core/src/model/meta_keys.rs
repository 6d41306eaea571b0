//! The metadata facts ([`MetaFacts`]) parsed from a checkpoint's metadata bytes: only the
//! keys they need are built, every other value is skipped, or, where a load must refuse
//! exactly what the full parse refuses ([`MetaFacts::parse_checked`]), checked as that parse
//! checks it, in the same pass. [`metadata_parses`] checks without building anything.

use super::thread::MetaFacts;
use super::{DELTA_COUNTERS, MESSAGES, MODE_MARKER, parse_metadata};
use crate::error::ModelError;
use serde::Deserialize;
use serde::de::{Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value as Json;
use std::marker::PhantomData;

/// A JSON visitor's methods for every scalar but `null`, each giving `$value` (of type `$t`).
macro_rules! scalars_are {
    ($t:ty, $value:expr) => {
        scalars_are!(@each $t, $value; visit_bool: bool, visit_i64: i64, visit_u64: u64,
            visit_f64: f64, visit_str: &str);
    };
    (@each $t:ty, $value:expr; $($f:ident: $arg:ty),*) => {
        $(fn $f<E>(self, _: $arg) -> Result<$t, E> {
            Ok($value)
        })*
    };
}

impl MetaFacts {
    /// The facts of metadata `bytes`, as `MetaFacts::of(&parse_metadata(bytes, what)?)`
    /// gives them, without building the keys it does not read.
    pub fn parse(bytes: &[u8], what: &str) -> Result<Self, ModelError> {
        match Self::from_keys::<IgnoredAny>(bytes) {
            Some(facts) => Ok(facts),
            None => parse_metadata(bytes, what).map(|m| MetaFacts::of(&m)),
        }
    }

    /// The facts of metadata `bytes` where the full parse takes them, every value checked
    /// as it checks them (lone surrogates and numbers out of range refused); `None` where
    /// only the full parse can tell (a refusal, Python's NaN, anything but an object).
    pub(crate) fn parse_checked(bytes: &[u8]) -> Option<Self> {
        Self::from_keys::<Shape>(bytes)
    }

    /// The facts of an object whose other values read as `S`. A duplicate key, a
    /// non-object, `writes` neither an object nor null, or Python's NaN give `None`.
    fn from_keys<'a, S: Deserialize<'a>>(bytes: &'a [u8]) -> Option<Self> {
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return None;
        }
        let k = serde_json::from_slice::<Keys<S>>(bytes).ok()?;
        let delta = k.mode.as_ref().and_then(Json::as_str) == Some("delta") || k.counters;
        Some(MetaFacts {
            source: k.source.as_ref().and_then(Json::as_str).map(Into::into),
            step: k.step.as_ref().and_then(Json::as_i64),
            marker: k.mode.map(Box::new),
            delta,
            run_durations: k.run_durations,
            duration_write: k.writes,
        })
    }
}

/// The only metadata keys [`MetaFacts`] reads; every other value is read as `S`: skipped
/// (`IgnoredAny`) or checked ([`Shape`]).
struct Keys<S> {
    step: Option<Json>,
    source: Option<Json>,
    /// [`MODE_MARKER`] present (any value, `null` too) or not.
    mode: Option<Json>,
    /// [`DELTA_COUNTERS`] is an object naming `messages` (its values read as `S`).
    counters: bool,
    /// `run_durations` present.
    run_durations: bool,
    /// `writes` is an object with DeerFlow's duration write.
    writes: bool,
    skip: PhantomData<S>,
}

/// A key of the metadata object, by what [`Keys`] does with its value.
#[derive(Clone, Copy)]
enum Field {
    Step,
    Source,
    Mode,
    Counters,
    RunDurations,
    Writes,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, k: &str) -> Result<Field, E> {
                Ok(match k {
                    "step" => Field::Step,
                    "source" => Field::Source,
                    MODE_MARKER => Field::Mode,
                    DELTA_COUNTERS => Field::Counters,
                    "run_durations" => Field::RunDurations,
                    "writes" => Field::Writes,
                    _ => Field::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

impl<'de, S: Deserialize<'de>> Deserialize<'de> for Keys<S> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<S>(PhantomData<S>);
        impl<'de, S: Deserialize<'de>> Visitor<'de> for V<S> {
            type Value = Keys<S>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Keys<S>, A::Error> {
                let mut k = Keys {
                    step: None,
                    source: None,
                    mode: None,
                    counters: false,
                    run_durations: false,
                    writes: false,
                    skip: PhantomData,
                };
                // A key read twice fails (and takes the full parse, where the last wins).
                let mut read = [false; Field::Other as usize];
                while let Some(f) = m.next_key::<Field>()? {
                    if let Some(seen) = read.get_mut(f as usize) {
                        if std::mem::replace(seen, true) {
                            return Err(A::Error::custom("duplicate key"));
                        }
                    }
                    match f {
                        Field::Step => k.step = m.next_value()?,
                        Field::Source => k.source = m.next_value()?,
                        Field::Mode => k.mode = Some(m.next_value()?),
                        Field::Counters => k.counters = m.next_value::<NamesMessages<S>>()?.0,
                        Field::RunDurations => {
                            m.next_value::<S>()?;
                            k.run_durations = true;
                        }
                        Field::Writes => k.writes = m.next_value::<NamesDurationWrite<S>>()?.0,
                        Field::Other => {
                            m.next_value::<S>()?;
                        }
                    }
                }
                Ok(k)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// Whether `metadata.writes` is an object with DeerFlow's duration write (its values read
/// as `S`); anything but an object or `null` fails (and takes the full parse).
struct NamesDurationWrite<S>(bool, PhantomData<S>);

impl<'de, S: Deserialize<'de>> Deserialize<'de> for NamesDurationWrite<S> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<S>(PhantomData<S>);
        impl<'de, S: Deserialize<'de>> Visitor<'de> for V<S> {
            type Value = NamesDurationWrite<S>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(NamesDurationWrite(false, PhantomData))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut found = false;
                while let Some(k) = m.next_key::<String>()? {
                    m.next_value::<S>()?;
                    found |= k == "runtime_run_duration";
                }
                Ok(NamesDurationWrite(found, PhantomData))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// Whether `metadata.counters_since_delta_snapshot` is an object with a `messages` key (its
/// values read as `S`); any other value is `false`, as
/// `Json::Object(c) if c.contains_key("messages")` says.
struct NamesMessages<S>(bool, PhantomData<S>);

impl<'de, S: Deserialize<'de>> Deserialize<'de> for NamesMessages<S> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<S>(PhantomData<S>);
        impl<'de, S: Deserialize<'de>> Visitor<'de> for V<S> {
            type Value = NamesMessages<S>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            scalars_are!(NamesMessages<S>, NamesMessages(false, PhantomData));
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(NamesMessages(false, PhantomData))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                while s.next_element::<S>()?.is_some() {}
                Ok(NamesMessages(false, PhantomData))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut found = false;
                while let Some(k) = m.next_key::<MessagesKey>()? {
                    m.next_value::<S>()?;
                    found |= k.0;
                }
                Ok(NamesMessages(found, PhantomData))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A map key, `true` when it is `messages` (read without a copy when it can be).
struct MessagesKey(bool);

impl<'de> Deserialize<'de> for MessagesKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct K;
        impl Visitor<'_> for K {
            type Value = MessagesKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, k: &str) -> Result<MessagesKey, E> {
                Ok(MessagesKey(k == MESSAGES))
            }
        }
        d.deserialize_str(K)
    }
}

/// Whether [`parse_metadata`] takes `bytes`, without building the map: the same parse
/// (every value read as `serde_json::Value` reads it, through `deserialize_any`, which
/// checks what `IgnoredAny` lets through: lone surrogates, numbers out of range), nothing
/// kept.
pub(crate) fn metadata_parses(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return true;
    }
    match serde_json::from_slice::<Shape>(bytes) {
        Ok(shape) => shape != Shape::Other,
        // Python's NaN and infinities, which the full parse reads again.
        Err(_) => parse_metadata(bytes, "").is_ok(),
    }
}

/// What a JSON value is, as far as [`parse_metadata`] cares; reading one checks every
/// value inside as `serde_json::Value` would.
#[derive(PartialEq)]
enum Shape {
    Object,
    Null,
    Other,
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            scalars_are!(Shape, Shape::Other);
            fn visit_unit<E>(self) -> Result<Shape, E> {
                Ok(Shape::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Shape, A::Error> {
                while s.next_element::<Shape>()?.is_some() {}
                Ok(Shape::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Shape, A::Error> {
                while m.next_entry::<Shape, Shape>()?.is_some() {}
                Ok(Shape::Object)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_facts_are_the_facts_where_the_full_parse_takes_the_metadata() {
        let deep = format!(r#"{{"a": {}1{}}}"#, "[".repeat(130), "]".repeat(130));
        let cases = [
            "",
            "{}",
            " {} ",
            "null",
            "[1]",
            "{",
            r#"{"a": 1} x"#,
            r#"{"step": 3, "source": "loop", "x": {"y": [1.5, null, true]}}"#,
            r#"{"step": 1, "step": 2}"#,
            r#"{"deerflow_checkpoint_channel_mode": "delta"}"#,
            r#"{"counters_since_delta_snapshot": {"messages": 1}, "writes": null}"#,
            r#"{"writes": {"runtime_run_duration": 1}, "run_durations": [2]}"#,
            r#"{"writes": "x"}"#,
            r#"{"x": NaN}"#,
            // What skipping lets through, in every place a value is skipped.
            r#"{"x": "\ud800"}"#,
            r#"{"\udc00": 1}"#,
            r#"{"x": [1e400]}"#,
            r#"{"run_durations": "\ud800"}"#,
            r#"{"writes": {"a": -1e400}}"#,
            r#"{"writes": {"\ud800": 1}}"#,
            r#"{"counters_since_delta_snapshot": {"messages": "\udfff"}}"#,
            r#"{"counters_since_delta_snapshot": [1e999]}"#,
            &deep,
        ];
        for odd in cases {
            let bytes = odd.as_bytes();
            let full = parse_metadata(bytes, "m").map(|m| MetaFacts::of(&m)).ok();
            let checked = MetaFacts::parse_checked(bytes);
            if let Some(facts) = &checked {
                assert_eq!(Some(facts), full.as_ref(), "{odd}");
            }
            // `None` exactly where the previous two passes (the check, then the skipping
            // read) took the full parse.
            let before =
                metadata_parses(bytes) && MetaFacts::from_keys::<IgnoredAny>(bytes).is_some();
            assert_eq!(checked.is_some(), before, "{odd}");
            if full.is_none() {
                assert_eq!(checked, None, "{odd}");
            }
        }
        // The unchecked facts skip them.
        for lax in [
            r#"{"x": "\ud800", "step": 2}"#,
            r#"{"writes": {"a": 1e400}}"#,
        ] {
            assert!(MetaFacts::parse(lax.as_bytes(), "m").is_ok(), "{lax}");
            assert!(!metadata_parses(lax.as_bytes()), "{lax}");
            assert_eq!(MetaFacts::parse_checked(lax.as_bytes()), None, "{lax}");
        }
        let facts = MetaFacts::parse_checked(br#"{"step": 2, "x": "\u00e9"}"#);
        assert_eq!(facts.and_then(|f| f.step), Some(2));
    }
}
