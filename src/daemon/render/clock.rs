//! The clocks every time-dependent answer reads, injected so that tests
//! render with fixed ones: `CLOCK_MONOTONIC`, which every time in the
//! state is kept in, and the wall clock, read only to turn a monotonic
//! time into a Unix time at the moment of the answer.

use crate::rt::sys;

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

pub use crate::units::Now;

impl Clocks {
    pub fn read(&self) -> Now {
        Now {
            monotonic_ns: (self.monotonic_ns)(),
            unix_ns: (self.unix_ns)(),
        }
    }
}
