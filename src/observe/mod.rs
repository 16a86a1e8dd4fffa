//! Observing CPUs that have no sampler: the time interference took from
//! them, by source, and the wake-up latency of the real-time tasks that
//! run there, from the kernel's own events.
//!
//! The CPUs that matter most on a real-time host (isolated, or exclusive
//! to a real-time pod) cannot carry a sampler without disturbing the
//! workload it would protect. The observer puts nothing on them: a
//! private tracefs instance (`tracer`) records their scheduling and
//! interrupt events, filtered in the kernel; an ordinary thread
//! (`observer`) reads the binary ring-buffer pages (`ring`) every 100 ms,
//! decodes the events (`format`), accounts each CPU's time and each
//! real-time task's wake-ups (`account`, with `tasks` saying which tasks
//! are kernel threads and which container they belong to), and hands an
//! `Interval` to the daemon's collector through a bounded queue that
//! never blocks it.

pub mod account;
pub mod format;
pub mod observer;
pub mod ring;
pub mod spike;
pub mod tally;
pub mod tasks;
pub mod tracer;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

pub use observer::Observer;
pub use tally::{CpuTally, Source, Tally};

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
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    pub enabled: bool,
    pub available: bool,
    /// Why it is unavailable, or what went wrong last.
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
}
