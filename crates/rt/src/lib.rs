//! latencyd's real-time side: everything a sampler thread touches, the
//! engine that starts, drains and joins the samplers, and the statistics
//! they record into. Both front ends, `measure` and the daemon, drive it
//! through `engine`; the `latencyd` crate re-exports it as `latencyd::rt`
//! (with `stats` and `cpulist` at `latencyd::stats` and
//! `latencyd::cpulist`).
//!
//! Architecture invariant: this crate depends on libc, rtrb and
//! hdrhistogram's core and nothing else, so no code here can reach tokio,
//! axum, serde, tracing or any module of the daemon: that is this
//! manifest's fact, kept by `tests/tidy.rs`
//! (`the_real_time_crate_depends_on_libc_rtrb_and_hdrhistogram_only`).
//! A sampler allocates nothing after its start
//! (`crates/rt/tests/no_alloc.rs`).
//!
//! Bottom up:
//! - `cpulist`: CPU lists in the kernel's notation.
//! - `stats`: `LatencyStats`, the HDR state and cyclictest's histogram.
//! - `sys`: every `unsafe` block and libc call of latencyd.
//! - `clock`: the `Clock` the loop sleeps on; the test-only faulty clock.
//! - `sampler`: the loop itself (`hot_loop`) and its deadline arithmetic.
//! - `thread`: starting a sampler thread and its start-up protocol.
//! - `poll`: the busy-poll instrument's loop (oslat's measurement).
//! - `handoff`: the wait-free handoff of intervals to the consumer.
//! - `engine`: the set of samplers of a run.

#![deny(unsafe_op_in_unsafe_fn)]
// Every `unsafe` block says why it is sound (a `SAFETY:` comment).
#![deny(clippy::undocumented_unsafe_blocks)]

// Plain values, then the statistics over them (a comment between the
// groups keeps rustfmt from sorting them).
pub mod cpulist;
pub mod stats;
// The real-time side proper, bottom up, one layer each: the libc calls,
pub mod sys;
// the handoff,
pub mod handoff;
// the clock the loop sleeps on,
pub mod clock;
// the loop,
pub mod sampler;
// a sampler's thread,
pub mod thread;
// the busy-poll loop and its threads,
pub mod poll;
// the engine of a run.
pub mod engine;
