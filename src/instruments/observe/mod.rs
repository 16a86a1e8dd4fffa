//! Observing CPUs that have no sampler: the time interference took from
//! them, by source, and the wake-up latency of the real-time tasks that
//! run there, from the kernel's own events.
//!
//! The CPUs that matter most on a real-time host (isolated, or exclusive
//! to a real-time pod) cannot carry a sampler without disturbing the
//! workload it would protect. The observer puts nothing on them: a
//! private tracefs instance (`tracer`) records their scheduling and
//! interrupt events, filtered in the kernel; an ordinary thread
//! (`worker`, which `observer` starts and stops) reads the binary
//! ring-buffer pages (`tracefs::ring`) every 100 ms, decodes the events
//! (`tracefs::format`), accounts each CPU's time and each
//! real-time task's wake-ups (`account`, with `tasks` saying which tasks
//! are kernel threads and which container they belong to), and hands an
//! `Interval` through a bounded queue that never blocks its reader.
//!
//! The daemon's instrument is the rest: its run (`run`) starts the
//! observer, takes in its intervals at each collector tick (into the
//! part, and a workload's late wake-up offered to forensics) and stops it;
//! its part (`part`) keeps per CPU the interference and per task what a
//! sampler's CPU keeps; `render` shows it as the `latencyd_task_*`,
//! `latencyd_cpu_interference_*` and `latencyd_observe_*` families
//! (`families`), `/api/v1/observe` (`api.json`) and its notes on the
//! status page. It has no object in `/api/v1/status`.
//! `config` reads its section.

pub mod account;
mod config;
pub mod events;
mod families;
mod noise_counters;
pub mod observer;
mod part;
mod render;
mod run;
pub mod spike;
pub mod tally;
pub mod tasks;
pub mod tracer;
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

pub use config::{ObserveConfig, ObserveCpus};
pub use observer::Observer;
pub use part::{ObservePart, ObservedCpu, TaskView};
pub use render::{ObserveJson, TASK_HISTOGRAM, observe_json};
pub use run::settings;
pub use tally::{CpuTally, Source, Tally};

use super::shape::{Api, Entry, Native};

/// The registry's entry.
pub static ENTRY: Entry = Entry {
    name: "observe",
    section: Some(&config::SECTION),
    schema: None,
    fields: None,
    families: families::FAMILIES,
    native: Some(Native {
        name: TASK_HISTOGRAM,
        series: render::task_series,
        exemplars: Some(render::task_exemplars),
    }),
    api: Some(Api {
        json: render::api,
        openapi: include_str!("api.json"),
    }),
    routes: None,
    idle: |config| Box::new(ObservePart::off(config)),
    start: run::start,
};

use crate::forensics::Capability;
use crate::stats::LatencyStats;

/// What the observer is told to do, from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The CPUs to observe (already resolved from `observe.cpus`).
    pub cpus: Vec<usize>,
    /// Where tracefs is mounted (`forensics.tracefs`).
    pub tracefs: PathBuf,
    /// Each observed CPU's ring buffer, in KiB.
    pub buffer_size_kb: u64,
    /// Task series kept at most; later tasks are counted as `other`.
    pub max_tasks: usize,
    /// Interference names kept per CPU; later ones are counted as `other`.
    pub max_names: usize,
    /// A task's wake-up at least this late is a spike (its histograms'
    /// spike count, as `measure.spike_threshold` for samplers).
    pub spike_threshold_ns: u64,
    /// A task's wake-up at least this late is handed over for a capture
    /// (`forensics.threshold` while forensics runs).
    pub capture_threshold_ns: Option<u64>,
}

/// A real-time task's series: its CPU, its name, its container.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TaskKey {
    pub cpu: usize,
    pub task: String,
    pub container: String,
}

/// The name of the series tasks beyond `max_tasks` are counted in.
pub const OTHER: &str = "other";

/// What the observer saw over one interval (about 100 ms), handed to
/// the daemon's collector.
#[derive(Debug, Clone, Default)]
pub struct Interval {
    /// Interference per observed CPU.
    pub cpus: BTreeMap<usize, CpuTally>,
    /// Wake-up latencies per task series (sample times are the runs').
    pub tasks: BTreeMap<TaskKey, LatencyStats>,
    /// Events the ring buffers lost, per CPU.
    pub lost_events: BTreeMap<usize, u64>,
    /// Wake-ups over the capture threshold, with what ran meanwhile.
    pub spikes: Vec<(TaskKey, tally::WorkloadSpike)>,
}

