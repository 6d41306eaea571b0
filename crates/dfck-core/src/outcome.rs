//! How a command ended when it ran to completion: the library returns an [`Outcome`] (or an
//! error), and `main` alone turns both into an exit code.

/// The result of a command that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything done (or, in a dry run, doable); nothing wrong found. Exit 0.
    Clean,
    /// The command ran and found problems (`verify` errors, `diff` differences). Exit 1.
    Findings,
    /// A write command refused some threads (each left untouched). Exit 1.
    Refused,
    /// Some work failed but the command finished (a benchmark row failed, nothing paired,
    /// a malformed input line). Exit 1.
    Failed,
    /// Interrupted by Ctrl-C / SIGTERM after keeping what was finished. Exit 130.
    Interrupted,
}

impl Outcome {
    /// The worse of two outcomes (interrupted > problems > clean).
    pub fn worst(self, other: Outcome) -> Outcome {
        fn rank(o: Outcome) -> u8 {
            match o {
                Outcome::Clean => 0,
                Outcome::Findings | Outcome::Refused | Outcome::Failed => 1,
                Outcome::Interrupted => 2,
            }
        }
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}
