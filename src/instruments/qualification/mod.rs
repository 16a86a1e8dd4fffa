//! The host's last qualification (`latencyd qualify --record`), read from
//! the record's directory when the daemon starts: the maxima the host
//! qualified with per phase and CPU, when, under which profile and with
//! which verdict. Its families let the dashboards draw the qualified
//! maximum beside the measured one and the regression alert start from
//! it on a host's first day, before a week of history exists. It has no
//! run: the file is read once (a restart reads a newer one).

mod part;

use super::shape::Entry;

pub use part::QualificationPart;

/// The registry's entry.
pub static ENTRY: Entry = Entry {
    name: "qualification",
    schema: include_str!("schema.json"),
    families: part::FAMILIES,
    // Read as the daemon starts, not before: the idle part does no I/O.
    idle: |_| Box::new(QualificationPart::not_read()),
    start: |start| super::shape::Started {
        part: Box::new(QualificationPart::read(&start.config.record.dir)),
        run: None,
    },
};
