//! `[load]`: background load started and stopped in scheduled windows,
//! so that the samplers measure the host idle and loaded in turn. Its
//! run starts and stops the load on the blocking pool (`run`), its part
//! holds the windows and what the generators achieved (`part`), and
//! `render` shows them as the `latencyd_load_*` families, its object of
//! `/api/v1/status` and its line of the status page. The profiles and
//! the running load are the `load` room's; `config` reads its
//! section.

mod config;
mod part;
mod render;
mod run;

use super::shape::{Entry, Run, Start, Started};

pub use config::LoadConfig;
pub use part::LoadPart;

/// The registry's entry.
pub static ENTRY: Entry = Entry {
    name: "load",
    section: Some(&config::SECTION),
    schema: Some(include_str!("schema.json")),
    fields: None,
    families: render::FAMILIES,
    native: None,
    api: None,
    routes: None,
    idle: |config| Box::new(LoadPart::new(config)),
    start: |start: &Start<'_>| Started {
        part: Box::new(LoadPart::new(start.config)),
        run: run::LoadWindows::new(start.config, start.host).map(|w| Box::new(w) as Box<dyn Run>),
    },
};
