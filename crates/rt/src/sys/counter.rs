//! The CPU's free-running counter, read the cheapest way the architecture
//! allows, for the busy-poll loop (`poll`): the time-stamp counter on
//! x86-64 (after an `lfence`, so that the read is not moved ahead of the
//! loop's previous work), the virtual counter on AArch64 (between `isb`s),
//! and `CLOCK_MONOTONIC` in nanoseconds elsewhere. A gap between two reads
//! is the time the polling thread did not run.

use super::ClockSource;
use super::time::clock_now_ns;

/// Which counter `read` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// x86-64's time-stamp counter (`rdtsc`); its rate is measured
    /// against `CLOCK_MONOTONIC_RAW` (`poll::counter_mhz`).
    Tsc,
    /// AArch64's virtual counter (`cntvct_el0`); its rate is `cntfrq_el0`.
    ArmVirtual,
    /// `CLOCK_MONOTONIC`, one tick per nanosecond (1,000 MHz).
    Monotonic,
}

impl Counter {
    /// The counter of this build's architecture.
    pub fn native() -> Counter {
        if cfg!(target_arch = "x86_64") {
            Counter::Tsc
        } else if cfg!(target_arch = "aarch64") {
            Counter::ArmVirtual
        } else {
            Counter::Monotonic
        }
    }

    /// How the counter is named in output.
    pub fn name(self) -> &'static str {
        match self {
            Counter::Tsc => "tsc",
            Counter::ArmVirtual => "cntvct",
            Counter::Monotonic => "CLOCK_MONOTONIC",
        }
    }

    /// The counter's value now.
    #[inline(always)]
    pub fn read(self) -> u64 {
        match self {
            Counter::Tsc => read_tsc(),
            Counter::ArmVirtual => read_arm_virtual(),
            Counter::Monotonic => clock_now_ns(ClockSource::Monotonic),
        }
    }

    /// The counter's rate as the hardware states it, where it does
    /// (AArch64's `cntfrq_el0`; 1 GHz for the monotonic clock).
    pub fn stated_hz(self) -> Option<u64> {
        match self {
            Counter::Tsc => None,
            Counter::ArmVirtual => arm_counter_hz(),
            Counter::Monotonic => Some(1_000_000_000),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn read_tsc() -> u64 {
    // SAFETY: `lfence` and `rdtsc` exist on every x86-64 CPU and only read
    // the counter (no memory is touched); the fence keeps the read from
    // being executed before the instructions ahead of it.
    unsafe {
        std::arch::x86_64::_mm_lfence();
        std::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn read_tsc() -> u64 {
    clock_now_ns(ClockSource::Monotonic)
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn read_arm_virtual() -> u64 {
    let value: u64;
    // SAFETY: `cntvct_el0` is readable at EL0 on Linux (the kernel enables
    // it for the vDSO); the `isb`s keep the read in program order, and
    // nothing but the output register is written.
    unsafe {
        std::arch::asm!(
            "isb",
            "mrs {v}, cntvct_el0",
            "isb",
            v = out(reg) value,
            options(nostack, preserves_flags)
        );
    }
    value
}

#[cfg(not(target_arch = "aarch64"))]
fn read_arm_virtual() -> u64 {
    clock_now_ns(ClockSource::Monotonic)
}

#[cfg(target_arch = "aarch64")]
fn arm_counter_hz() -> Option<u64> {
    let hz: u64;
    // SAFETY: `cntfrq_el0` is readable at EL0; only the output register is
    // written.
    unsafe {
        std::arch::asm!("mrs {v}, cntfrq_el0", v = out(reg) hz, options(nomem, nostack, preserves_flags));
    }
    (hz > 0).then_some(hz)
}

#[cfg(not(target_arch = "aarch64"))]
fn arm_counter_hz() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_native_counter_never_runs_backwards_on_one_cpu() {
        crate::sys::pin_current_thread(crate::sys::current_cpu().unwrap_or(0)).ok();
        let counter = Counter::native();
        let mut previous = counter.read();
        for _ in 0..100_000 {
            let now = counter.read();
            assert!(
                now >= previous,
                "{} went back: {previous} then {now}",
                counter.name()
            );
            previous = now;
        }
    }

    #[test]
    fn the_monotonic_counter_states_one_tick_per_nanosecond() {
        assert_eq!(Counter::Monotonic.stated_hz(), Some(1_000_000_000));
        assert!(Counter::Monotonic.read() > 0);
    }
}
