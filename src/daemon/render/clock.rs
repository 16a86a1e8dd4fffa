//! The clocks every time-dependent answer reads, injected so that tests
//! render with fixed ones: `CLOCK_MONOTONIC`, which every time in the
//! state is kept in, and the wall clock, read only to turn a monotonic
//! time into a Unix time at the moment of the answer.

use crate::rt::sys;
use crate::units::NS_PER_SEC;

/// A clock, in ns: the real one or, in tests, a fixed one.
pub type Clock = fn() -> u64;

/// The two clocks time-dependent answers read: `CLOCK_MONOTONIC`, which
/// every time in the state is kept in, and the wall clock, read only to
/// turn a monotonic time into a Unix time at the moment of the answer
/// (`wall now − monotonic age`), so that a step of the wall clock (NTP,
/// a board without an RTC setting its time late) moves those times with
/// it instead of leaving them off by the step for ever.
#[derive(Debug, Clone, Copy)]
pub struct Clocks {
    pub monotonic_ns: Clock,
    pub unix_ns: Clock,
}

/// The daemon's clocks: the kernel's monotonic clock and the wall clock.
pub const SYSTEM_CLOCKS: Clocks = Clocks {
    monotonic_ns: sys::monotonic_now_ns,
    unix_ns: crate::units::unix_now_ns,
};

/// Both clocks read once, for one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub monotonic_ns: u64,
    pub unix_ns: u64,
}

impl Clocks {
    pub fn read(&self) -> Now {
        Now {
            monotonic_ns: (self.monotonic_ns)(),
            unix_ns: (self.unix_ns)(),
        }
    }
}

impl Now {
    /// The Unix time, in seconds, of the `CLOCK_MONOTONIC` time `mono_ns`.
    pub fn unix_seconds_of(&self, mono_ns: u64) -> f64 {
        let age_ns = self.monotonic_ns.saturating_sub(mono_ns);
        let unix_ns = self.unix_ns.saturating_sub(age_ns);
        // Whole seconds and the fraction apart: ns since 1970 have more
        // digits than an f64 holds exactly.
        (unix_ns / NS_PER_SEC) as f64 + (unix_ns % NS_PER_SEC) as f64 / NS_PER_SEC as f64
    }
}