impl Interval {
    /// Adds a later interval to this one (when the queue was full).
    pub fn merge(&mut self, other: Interval) {
        for (cpu, tally) in other.cpus {
            self.cpus.entry(cpu).or_default().merge(&tally);
        }
        for (key, stats) in other.tasks {
            match self.tasks.get_mut(&key) {
                Some(mine) => {
                    // Same shape: both made by the observer's one constructor.
                    let _ = mine.merge(&stats);
                }
                None => {
                    self.tasks.insert(key, stats);
                }
            }
        }
        for (cpu, n) in other.lost_events {
            *self.lost_events.entry(cpu).or_default() += n;
        }
        self.spikes.extend(other.spikes);
    }

    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
            && self.tasks.is_empty()
            && self.lost_events.is_empty()
            && self.spikes.is_empty()
    }
}

/// Whether the observer runs, and what it found on the way.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub enabled: bool,
    pub available: bool,
    /// Why it is unavailable (none while it runs).
    pub reason: Option<String>,
    pub cpus: Vec<usize>,
    pub capabilities: Vec<Capability>,
    /// Ring-buffer pages and events read since start.
    pub pages: u64,
    pub events: u64,
    /// The observer thread's own CPU time (schedstat), ns.
    pub thread_cpu_ns: u64,
    /// Intervals that waited for the collector (merged, not lost).
    pub intervals_merged: u64,
    /// Reads of a ring buffer that failed since start (one per CPU and
    /// tick): what the events of that time said is missing.
    pub read_errors: u64,
    /// The latest of them, naming its CPU; kept after reads work again.
    pub last_read_error: Option<String>,
    /// While reads fail: `read_errors` before the first of them (the log
    /// says when failing starts and ends, not at every tick).
    pub failing_after: Option<u64>,
    /// The tracefs instance's name, while one is set up.
    pub instance: Option<String>,
    /// How often the instance was found changed or broken behind
    /// latencyd's back and was set back or made again.
    pub repairs: u64,
}

/// What a tick's reads changed in the observer's health, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadHealth {
    /// As before: all reads work, or they still fail.
    Unchanged,
    /// The first failure after reads that worked.
    Failing(String),
    /// Reads work again after this many failures.
    Recovered { failed: u64 },
}

impl Status {
    /// Counts one tick's reads: the pages and events read, the failed
    /// reads and the last one's message.
    pub fn note_tick(
        &mut self,
        pages: u64,
        events: u64,
        failed: u64,
        error: Option<String>,
    ) -> ReadHealth {
        self.pages += pages;
        self.events += events;
        let before = self.read_errors;
        self.read_errors += failed;
        if let Some(error) = error {
            self.last_read_error = Some(error);
        }
        match (self.failing_after, failed > 0) {
            (None, true) => {
                self.failing_after = Some(before);
                ReadHealth::Failing(self.last_read_error.clone().unwrap_or_default())
            }
            (Some(from), false) => {
                self.failing_after = None;
                ReadHealth::Recovered {
                    failed: before - from,
                }
            }
            _ => ReadHealth::Unchanged,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_reads_are_counted_and_said_once_each_way_never_taken_for_unavailability() {
        let mut status = Status {
            enabled: true,
            available: true,
            ..Status::default()
        };
        assert_eq!(status.note_tick(3, 40, 0, None), ReadHealth::Unchanged);
        let error = "CPU 1: reading trace_pipe_raw: Input/output error".to_string();
        assert_eq!(
            status.note_tick(1, 5, 1, Some(error.clone())),
            ReadHealth::Failing(error.clone())
        );
        // Still failing, on two CPUs now: counted, not said again.
        let second = "CPU 2: a ring-buffer page: a record runs past the page".to_string();
        assert_eq!(
            status.note_tick(0, 0, 2, Some(second.clone())),
            ReadHealth::Unchanged
        );
        assert_eq!(
            status.note_tick(2, 7, 0, None),
            ReadHealth::Recovered { failed: 3 }
        );
        assert_eq!((status.pages, status.events), (6, 52));
        assert_eq!(status.read_errors, 3);
        assert_eq!(status.last_read_error.as_deref(), Some(second.as_str()));
        assert!(status.available && status.reason.is_none());
        // A later stretch counts its own failures.
        assert_eq!(
            status.note_tick(0, 0, 1, Some(error.clone())),
            ReadHealth::Failing(error)
        );
        assert_eq!(
            status.note_tick(0, 0, 0, None),
            ReadHealth::Recovered { failed: 1 }
        );
        assert_eq!(status.read_errors, 4);
    }
}
