//! The host's last qualification (`latencyd qualify --record`), read from
//! the record's directory when the daemon starts: the maxima the host
//! qualified with per phase and CPU, when, under which profile and with
//! which verdict. Its families let the dashboards draw the qualified
//! maximum beside the measured one and the regression alert start from
//! it on a host's first day, before a week of history exists. Its run
//! (`run`) looks for a newer file every 5 s, so that a host qualified
//! while the daemon runs is served without a restart.

mod part;
mod run;

use super::shape::Entry;

pub use part::QualificationPart;

/// The registry's entry.
pub static ENTRY: Entry = Entry {
    name: "qualification",
    section: None,
    schema: Some(include_str!("schema.json")),
    fields: None,
    families: part::FAMILIES,
    native: None,
    api: None,
    // Read as the daemon starts, not before: the idle part does no I/O.
    routes: None,
    idle: |_| Box::new(QualificationPart::not_read()),
    start: |start| {
        let dir = &start.config.record.dir;
        // The identity before the read: a file replaced between the two
        // is read again at the first look.
        let seen = run::identity(dir);
        let now_ns = crate::rt::sys::monotonic_now_ns();
        super::shape::Started {
            part: Box::new(QualificationPart::read(dir)),
            run: Some(Box::new(run::Rescan::new(
                dir,
                seen,
                now_ns,
                run::RESCAN_NS,
            ))),
        }
    },
};
