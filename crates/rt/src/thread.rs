//! A sampler's thread: starting it (pin, block signals, pre-fault the
//! stack, switch policy) and the protocol by which it tells the rest of the
//! process where it is in its life, through atomics only so that it never
//! takes a lock to report.
//!
//! Start-up ends in one compare-and-swap on the state: the thread moves it
//! from `Starting` to running, or the engine, tired of waiting, moves it
//! from `Starting` to `Cancelled`. Exactly one of them wins, so a sampler
//! that was given up on never enters its loop, and a CPU never has two
//! samplers (`engine.rs` starts no other until the cancelled one is
//! joined).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};

use super::clock::{Clock, PinnedClock, RelativeClock, SleepMode, TimerClock, Timing};
use super::handoff::Publisher;
use super::sampler::{LoopEnd, LoopEndReason, LoopPlan, hot_loop};
use super::sys::{self, Policy};
use crate::stats::LatencyStats;

/// Where a sampler is in its life, as seen from other threads. Crosses
/// threads as its `u8` discriminant.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplerState {
    Starting = 0,
    RunningRealtime = 1,
    RunningNonRealtime = 2,
    Finished = 3,
    Failed = 4,
    /// Ended because it found itself off its CPU (`LoopEndReason::Displaced`).
    Displaced = 5,
    /// Given up on before it reported running (see `SamplerShared::cancel`):
    /// it returns without sampling.
    Cancelled = 6,
}

impl SamplerState {
    fn from_u8(value: u8) -> SamplerState {
        match value {
            0 => SamplerState::Starting,
            1 => SamplerState::RunningRealtime,
            2 => SamplerState::RunningNonRealtime,
            3 => SamplerState::Finished,
            4 => SamplerState::Failed,
            5 => SamplerState::Displaced,
            6 => SamplerState::Cancelled,
            // The atomic is private and written only from a `SamplerState`.
            other => unreachable!("sampler state {other} was never written"),
        }
    }

    pub fn is_running(self) -> bool {
        matches!(
            self,
            SamplerState::RunningRealtime | SamplerState::RunningNonRealtime
        )
    }
}

/// The start-up step that failed. Crosses threads as its `u8`
/// discriminant.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedStep {
    None = 0,
    Affinity = 1,
    Policy = 2,
    Sleep = 3,
}

impl FailedStep {
    fn from_u8(value: u8) -> FailedStep {
        match value {
            0 => FailedStep::None,
            1 => FailedStep::Affinity,
            2 => FailedStep::Policy,
            3 => FailedStep::Sleep,
            // The atomic is private and written only from a `FailedStep`.
            other => unreachable!("failed step {other} was never written"),
        }
    }
}

/// State a sampler shares with the rest of the process: atomics only, so
/// the sampler never takes a lock to report.
#[derive(Debug)]
pub struct SamplerShared {
    state: AtomicU8,
    failed_step: AtomicU8,
    errno: AtomicI32,
    tid: AtomicI32,
    /// `CLOCK_MONOTONIC` time of the latest wake-up, 0 before the first.
    pub heartbeat_ns: AtomicU64,
}

impl SamplerShared {
    /// The shared state of a slot with no sampler yet (its CPU offline):
    /// never started, no heartbeat.
    pub fn idle() -> SamplerShared {
        let shared = SamplerShared::new();
        shared.set_state(SamplerState::Displaced);
        shared
    }

    fn new() -> SamplerShared {
        SamplerShared {
            state: AtomicU8::new(SamplerState::Starting as u8),
            failed_step: AtomicU8::new(FailedStep::None as u8),
            errno: AtomicI32::new(0),
            tid: AtomicI32::new(0),
            heartbeat_ns: AtomicU64::new(0),
        }
    }

    pub fn state(&self) -> SamplerState {
        // Acquire pairs with the Release stores and exchanges below, so the
        // failure details written before them are visible.
        SamplerState::from_u8(self.state.load(Ordering::Acquire))
    }

    fn set_state(&self, state: SamplerState) {
        self.state.store(state as u8, Ordering::Release);
    }

