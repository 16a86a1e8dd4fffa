//! `latencyd measure`: a one-shot, cyclictest-compatible measurement.
//!
//! - `options`: stage two of the command line (`MeasureOptions`).
//! - `run`: the measurement itself, through the engine; `tuning` what it
//!   changes on the host meanwhile, `live` what it prints while running,
//!   `breaks` `-b` and `--forensics`, `log` the `--log` file,
//!   `background` the `--load`.
//! - `report`: a finished run as plain data; `text` and `json` render it
//!   in cyclictest's formats.

mod background;
mod breaks;
mod drain;
mod hwlat;
mod json;
mod live;
mod log;
mod options;
mod output;
mod report;
mod run;
mod setup;
pub mod text;
mod timerlat;
mod tuning;

use std::process::ExitCode;

pub use json::json_document;
pub use options::{
    HistogramOption, JsonTarget, MeasureOptions, Note, PmQos, ThreadPlan, UsageError,
};
pub use report::{RunReport, ThreadReport};
pub use run::run;
pub use text::{format_summary_line, histogram_block, summary_line, summary_lines};

use crate::cli::MeasureArgs;
use crate::host::HostInfo;

/// Entry point of the subcommand: validation errors exit 2 (like clap's),
/// run-time failures exit 1.
pub fn main(args: &MeasureArgs) -> ExitCode {
    let host = HostInfo::detect();
    let options = match MeasureOptions::from_args(args, &host) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("latencyd measure: {err}");
            return ExitCode::from(2);
        }
    };
    for note in &options.notes {
        eprintln!("latencyd measure: note: {note}");
    }
    let cmdline = std::env::args().collect::<Vec<_>>().join(" ");
    match run(&options, &host, cmdline) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("latencyd measure: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
