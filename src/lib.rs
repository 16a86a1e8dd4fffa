//! latencyd: wake-up latency measured the way cyclictest measures it —
//! one real-time thread per CPU sleeping to absolute deadlines — kept as
//! HDR histograms with exact maxima.
//!
//! The crate is a library with a thin binary (`src/main.rs`) so that the
//! integration tests and benchmarks can drive the same code. Modules are
//! listed from the bottom layer up, in the order of `tests/tidy.rs`'s
//! `LAYERS` and ARCHITECTURE.md's code map (a test checks all three); a
//! module imports only from layers below its own. See ARCHITECTURE.md for the map
//! and the invariants.

#![deny(unsafe_op_in_unsafe_fn)]
// Every `unsafe` block says why it is sound (a `SAFETY:` comment).
#![deny(clippy::undocumented_unsafe_blocks)]

// Plain values: no imports from the crate.
pub mod cli;
pub mod files;
pub mod markup;
pub mod signals;
pub mod units;
// Calendar time (RFC 3339), over the units.
pub mod calendar;
// What a latency series keeps between scrapes; metrics in Prometheus'
// data model, built one by one.
pub mod exposition;
pub mod series;
// The real-time side and the statistics it records, a crate of its own
// (crates/rt): CPU lists, statistics, samplers, handoff, engine.
pub use latencyd_rt as rt;
pub use latencyd_rt::{cpulist, stats};
// The host and what /proc says of its tasks.
pub mod host;
pub mod tasks;
// The choices both front ends make against the host.
pub mod sampling;
// Background load the front ends start and report; the tracefs instances
// forensics and the observer own.
pub mod load;
pub mod tracefs;
// Configuration of the daemon, read with its sources; below what it
// configures, so that each part reads its own section.
pub mod config;
// Spike forensics; the on-disk record of intervals.
pub mod forensics;
pub mod record;
// The daemon's instruments in their one shape (the observer, timerlat,
// hwlat windows, ...), and the kernel's tracers they run.
pub mod instruments;
// Plots of any histogram.
pub mod plot;
// The two front ends, and oslat's one-shot busy-poll measurement.
pub mod daemon;
pub mod measure;
pub mod oslat;
// A front end over the record, using measure's cyclictest renderers;
// qualification, running the one-shot tools in phases.
pub mod qualify;
pub mod report;
// The fuzz targets over every parser of outside input (fuzz/, and
// tests/fuzz_corpus.rs replaying their corpus).
pub mod fuzzing;