    /// `Starting` → `to`, unless something else came first; whether it did.
    fn leave_starting(&self, to: SamplerState) -> bool {
        // AcqRel: Release publishes what the winner wrote before (the
        // failure details of a degraded start); Acquire makes the loser see
        // the winner's state.
        self.state
            .compare_exchange(
                SamplerState::Starting as u8,
                to as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Gives up on a sampler that has not reported running: if it is still
    /// starting, it is marked `Cancelled` and will return without entering
    /// its loop. False when it had already left `Starting` (it runs, failed
    /// or ended), in which case its state says what it did.
    pub fn cancel(&self) -> bool {
        self.leave_starting(SamplerState::Cancelled)
    }

    fn fail(&self, step: FailedStep, errno: i32) {
        self.failed_step.store(step as u8, Ordering::Relaxed);
        self.errno.store(errno, Ordering::Relaxed);
        self.set_state(SamplerState::Failed);
    }

    /// What failed and the OS error, for a sampler that is `Failed` or
    /// runs non-real-time because its policy was refused.
    pub fn failure(&self) -> (FailedStep, io::Error) {
        (
            FailedStep::from_u8(self.failed_step.load(Ordering::Relaxed)),
            io::Error::from_raw_os_error(self.errno.load(Ordering::Relaxed)),
        )
    }

    /// The kernel thread id (0 until the thread has started).
    pub fn tid(&self) -> i32 {
        self.tid.load(Ordering::Relaxed)
    }
}

/// What a sampler thread is told to do.
#[derive(Debug, Clone)]
pub struct SamplerSpec {
    pub cpu: usize,
    pub policy: Policy,
    pub priority: i32,
    pub plan: LoopPlan,
    pub timing: Timing,
    /// Keep running (non-real-time) if the policy is refused.
    pub allow_non_rt: bool,
}

/// What a sampler thread hands back when it ends.
pub struct SamplerExit {
    /// The interval recorded since its last publish: merge it after
    /// draining the handoff, or samples are lost.
    pub remainder: LatencyStats,
    /// How its loop ended (`None`: it never entered it).
    pub end: Option<LoopEnd>,
}

pub struct SamplerHandle {
    pub spec: SamplerSpec,
    pub shared: Arc<SamplerShared>,
    join: JoinHandle<SamplerExit>,
}

impl SamplerHandle {
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }

    /// Waits for the thread. A sampler never panics by design; if one did,
    /// its samples are gone and that is reported as an error.
    pub fn join(self) -> io::Result<(SamplerSpec, SamplerExit)> {
        let spec = self.spec;
        self.join
            .join()
            .map(|exit| (spec, exit))
            .map_err(|_| io::Error::other("a sampler thread panicked"))
    }
}

/// Stack of a sampler thread, and how much of it is touched up front so
/// that the hot loop never page-faults on its stack. Only touched pages
/// are locked (`sys::lock_all_memory`), so the mapping can stay roomy
/// for the start-up and error paths at no cost. Measured high-water of a
/// whole sampler's life, thread-local storage included: 12 KiB in a
/// release build, 16 KiB in a debug one (ARCHITECTURE.md, "Choices",
/// memory per CPU); the prefault lies below the caller's frame, so the hot loop,
/// no deeper than the thread's start-up, stays within it.
pub const SAMPLER_STACK_BYTES: usize = 256 * 1024;
pub const PREFAULT_STACK_BYTES: usize = 16 * 1024;

/// Starts a sampler thread. It pins itself, switches policy, reports its
/// state through `SamplerHandle::shared`, and begins sampling one interval
/// later — unless it was cancelled first.
pub fn spawn(
    spec: SamplerSpec,
    mut publisher: Publisher,
    stop: Arc<AtomicBool>,
) -> io::Result<SamplerHandle> {
    let shared = Arc::new(SamplerShared::new());
    let thread_shared = Arc::clone(&shared);
    let thread_spec = spec.clone();
    #[cfg(feature = "fault-injection")]
    let faults = super::clock::fault::planned_for(spec.cpu);
    #[cfg(feature = "fault-injection")]
    let start_delay_ns = super::clock::fault::start_delay_ns(spec.cpu, &faults);
    let join = thread::Builder::new()
        .name(format!("sampler-cpu{}", spec.cpu))
        .stack_size(SAMPLER_STACK_BYTES)
        .spawn(move || {
            let spec = thread_spec;
            let shared = thread_shared;
            let unstarted = |publisher: Publisher| SamplerExit {
                remainder: publisher.into_remainder(),
                end: None,
            };
            shared.tid.store(sys::current_tid(), Ordering::Relaxed);
            // Signals go to the main thread; a failure here only means a
            // signal could interrupt a sleep, which is retried anyway.
            let _ = sys::block_signals_in_current_thread();
            if let Err(err) = sys::pin_current_thread(spec.cpu) {
                shared.fail(FailedStep::Affinity, err.raw_os_error().unwrap_or(0));
                return unstarted(publisher);
            }
            sys::prefault_stack::<PREFAULT_STACK_BYTES>();
            let running = match sys::set_current_thread_policy(spec.policy, spec.priority) {
                Ok(()) if spec.policy.is_realtime() => SamplerState::RunningRealtime,
                Ok(()) => SamplerState::RunningNonRealtime,
                Err(err) => {
                    let errno = err.raw_os_error().unwrap_or(0);
                    if !spec.allow_non_rt {
                        shared.fail(FailedStep::Policy, errno);
                        return unstarted(publisher);
                    }
                    shared
                        .failed_step
                        .store(FailedStep::Policy as u8, Ordering::Relaxed);
                    shared.errno.store(errno, Ordering::Relaxed);
                    SamplerState::RunningNonRealtime
                }
            };
            // The smallest slack there is (0 would mean "the default"): a
            // sampler without a real-time policy measures its scheduling
            // latency, not the 50 µs by which the kernel may batch its
            // wake-ups. The call takes a constant and cannot fail.
            let _ = sys::set_current_thread_timer_slack_ns(1);
            #[cfg(feature = "fault-injection")]
            if start_delay_ns > 0 {
                thread::sleep(std::time::Duration::from_nanos(start_delay_ns));
            }
            if !shared.leave_starting(running) {
                // Cancelled: the engine gave up waiting and may start
                // another sampler on this CPU once this one is joined.
                return unstarted(publisher);
            }
            let pinned = PinnedClock {
                cpu: spec.cpu,
                source: spec.timing.clock,
            };
            let interval_ns = spec.plan.interval_ns;
            // Made before the loop: creating the timer is a system call.
            let timer = match spec.timing.sleep {
                SleepMode::PosixTimer => {
                    match sys::IntervalTimer::for_current_thread(spec.timing.clock) {
                        Ok(timer) => Some(timer),
                        Err(err) => {
                            shared.fail(FailedStep::Sleep, err.raw_os_error().unwrap_or(0));
                            return unstarted(publisher);
                        }
                    }
                }
                _ => None,
            };
            // From here on: the hot loop only.
            let end = match (spec.timing.sleep, timer) {
                (SleepMode::PosixTimer, Some(timer)) => {
                    let mut clock = TimerClock::new(pinned, timer, interval_ns);
                    sample(&mut clock, &spec, &mut publisher, &stop, &shared)
                }
                (SleepMode::Relative, _) => {
                    let mut clock = RelativeClock::new(pinned, interval_ns);
                    sample(&mut clock, &spec, &mut publisher, &stop, &shared)
                }
                // Test builds break the default clock on purpose.
                #[cfg(feature = "fault-injection")]
                _ if pinned.source == super::clock::ClockSource::Monotonic => {
                    let mut clock = super::clock::fault::FaultyClock::new(faults, spec.cpu);
                    sample(&mut clock, &spec, &mut publisher, &stop, &shared)
                }
                _ => {
                    let mut clock = pinned;
                    sample(&mut clock, &spec, &mut publisher, &stop, &shared)
                }
            };
            match end.reason {
                LoopEndReason::SleepFailed(errno) => shared.fail(FailedStep::Sleep, errno),
                LoopEndReason::Displaced => shared.set_state(SamplerState::Displaced),
                _ => shared.set_state(SamplerState::Finished),
            }
            SamplerExit {
                remainder: publisher.into_remainder(),
                end: Some(end),
            }
        })?;
    Ok(SamplerHandle { spec, shared, join })
}

/// The hot loop on `clock`, its first deadline as `spec.timing` places it.
fn sample<C: Clock>(
    clock: &mut C,
    spec: &SamplerSpec,
    publisher: &mut Publisher,
    stop: &AtomicBool,
    shared: &SamplerShared,
) -> LoopEnd {
    let start_ns = spec
        .timing
        .first_deadline_ns(clock.now_ns(), spec.plan.interval_ns);
    hot_loop(
        clock,
        &spec.plan,
        start_ns,
        publisher,
        stop,
        &shared.heartbeat_ns,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_steps_round_trip_through_their_wire_values() {
        for state in [
            SamplerState::Starting,
            SamplerState::RunningRealtime,
            SamplerState::RunningNonRealtime,
            SamplerState::Finished,
            SamplerState::Failed,
            SamplerState::Displaced,
            SamplerState::Cancelled,
        ] {
            assert_eq!(SamplerState::from_u8(state as u8), state);
        }
        for step in [
            FailedStep::None,
            FailedStep::Affinity,
            FailedStep::Policy,
            FailedStep::Sleep,
        ] {
            assert_eq!(FailedStep::from_u8(step as u8), step);
        }
    }

    #[test]
    fn start_up_ends_in_exactly_one_of_running_and_cancelled() {
        let shared = SamplerShared::new();
        assert!(shared.cancel(), "a starting sampler can be cancelled");
        assert!(!shared.leave_starting(SamplerState::RunningRealtime));
        assert_eq!(shared.state(), SamplerState::Cancelled);

        let shared = SamplerShared::new();
        assert!(shared.leave_starting(SamplerState::RunningNonRealtime));
        assert!(!shared.cancel(), "too late: it runs");
        assert_eq!(shared.state(), SamplerState::RunningNonRealtime);
    }
}
