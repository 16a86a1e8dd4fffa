//! A starved sampler is said: found while the stall lasts (a warn line
//! naming what held the CPU, `latencyd_sampler_stalls_total`, /healthz
//! 503), said again when it ends, listed under `gaps` in the status and
//! on the page, and filed in the record as a gap that `report` lists and
//! `plot --over-time` shades instead of bridging.
//!
//! As root a SCHED_FIFO thread above the samplers spins on one CPU; for
//! anyone, with the test-only fault injection, one sleep of a sampler
//! lasts 2 s longer (the same silence, without a culprit to name).

mod common;

#[cfg(feature = "fault-injection")]
use common::{one_at_a_time, stall::*};

#[cfg(feature = "fault-injection")]
#[test]
fn a_sampler_that_does_not_run_for_two_seconds_is_said_without_root() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // CPU 0's sampler: one sleep, 300 ms after its start, 2 s too long.
    let daemon = daemon(dir.path(), Some("spike:0:300:2000000"));
    found_while_it_lasts(&daemon, 0);
    said_everywhere_after(daemon, dir.path(), 0);
}

#[cfg(not(feature = "fault-injection"))]
#[test]
#[ignore = "needs --features fault-injection (scripts/test passes it)"]
fn a_stall_without_root_needs_the_fault_injection_build() {}
