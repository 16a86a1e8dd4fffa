//! The real-time side: everything a sampler thread touches, and the engine
//! that starts, drains and joins the samplers. Nothing here imports tokio,
//! axum, serde, tracing or any module above it (`tests/tidy.rs` checks);
//! both front ends, `measure` and the daemon, drive it through `engine`.
//!
//! - `sys`: every `unsafe` block and libc call of the crate.
//! - `clock`: the `Clock` the loop sleeps on; the test-only faulty clock.
//! - `sampler`: the loop itself (`hot_loop`) and its deadline arithmetic.
//! - `thread`: starting a sampler thread and its start-up protocol.
//! - `handoff`: the wait-free handoff of intervals to the consumer.
//! - `engine`: the set of samplers of a run.

pub mod clock;
pub mod engine;
pub mod handoff;
pub mod sampler;
pub mod sys;
pub mod thread;
