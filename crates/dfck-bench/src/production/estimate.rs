//! The up-front estimate of a `bench production` matrix (docs/bench-rows.md#matrix-and-gate):
//! how many bytes each case writes and roughly how long the run takes, and the safety cap on
//! the largest full case, in the shape of `bench channels`' full-payload cap.
//!
//! The model is deliberately coarse: a turn writes [`CHECKPOINTS_PER_TURN`] checkpoints and
//! [`MESSAGES_PER_TURN`] messages of `payload + MESSAGE_OVERHEAD_BYTES` serialized bytes. A
//! full checkpoint stores every message so far; a delta case stores each message once plus a
//! snapshot of the whole list every `K` checkpoints.

use crate::case::{ChannelMode, ProductionCase};

/// Checkpoints of one DeerFlow turn (input, six loop steps, final).
pub const CHECKPOINTS_PER_TURN: u128 = 8;
/// Messages of one DeerFlow turn (human, AI with tool call, tool, final AI).
pub const MESSAGES_PER_TURN: u128 = 4;
/// Serialized bytes of a message beyond its content (ids, type, tool calls, msgpack framing).
pub const MESSAGE_OVERHEAD_BYTES: u128 = 216;
/// Assumed write throughput of the time estimate (bytes per second).
const BYTES_PER_SECOND: u128 = 100 * 1024 * 1024;
/// Assumed fixed cost of one checkpoint (microseconds) in the time estimate.
const MICROS_PER_CHECKPOINT: u128 = 500;

/// Estimated bytes one case writes.
pub fn case_bytes(case: &ProductionCase) -> u128 {
    let turns = u128::from(case.turns);
    let message = u128::from(case.payload_bytes) + MESSAGE_OVERHEAD_BYTES;
    let checkpoints = turns * CHECKPOINTS_PER_TURN;
    // Messages held at checkpoint c (1-based) ≈ c × MESSAGES_PER_TURN / CHECKPOINTS_PER_TURN.
    let sum_held = |every: u128| -> u128 {
        // Σ over c = every, 2·every, … ≤ checkpoints of c, times messages per checkpoint.
        let n = checkpoints / every.max(1);
        every * n * (n + 1) / 2 * MESSAGES_PER_TURN / CHECKPOINTS_PER_TURN
    };
    match case.mode {
        ChannelMode::Full => sum_held(1) * message,
        ChannelMode::Delta => {
            let k = u128::from(case.snapshot_frequency.unwrap_or(1).max(1));
            (turns * MESSAGES_PER_TURN + sum_held(k)) * message
        }
    }
}

/// The estimate of a whole matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixEstimate {
    /// Cases the run starts.
    pub cases: usize,
    /// Σ estimated bytes written over every case.
    pub bytes: u128,
    /// Rough wall time in seconds.
    pub seconds: u128,
    /// The largest estimate of a single full case (0 without full cases).
    pub largest_full_bytes: u128,
}

impl MatrixEstimate {
    /// The estimate of `cases`.
    pub fn of(cases: &[ProductionCase]) -> MatrixEstimate {
        let mut bytes = 0u128;
        let mut micros = 0u128;
        let mut largest_full_bytes = 0u128;
        for c in cases {
            let b = case_bytes(c);
            bytes = bytes.saturating_add(b);
            micros = micros.saturating_add(
                b * 1_000_000 / BYTES_PER_SECOND
                    + u128::from(c.turns) * CHECKPOINTS_PER_TURN * MICROS_PER_CHECKPOINT,
            );
            if c.mode == ChannelMode::Full {
                largest_full_bytes = largest_full_bytes.max(b);
            }
        }
        MatrixEstimate {
            cases: cases.len(),
            bytes,
            seconds: micros.div_ceil(1_000_000),
            largest_full_bytes,
        }
    }

    /// True when the largest full case is estimated above `cap` (`None`: no cap).
    pub fn exceeds(&self, cap: Option<u128>) -> bool {
        cap.is_some_and(|max| self.largest_full_bytes > max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Backend, Engine};

    fn case(mode: ChannelMode, turns: u64, k: Option<u64>) -> ProductionCase {
        ProductionCase {
            mode,
            turns,
            payload_bytes: 128,
            snapshot_frequency: k,
            history_limits: vec![10],
            read_repetitions: 1,
            repetition: 0,
            seed: 1,
            engine: Engine::Native,
            backend: Backend::Sqlite,
            replay: None,
        }
    }

    #[test]
    fn a_full_2000_turn_case_is_about_22_gb() {
        let b = case_bytes(&case(ChannelMode::Full, 2000, None));
        assert!((20_000_000_000..25_000_000_000).contains(&b), "{b}");
        let d = case_bytes(&case(ChannelMode::Delta, 2000, Some(1000)));
        assert!(d < b / 100, "{d}");
        let e = MatrixEstimate::of(&[case(ChannelMode::Full, 10, None)]);
        assert!(!e.exceeds(Some(1 << 30)) && e.cases == 1 && e.bytes > 0);
    }
}
