//! `[hwnoise]`: the kernel's hwlat tracer run in scheduled windows, to
//! see what the hardware, firmware and hypervisor take from the CPUs
//! with interrupts off. Its thread (`windows`) runs the windows; its run
//! (`run`) says at each tick which CPUs a window spins, so that what
//! else measures them is kept apart, and files the windows that ended
//! in the record; its part (`part`) holds the thread's status and what
//! was kept apart; `render` shows them as the `latencyd_hwnoise_*`
//! families, its object of `/api/v1/status` and its line of the status
//! page. `config` reads its section.

mod config;
mod part;
mod render;
mod run;
mod windows;

use super::shape::{Entry, Start};

pub use config::HwnoiseConfig;
pub use part::{HwnoisePart, KeptApart, SPUN_AFTER_NS};
pub use windows::*;

/// The registry's entry.
pub static ENTRY: Entry = Entry {
    name: "hwnoise",
    section: Some(&config::SECTION),
    schema: Some(include_str!("schema.json")),
    fields: None,
    families: render::FAMILIES,
    native: None,
    api: None,
    routes: None,
    idle: |_| Box::new(HwnoisePart::off()),
    start: |start: &Start<'_>| run::start(start.config, start.host),
};
