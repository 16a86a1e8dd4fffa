//! `[busypoll]`: busy-poll latency measured in scheduled windows on the
//! CPUs kept for polling workloads, as oslat measures it (the real-time
//! crate's `poll` loop, one thread per CPU reading the CPU's counter as
//! fast as it can). A polling thread (DPDK's, a PLC's spinning task) sees
//! each gap between two reads as time the OS took the CPU away. Its run
//! (`run`) starts a window's pollers on their own thread and takes in
//! their tallies when they finish; its part (`part`) keeps each CPU's
//! gaps over all windows and the last window's figures; `render` shows
//! them as the `latencyd_busypoll_*` families, its object of
//! `/api/v1/status` and its line of the status page. `config`
//! reads the section and refuses a CPU a sampler measures.

mod config;
mod part;
mod render;
mod run;

use super::shape::{Entry, Start};

pub use config::BusypollConfig;
use part::unix_ns;
pub use part::{BusypollPart, CpuGaps, LastWindow, WindowCpu};

/// The registry's entry.
pub static ENTRY: Entry = Entry {
    name: "busypoll",
    section: Some(&config::SECTION),
    schema: Some(include_str!("schema.json")),
    fields: None,
    families: render::FAMILIES,
    native: None,
    api: None,
    routes: None,
    idle: |config| Box::new(BusypollPart::new(config)),
    start: |start: &Start<'_>| run::start(start),
};
