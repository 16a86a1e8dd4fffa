//! Where a sampler's time comes from: the `Clock` trait the hot loop is
//! generic over, the real clocks (`CLOCK_MONOTONIC` with an absolute
//! `clock_nanosleep`, and the same pinned to a CPU so it notices being
//! moved off it), the other ways cyclictest can wait (`Timing`: another
//! clock, relative sleeps, a POSIX interval timer), and, only with the
//! test-only `fault-injection` feature, a clock that breaks on purpose.

use super::sys::{self, IntervalTimer};

pub use super::sys::ClockSource;

/// How a sampler waits for its next period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SleepMode {
    /// `clock_nanosleep` to the absolute deadline (cyclictest's default).
    #[default]
    Absolute,
    /// `clock_nanosleep` for one interval from just before the call
    /// (cyclictest's `-r` and `-s`): the latency is counted from there, so
    /// the time between the wake-up and the next call drifts the grid.
    Relative,
    /// The signal of a POSIX interval timer armed once (cyclictest's `-x`).
    PosixTimer,
}

/// The clock, the way of waiting, and where the deadlines' grid starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timing {
    pub clock: ClockSource,
    pub sleep: SleepMode,
    /// A time on `clock` the deadlines are aligned to (`start + k ·
    /// interval`), so that several samplers wake together (cyclictest's
    /// `-A`, `--secaligned`); `None`: one interval after the sampler starts.
    pub start_grid_ns: Option<u64>,
}

impl Timing {
    /// The first deadline of a sampler starting at `now_ns`: one interval
    /// later, or the first point of the aligned grid after now.
    pub fn first_deadline_ns(&self, now_ns: u64, interval_ns: u64) -> u64 {
        match self.start_grid_ns {
            None => now_ns + interval_ns,
            Some(base) if base > now_ns => base,
            Some(base) => base + ((now_ns - base) / interval_ns + 1) * interval_ns,
        }
    }
}

/// A source of time and sleep; the real one is `MonotonicClock`, tests use
/// a scripted one.
pub trait Clock {
    fn now_ns(&mut self) -> u64;
    /// Sleeps until the absolute time `deadline_ns`; the error number on
    /// failure.
    fn sleep_until_ns(&mut self, deadline_ns: u64) -> Result<(), i32>;
    /// The thread woke up off the CPU it was pinned to: the CPU went
    /// offline (the kernel moved the thread) or someone changed its
    /// affinity. Its samples would no longer describe that CPU.
    fn displaced(&mut self) -> bool {
        false
    }
}

/// `CLOCK_MONOTONIC` with `clock_nanosleep(TIMER_ABSTIME)`.
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        sys::monotonic_now_ns()
    }

    #[inline]
    fn sleep_until_ns(&mut self, deadline_ns: u64) -> Result<(), i32> {
        sys::sleep_until_ns(deadline_ns)
    }
}

/// The real clock for a thread pinned to `cpu`: `displaced` compares the
/// CPU it runs on (no system call) with the one it was pinned to.
pub struct PinnedClock {
    pub cpu: usize,
    pub source: ClockSource,
}

impl PinnedClock {
    pub fn monotonic(cpu: usize) -> PinnedClock {
        PinnedClock {
            cpu,
            source: ClockSource::Monotonic,
        }
    }
}

impl Clock for PinnedClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        sys::clock_now_ns(self.source)
    }

    #[inline]
    fn sleep_until_ns(&mut self, deadline_ns: u64) -> Result<(), i32> {
        sys::clock_sleep_ns(self.source, true, deadline_ns)
    }

    #[inline]
    fn displaced(&mut self) -> bool {
        sys::current_cpu().is_some_and(|cpu| cpu != self.cpu)
    }
}

/// cyclictest's relative sleeps (`-r`, `-s`) on the hot loop's absolute
/// grid: each sleep is one interval from just before the call, and the
/// time it reports is shifted so that `now − deadline` is the lateness
/// against that sleep's own end (`wake-up − (call + interval)`), as
/// cyclictest counts it. The shift is the grid's drift so far.
pub struct RelativeClock {
    pub pinned: PinnedClock,
    pub interval_ns: u64,
    shift_ns: u64,
}

impl RelativeClock {
    pub fn new(pinned: PinnedClock, interval_ns: u64) -> RelativeClock {
        RelativeClock {
            pinned,
            interval_ns,
            shift_ns: 0,
        }
    }
}

