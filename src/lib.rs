//! latencyd: wake-up latency measured the way cyclictest measures it —
//! one real-time thread per CPU sleeping to absolute deadlines — kept as
//! HDR histograms with exact maxima.
//!
//! The crate is a library with a thin binary (`src/main.rs`) so that the
//! integration tests and benchmarks can drive the same code. See
//! ARCHITECTURE.md for the map of modules and the invariants they keep.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod cli;
pub mod config;
pub mod cpulist;
pub mod daemon;
pub mod engine;
pub mod handoff;
pub mod host;
pub mod measure;
pub mod plot;
pub mod report;
pub mod sampler;
pub mod stats;
pub mod sys;
pub mod units;
pub mod webconfig;
