//! Background load that latencyd starts, stops and reports: rt-tests'
//! hackbench and stress-ng, as installed packages, run in named profiles
//! (`measure --load`, the daemon's `[load]` windows).
//!
//! - `profile`: the profiles and the command lines they run.
//! - `run`: a running load — its guard, its process group, the
//!   supervisor that restarts hackbench and notices early exits.
//! - `output`: what the generators print (hackbench's time, stress-ng's
//!   metrics), read.
//! - `report`: what the load achieved, as text and JSON.
//! - `schedule`: the daemon's daily (or shorter) load windows.

mod output;
mod profile;
mod report;
mod run;
mod schedule;
mod sys;

use std::path::Path;
use std::process::ExitCode;

pub use profile::{Generator, Kind, PROFILES, Profile, check_installed, find_program};
pub use report::{GeneratorReport, LoadJson, LoadReport, Throughput};
pub use run::{LoadSpec, RunningLoad};
pub use schedule::{Schedule, Window};
pub use sys::{hear_stop_signals, signal_group, signal_process};

/// `latencyd load-guard DIR`, started by latencyd only: waits for
/// latencyd's pipe to close, removes the load's scratch directory `DIR`
/// (only a `latencyd-load-*` directory) and kills the load's process
/// group, itself included.
pub fn guard_main(scratch: &Path) -> ExitCode {
    let removable = scratch
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("latencyd-load-"));
    let err = crate::load::sys::guard_group(|| {
        if removable {
            let _ = std::fs::remove_dir_all(scratch);
        }
    });
    eprintln!("latencyd load-guard: {err}");
    ExitCode::from(2)
}
