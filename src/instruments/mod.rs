//! The kernel's own latency instruments, run by latencyd: the timerlat
//! tracer, which splits each wake-up into the timer's interrupt, the
//! woken thread and its return from user space (`timerlat`), and the
//! hwlat tracer, which spins a CPU with interrupts off to see what the
//! hardware, firmware and hypervisor take (`hwlat`). Both are global to
//! the host in part (`osnoise/`, `hwlat_detector/`), so both are good
//! neighbours: settings read first, changed only as needed, watched and
//! set back, and never taken from another user.
//!
//! It is also the room of the daemon's instruments in their one shape
//! (`shape`): one folder each (`forensics`, `observe`, `load_windows`,
//! `host_facts`, `timerlat`, `hwnoise`, `busypoll`, `qualification`),
//! listed in
//! `registry`.

pub mod busypoll;
pub mod event;
pub mod forensics;
pub mod host_facts;
pub mod hwlat;
pub mod hwnoise;
pub mod load_windows;
pub mod observe;
pub mod osnoise;
pub mod qualification;
pub mod registry;
pub mod shape;
pub mod timerlat;