impl Clock for RelativeClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        self.pinned.now_ns().wrapping_add(self.shift_ns)
    }

    #[inline]
    fn sleep_until_ns(&mut self, deadline_ns: u64) -> Result<(), i32> {
        let before = self.pinned.now_ns();
        sys::clock_sleep_ns(self.pinned.source, false, self.interval_ns)?;
        // Wrapping: the shift is negative when the loop ran behind.
        self.shift_ns = deadline_ns.wrapping_sub(before + self.interval_ns);
        Ok(())
    }

    #[inline]
    fn displaced(&mut self) -> bool {
        self.pinned.displaced()
    }
}

/// cyclictest's `-x`: a POSIX interval timer armed at the first deadline
/// with the interval as its period, each wake-up its signal. Arming is
/// the only call besides the wait, made once at the first sleep. A signal
/// that was pending from an expiry the loop skipped (a wake-up later than
/// the next deadline) is waited past, so no sample is taken early.
pub struct TimerClock {
    pub pinned: PinnedClock,
    timer: IntervalTimer,
    interval_ns: u64,
    armed: bool,
}

impl TimerClock {
    pub fn new(pinned: PinnedClock, timer: IntervalTimer, interval_ns: u64) -> TimerClock {
        TimerClock {
            pinned,
            timer,
            interval_ns,
            armed: false,
        }
    }
}

impl Clock for TimerClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        self.pinned.now_ns()
    }

    #[inline]
    fn sleep_until_ns(&mut self, deadline_ns: u64) -> Result<(), i32> {
        if !self.armed {
            self.timer.arm(deadline_ns, self.interval_ns)?;
            self.armed = true;
        }
        loop {
            self.timer.wait()?;
            if self.pinned.now_ns() >= deadline_ns {
                return Ok(());
            }
        }
    }

    #[inline]
    fn displaced(&mut self) -> bool {
        self.pinned.displaced()
    }
}

/// Faults for tests of what happens around a broken sampler, compiled
/// only with the `fault-injection` feature. `FAULT_INJECTION_LATENCYD`
/// (deliberately not `LATENCYD_…`, which is configuration) is a
/// comma-separated list of `KIND:CPU:MS[:US]`:
/// - `die:CPU:MS`: after MS the sampler's sleep fails, so it ends;
/// - `stall:CPU:MS`: after MS its sleep never returns, so its heartbeat
///   stops;
/// - `displace:CPU:MS`: after MS it finds itself off its CPU, as when the
///   CPU goes offline, so the engine reaps and restarts it;
/// - `slowstart:CPU:MS`: every start of that CPU's sampler but the first
///   (a restart) waits MS before it reports running;
/// - `spike:CPU:MS:US`: the first sleep of each start of that CPU's
///   sampler whose deadline is MS or more after the start lasts US longer,
///   so exactly one wake-up is US late (plus the real latency): the spike
///   a busy higher-priority task would cause, without root.
///
/// An item that does not parse is ignored (tests set these, not users).
#[cfg(feature = "fault-injection")]
pub mod fault {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::{Clock, MonotonicClock, PinnedClock};
    use crate::sys;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Kind {
        Die,
        Stall,
        Displace,
        SlowStart,
        /// One wake-up this many nanoseconds late.
        Spike {
            late_ns: u64,
        },
    }

    /// The faults planned for `cpu`: (kind, delay in ns).
    pub fn planned_for(cpu: usize) -> Vec<(Kind, u64)> {
        match std::env::var("FAULT_INJECTION_LATENCYD") {
            Ok(spec) => parse(&spec, cpu),
            Err(_) => Vec::new(),
        }
    }

    /// The items of `spec` for `cpu`; the others, and what does not parse
    /// (`spike` without its lateness included), are left out.
    fn parse(spec: &str, cpu: usize) -> Vec<(Kind, u64)> {
        spec.split(',')
            .filter_map(|item| {
                let mut parts = item.trim().split(':');
                let name = parts.next()?;
                let target: usize = parts.next()?.parse().ok()?;
                let ms: u64 = parts.next()?.parse().ok()?;
                let kind = match name {
                    "die" => Kind::Die,
                    "stall" => Kind::Stall,
                    "displace" => Kind::Displace,
                    "slowstart" => Kind::SlowStart,
                    "spike" => Kind::Spike {
                        late_ns: parts.next()?.parse::<u64>().ok()? * 1_000,
                    },
                    _ => return None,
                };
                (target == cpu).then_some((kind, ms * 1_000_000))
            })
            .collect()
    }

