//! `[host]`: the host's fingerprint, the facts that decide its latency
//! (kernel, command line, CPU and firmware, idle and frequency policies,
//! PM QoS, IRQ affinities, ...), read at start and again every
//! `host.reread_interval`, each change noticed, dated and kept. The facts
//! themselves are read by `crate::host`, which `measure` uses too; this
//! folder is the daemon's instrument over them.
//!
//! Its run (`run`) reads them first (against the last ones the record
//! holds), reads them again on the blocking pool, logs each change, and
//! files each of the record's intervals under the facts in force as it
//! ended. Its part (`part`) holds the tracker (`track`): `families`
//! builds `latencyd_cpu_info` and the `latencyd_host_fingerprint_*` and
//! `latencyd_host_fact*` families from it, `render` `/api/v1/host`
//! (`routes.json`), the `fingerprint` and `topology` fields of
//! `/api/v1/status` (`fields.json`) and the status page's "Host
//! configuration". `config` reads its section.

mod config;
mod families;
mod part;
mod render;
mod run;
mod track;

use super::shape::{Entry, Routes};

pub use config::HostConfig;
pub use part::HostFactsPart;
pub use render::main_facts;
pub use track::{ChangeSeen, HostChange, HostTrack, MAX_HISTORY, ONLINE_SETTLE_NS, OnlineSettling};

/// The registry's entry.
pub static ENTRY: Entry = Entry {
    name: "host",
    section: Some(&config::SECTION),
    schema: None,
    fields: Some(include_str!("fields.json")),
    families: families::FAMILIES,
    native: None,
    api: None,
    routes: Some(Routes {
        list: render::ROUTES,
        openapi: include_str!("routes.json"),
    }),
    idle: |config| Box::new(HostFactsPart::unread(config)),
    start: run::start,
};
