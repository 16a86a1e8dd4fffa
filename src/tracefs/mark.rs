//! A mark in the kernel's top-level trace where a one-shot run stopped at
//! a threshold (`measure -b --tracemark`, `oslat -T`): a line written to
//! `trace_marker`, then tracing switched off (`tracing_on`), so that a
//! trace someone records with trace-cmd or perf ends at the event, as
//! cyclictest and oslat leave it. Opened before the run; a file that
//! cannot be opened is said on stderr and the run goes on without it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::{DEFAULT_TRACEFS, locate_for};

pub struct TraceMark {
    marker: Option<File>,
    tracing_on: Option<File>,
}

impl TraceMark {
    /// Opens both files; `who` and `option` name the command and its
    /// option in the warnings (`"latencyd measure"`, `"--tracemark"`).
    pub fn open(who: &str, option: &str) -> TraceMark {
        let root = match locate_for(Path::new(DEFAULT_TRACEFS), "forensics") {
            Ok(root) => root,
            Err(err) => {
                eprintln!("{who}: warning: {option}: {err}; no trace mark will be written");
                return TraceMark {
                    marker: None,
                    tracing_on: None,
                };
            }
        };
        let open = |name: &str| {
            let path = root.join(name);
            match OpenOptions::new().write(true).open(&path) {
                Ok(file) => Some(file),
                Err(err) => {
                    eprintln!(
                        "{who}: warning: {option}: cannot open {} ({err}); no trace mark will \
                         be written",
                        path.display()
                    );
                    None
                }
            }
        };
        TraceMark {
            marker: open("trace_marker"),
            tracing_on: open("tracing_on"),
        }
    }

    /// Writes `line` into the trace and stops tracing.
    pub fn hit(&mut self, line: &str) {
        if let Some(marker) = &mut self.marker {
            let _ = marker.write_all(line.as_bytes());
        }
        if let Some(tracing_on) = &mut self.tracing_on {
            let _ = tracing_on.write_all(b"0\n");
        }
    }
}