    /// How many samplers were started for each CPU in this process.
    static STARTS: Mutex<BTreeMap<usize, u64>> = Mutex::new(BTreeMap::new());

    /// How long this start of `cpu`'s sampler should wait before it
    /// reports running: a `slowstart` delay for every start but the first.
    pub fn start_delay_ns(cpu: usize, faults: &[(Kind, u64)]) -> u64 {
        let mut starts = STARTS.lock().unwrap_or_else(|e| e.into_inner());
        let n = starts.entry(cpu).or_insert(0);
        *n += 1;
        let delay = faults.iter().find(|(kind, _)| *kind == Kind::SlowStart);
        match delay {
            Some(&(_, ns)) if *n > 1 => ns,
            _ => 0,
        }
    }

    /// The real clock, until a fault's time comes.
    pub struct FaultyClock {
        faults: Vec<(Kind, u64)>,
        armed_at_ns: u64,
        pinned: PinnedClock,
        spiked: bool,
    }

    impl FaultyClock {
        /// Armed now: the faults' delays count from here.
        pub fn new(faults: Vec<(Kind, u64)>, cpu: usize) -> Self {
            FaultyClock {
                faults,
                armed_at_ns: MonotonicClock.now_ns(),
                pinned: PinnedClock::monotonic(cpu),
                spiked: false,
            }
        }

        /// How late the sleep to `deadline_ns` should end: a planned spike
        /// that is due and has not happened yet.
        fn spike_ns(&mut self, deadline_ns: u64) -> u64 {
            if self.spiked {
                return 0;
            }
            let due = self.faults.iter().find_map(|&(kind, after)| match kind {
                Kind::Spike { late_ns } if deadline_ns >= self.armed_at_ns + after => Some(late_ns),
                _ => None,
            });
            self.spiked = due.is_some();
            due.unwrap_or(0)
        }

        fn due(&self, kind: Kind, at_ns: u64) -> bool {
            self.faults
                .iter()
                .any(|&(k, after)| k == kind && at_ns >= self.armed_at_ns + after)
        }
    }

    impl Clock for FaultyClock {
        fn now_ns(&mut self) -> u64 {
            MonotonicClock.now_ns()
        }

        fn displaced(&mut self) -> bool {
            let now = MonotonicClock.now_ns();
            self.due(Kind::Displace, now) || self.pinned.displaced()
        }

        fn sleep_until_ns(&mut self, deadline_ns: u64) -> Result<(), i32> {
            if self.due(Kind::Die, deadline_ns) {
                return Err(sys::EIO);
            }
            if self.due(Kind::Stall, deadline_ns) {
                loop {
                    let _ = MonotonicClock.sleep_until_ns(deadline_ns + 3_600_000_000_000);
                }
            }
            let late_ns = self.spike_ns(deadline_ns);
            MonotonicClock.sleep_until_ns(deadline_ns + late_ns)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_planned_spike_makes_exactly_one_late_wake_up() {
            let spike = Kind::Spike { late_ns: 2_000_000 };
            let mut clock = FaultyClock::new(vec![(spike, 5_000_000)], 0);
            let start = clock.armed_at_ns;
            // Not before its time; once when due; never again.
            assert_eq!(clock.spike_ns(start + 4_999_999), 0);
            assert_eq!(clock.spike_ns(start + 5_000_000), 2_000_000);
            assert_eq!(clock.spike_ns(start + 6_000_000), 0);
            // The sleep itself ends that much after the deadline at least
            // (an absolute sleep never ends early).
            let mut clock = FaultyClock::new(vec![(spike, 0)], 0);
            let deadline = clock.now_ns() + 1_000_000;
            clock.sleep_until_ns(deadline).unwrap();
            assert!(clock.now_ns() - deadline >= 2_000_000);
            let deadline = clock.now_ns() + 1_000_000;
            clock.sleep_until_ns(deadline).unwrap();
            assert!(clock.spiked);
        }

        #[test]
        fn spikes_parse_with_their_lateness() {
            let spec = "spike:3:1500:5000, die:4:1,spike:3:1,bogus:3:1";
            assert_eq!(
                parse(spec, 3),
                vec![(Kind::Spike { late_ns: 5_000_000 }, 1_500_000_000)]
            );
            assert_eq!(parse(spec, 4), vec![(Kind::Die, 1_000_000)]);
            assert!(parse(spec, 0).is_empty());
        }
    }
}
