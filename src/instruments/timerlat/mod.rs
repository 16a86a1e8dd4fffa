//! `[timerlat]`: the kernel's timerlat tracer, which splits each timer
//! period's wake-up into the timer's interrupt (`irq`), the thread it
//! woke (`thread`) and, with latencyd's own threads, that thread's return
//! from user space (`user`).
//!
//! The tracer itself (`tracer`, with its user-space threads in
//! `workload`), its reader thread (`source`) and the intervals it hands
//! over (`tally`) serve `measure --timerlat` as well. The daemon's
//! instrument is the rest: its run (`run`) starts the reader, takes in
//! its intervals at each tick (into the part, the record, and forensics
//! when a thread is late past its threshold; a CPU another instrument
//! claims kept apart) and stops it, setting `osnoise/` back; its part
//! (`part`) keeps per CPU and context what a sampler's CPU keeps; `render`
//! shows it as the `latencyd_timerlat_*` families, `/api/v1/timerlat`
//! (`api.json`), its object of `/api/v1/status` (`schema.json`), its lines
//! of the status page and its plot.
//! `config` reads its section.

mod config;
mod part;
mod render;
mod run;
pub mod source;
pub mod tally;
mod tracer;
pub mod workload;

use super::shape::{Api, Entry, Native, Start};

pub use config::{TimerlatConfig, TimerlatCpus};
pub use part::{ContextView, TimerlatPart};
pub use render::{
    ContextJson, NeighbourJson, TIMERLAT_HISTOGRAM, TimerlatCpuJson, TimerlatJson, timerlat_json,
};
pub use tracer::*;

/// The registry's entry.
pub static ENTRY: Entry = Entry {
    name: "timerlat",
    section: Some(&config::SECTION),
    schema: Some(include_str!("schema.json")),
    fields: None,
    families: render::FAMILIES,
    native: Some(Native {
        name: TIMERLAT_HISTOGRAM,
        series: render::series,
        exemplars: None,
    }),
    api: Some(Api {
        json: render::api,
        openapi: include_str!("api.json"),
    }),
    routes: None,
    idle: |config| Box::new(TimerlatPart::off(config)),
    start: |start: &Start<'_>| run::start(start.config, start.measured),
};
