//! The instruments the daemon runs, in the order it steps them and serves
//! their families, objects and lines. Adding an instrument is one folder
//! beside this file and one line here.

use super::shape::Entry;

/// Every registered instrument.
pub static INSTRUMENTS: &[&Entry] = &[
    &super::forensics::ENTRY,
    &super::observe::ENTRY,
    &super::load_windows::ENTRY,
    &super::host_facts::ENTRY,
    &super::timerlat::ENTRY,
    &super::hwnoise::ENTRY,
    &super::busypoll::ENTRY,
    &super::qualification::ENTRY,
];
