//! Progress reporting as the library sees it: a sink it calls, with no idea of terminals.

/// Receives progress of long work. Implementations decide whether anything is shown.
pub trait Progress {
    /// A new phase starts; `total` when the amount of work is known.
    fn start(&self, message: &str, total: Option<u64>);
    /// `n` more units are done.
    fn inc(&self, n: u64);
    /// The phase is over.
    fn finish(&self);
    /// Whether a phase's total is worth a count of its own before the work starts (a bar
    /// is shown); without, a caller that cannot know it cheaply passes `None`.
    fn wants_total(&self) -> bool {
        false
    }
}

/// Shows nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _message: &str, _total: Option<u64>) {}
    fn inc(&self, _n: u64) {}
    fn finish(&self) {}
}
