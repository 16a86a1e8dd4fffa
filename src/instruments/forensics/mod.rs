//! `[forensics]`: what delayed each late wake-up, captured while the
//! measurement goes on. The flight recorder itself (its tracefs instance,
//! its thread, rate limits, attribution and store) is `crate::forensics`,
//! which `measure` runs too; this folder is the daemon's instrument over
//! it.
//!
//! Its run (`run`) starts the recorder with its log lines, offers the
//! daemon its [`Capturer`](crate::forensics::Capturer) (the samplers'
//! late wake-ups and every run's go to it), says at each tick what
//! happened to its tracefs instance, and stops the thread at shutdown.
//! Its part (`part`) holds the recorder's journal: `families` builds the
//! `latencyd_forensics_*` and `latencyd_smi_total` families from it,
//! `render` its object of `/api/v1/status`, its "Recent spikes" section
//! of the status page, the captures every histogram's exemplars are
//! chosen from, and its routes: `/api/v1/spikes[/{id}]` and the pages
//! `/spikes[/{id}]` (`pages`, described by `routes.json`).
//! `config` reads its section.

mod config;
mod families;
pub mod pages;
mod part;
mod render;
mod run;

use super::shape::{Entry, Routes};

pub use config::ForensicsConfig;
pub use part::ForensicsPart;

/// The registry's entry.
pub static ENTRY: Entry = Entry {
    name: "forensics",
    section: Some(&config::SECTION),
    schema: Some(include_str!("schema.json")),
    fields: None,
    families: families::FAMILIES,
    native: None,
    api: None,
    routes: Some(Routes {
        list: render::ROUTES,
        openapi: include_str!("routes.json"),
    }),
    idle: |config| Box::new(ForensicsPart::new(config, Default::default())),
    start: run::start,
};
