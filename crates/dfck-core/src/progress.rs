//! Progress reporting as the library sees it: a sink it calls, with no idea of terminals.

/// Receives progress of long work. Implementations decide whether anything is shown.
pub trait Progress {
    /// A new phase starts; `total` when the amount of work is known.
    fn start(&self, message: &str, total: Option<u64>);
    /// `n` more units are done.
    fn inc(&self, n: u64);
    /// The phase is over.
    fn finish(&self);
}

/// Shows nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _message: &str, _total: Option<u64>) {}
    fn inc(&self, _n: u64) {}
    fn finish(&self) {}
}
