//! `bench production --replay-from STORE`: reads operators' real threads (read-only) and turns
//! each into a replay source — its materialized head messages (root namespace, the reducer its
//! DeerFlow marker selects) written to a file the worker reads, identified in rows only by the
//! SHA-256 of the thread id. `--sample N` picks N threads deterministically (lowest hashes).

use super::ReplaySource;
use super::reader::Reader;
use super::workload::replay_turns;
use crate::error::RunError as Error;
use dfck_core::codec::{Value, encode};
use dfck_core::materialize::Reducer;
use dfck_core::model::{has_marker, parse_metadata};
use dfck_core::store::Store;
use sha2::{Digest, Sha256};
use std::path::Path;

/// One source thread, ready to replay.
#[derive(Debug, Clone)]
pub struct ReplayThread {
    /// Where the worker finds its messages, and the thread's hash.
    pub source: ReplaySource,
    /// Turns the replay runs (a turn starts at each human message).
    pub turns: u64,
    /// Mean encoded bytes per message (the rows' `payload_bytes`).
    pub payload_bytes: u64,
    /// Messages.
    pub messages: usize,
}

/// SHA-256 (hex) of a thread id: all that rows say about a source thread.
pub fn thread_hash(thread_id: &str) -> String {
    hex::encode(Sha256::digest(thread_id.as_bytes()))
}

/// Reads the given threads (or, with `sample`, N of all threads) and writes their messages
/// into `dir`; returns the usable ones and a note per skipped thread (≤ 2 turns, no messages).
pub fn prepare(
    store: &dyn Store,
    threads: &[String],
    sample: Option<usize>,
    dir: &Path,
) -> Result<(Vec<ReplayThread>, Vec<String>), Error> {
    let mut ids = dfck_core::store::select_threads(store, threads)?;
    if let Some(n) = sample {
        ids.sort_by_key(|t| thread_hash(t));
        ids.truncate(n);
    }
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for id in ids {
        let hash = thread_hash(&id);
        if store.namespaces(&id)?.is_empty() {
            return Err(dfck_core::error::StoreError::ThreadNotFound {
                thread_id: id,
                checkpoint_ns: String::new(),
            }
            .into());
        }
        let Some(head) = store.head_id(&id, "")? else {
            skipped.push(format!(
                "thread {}: no root-namespace checkpoint",
                &hash[..12]
            ));
            continue;
        };
        let marked = store
            .metadata(&id, "", &head)?
            .map(|m| has_marker(&parse_metadata(&m, "head").unwrap_or_default()))
            .unwrap_or(false);
        let reducer = if marked {
            Reducer::Deerflow
        } else {
            Reducer::Langgraph
        };
        let mut reader = Reader::new(store, &id, reducer, false);
        let messages = reader.state_messages().map_err(|e| {
            Error::Core(dfck_core::error::Error::Usage(format!(
                "cannot materialize thread {id}: {e}"
            )))
        })?;
        let turns = replay_turns(messages.clone()).len() as u64;
        if turns <= super::WARMUP_TURNS {
            skipped.push(format!(
                "thread {}: {turns} turn(s), the benchmark needs more than {}",
                &hash[..12],
                super::WARMUP_TURNS
            ));
            continue;
        }
        let bytes = encode(&Value::Array(messages.clone()));
        let path = dir.join(format!("{hash}.msgpack"));
        std::fs::write(&path, &bytes)?;
        out.push(ReplayThread {
            source: ReplaySource {
                messages_file: path.to_string_lossy().into_owned(),
                source_thread_sha256: hash,
            },
            turns,
            payload_bytes: (bytes.len() / messages.len().max(1)).max(1) as u64,
            messages: messages.len(),
        });
    }
    Ok((out, skipped))
}

/// The cases of a `--replay-from` run: the matrix once per usable source thread (its turns
/// and mean message size), and what the command line reports about them.
pub struct ReplayCases {
    /// The cases, in thread order.
    pub cases: Vec<super::ProductionCase>,
    /// One note per source thread skipped (≤ 2 turns, no messages).
    pub skipped: Vec<String>,
    /// The threads replayed: (thread hash, messages, turns).
    pub replayed: Vec<(String, usize, u64)>,
}

/// Reads the source threads ([`prepare`]) and expands `matrix` for each; an error when no
/// thread has enough turns to replay.
pub fn replay_cases(
    store: &dyn Store,
    shown: &str,
    threads: &[String],
    sample: Option<usize>,
    dir: &Path,
    matrix: &super::ProductionMatrix,
) -> Result<ReplayCases, Error> {
    let (sources, skipped) = prepare(store, threads, sample, dir)?;
    if sources.is_empty() {
        return Err(crate::error::BenchError::Usage(format!(
            "no thread of {shown} has more than {} turns to replay",
            super::WARMUP_TURNS
        ))
        .into());
    }
    let mut out = ReplayCases {
        cases: Vec::new(),
        skipped,
        replayed: Vec::new(),
    };
    for t in sources {
        out.replayed
            .push((t.source.source_thread_sha256.clone(), t.messages, t.turns));
        let m = super::ProductionMatrix {
            turns: vec![t.turns],
            payload_bytes: vec![t.payload_bytes],
            ..matrix.clone()
        };
        for mut c in m.expand() {
            c.replay = Some(t.source.clone());
            out.cases.push(c);
        }
    }
    Ok(out)
}
