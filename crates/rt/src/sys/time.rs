//! The clocks a sampler reads and sleeps on: which one (cyclictest's
//! `-c`), reading it from the vDSO, and absolute or relative sleeps; and
//! the calling thread's own CPU time, as the scheduler accounts it.

use std::mem::MaybeUninit;

/// The clocks a sampler can sleep on and read (cyclictest's `-c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockSource {
    #[default]
    Monotonic,
    Realtime,
}

impl ClockSource {
    pub(super) fn to_libc(self) -> libc::clockid_t {
        match self {
            ClockSource::Monotonic => libc::CLOCK_MONOTONIC,
            ClockSource::Realtime => libc::CLOCK_REALTIME,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ClockSource::Monotonic => "CLOCK_MONOTONIC",
            ClockSource::Realtime => "CLOCK_REALTIME",
        }
    }
}

/// Reads `clock` in nanoseconds (the vDSO serves both clocks: no system
/// call).
#[inline]
pub fn clock_now_ns(clock: ClockSource) -> u64 {
    let mut ts = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `ts` is a valid out-pointer; both clocks always exist on
    // Linux, so the call cannot fail and fully initialises `ts`.
    let ts = unsafe {
        libc::clock_gettime(clock.to_libc(), ts.as_mut_ptr());
        ts.assume_init()
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(super) fn timespec_of(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Sleeps on `clock` until the absolute `deadline_ns` (with `absolute`),
/// or for `deadline_ns` from now (without: cyclictest's `-r`). An
/// interrupted absolute sleep is resumed to the same deadline, a relative
/// one for what remains. Returns the error number on failure.
#[inline]
pub fn clock_sleep_ns(clock: ClockSource, absolute: bool, ns: u64) -> Result<(), i32> {
    let mut ts = timespec_of(ns);
    let flags = if absolute { libc::TIMER_ABSTIME } else { 0 };
    loop {
        let mut remaining = MaybeUninit::<libc::timespec>::uninit();
        // SAFETY: `ts` is a valid timespec and `remaining` a valid
        // out-pointer, written only when the sleep is interrupted.
        let rc =
            unsafe { libc::clock_nanosleep(clock.to_libc(), flags, &ts, remaining.as_mut_ptr()) };
        match rc {
            0 => return Ok(()),
            libc::EINTR if absolute => continue,
            libc::EINTR => {
                // SAFETY: an interrupted relative sleep wrote the remainder.
                ts = unsafe { remaining.assume_init() };
            }
            err => return Err(err),
        }
    }
}

/// This process's CPU time (every thread, user and system), ns, from
/// `CLOCK_PROCESS_CPUTIME_ID`: the scheduler's account, not ticks.
pub fn process_cpu_ns() -> Option<u64> {
    let mut ts = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `ts` is a valid out-pointer; it is read only when the call
    // succeeded, which initialises it.
    let ts = unsafe {
        if libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, ts.as_mut_ptr()) != 0 {
            return None;
        }
        ts.assume_init()
    };
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The calling thread's CPU time from `/proc/thread-self/schedstat`, ns
/// (the scheduler's own account, not tick-sampled).
pub fn thread_cpu_ns() -> Option<u64> {
    super::read_small("/proc/thread-self/schedstat")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
