//! `ObserveState`: what the observer found on the CPUs it watches, as the
//! collector took it in — interference totals by source and name with
//! each source's longest interruption over the window, and each real-time
//! task's wake-up latency (lifetime histogram, window maximum by sample
//! time, Prometheus buckets), exactly as for a sampler's CPU.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::{BucketCounts, NativeCounts, WindowMax};
use crate::config::Config;
use crate::observe::{Interval, Source, Status, Tally, TaskKey};
use crate::stats::LatencyStats;

/// One observed CPU.
#[derive(Debug, Clone)]
pub struct ObservedCpu {
    pub by_name: BTreeMap<(Source, String), Tally>,
    /// Each source's longest single interruption, by when it ended.
    pub longest: BTreeMap<Source, WindowMax>,
    pub lost_events: u64,
    pub unseen_wakeups: u64,
    pub untraced_switches: u64,
    /// Woken tasks held as waiting at the latest interval.
    pub waiting_tasks: u64,
    /// Woken tasks let go without a sample (`latencyd_observe_waiting_let_go_total`).
    pub waiting_let_go: u64,
}

/// One real-time task series.
#[derive(Debug, Clone)]
pub struct TaskView {
    pub lifetime: LatencyStats,
    pub window: WindowMax,
    pub buckets: BucketCounts,
    pub native: NativeCounts,
}

#[derive(Debug, Clone)]
pub struct ObserveState {
    /// The observer's own status (locked on its own, briefly).
    pub status: Arc<Mutex<Status>>,
    pub cpus: BTreeMap<usize, ObservedCpu>,
    pub tasks: BTreeMap<TaskKey, TaskView>,
    window_ns: u64,
    spike_threshold_ns: u64,
    buckets_ns: Vec<u64>,
}

impl ObserveState {
    /// Observation off (`observe.enabled = false`), as the status says.
    pub fn off(config: &Config) -> ObserveState {
        ObserveState::new(crate::observe::Observer::disabled().status(), config)
    }

    pub fn new(status: Arc<Mutex<Status>>, config: &Config) -> ObserveState {
        ObserveState {
            status,
            cpus: BTreeMap::new(),
            tasks: BTreeMap::new(),
            window_ns: config.export.max_window_ns,
            spike_threshold_ns: config.measure.spike_threshold_ns,
            buckets_ns: config.export.buckets_ns.clone(),
        }
    }

    /// A copy of the observer's status.
    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Takes in one interval from the observer.
    pub fn absorb(&mut self, interval: Interval) {
        let window_ns = self.window_ns;
        for (cpu, tally) in interval.cpus {
            let view = self.cpus.entry(cpu).or_insert_with(|| ObservedCpu {
                by_name: BTreeMap::new(),
                longest: BTreeMap::new(),
                lost_events: 0,
                unseen_wakeups: 0,
                untraced_switches: 0,
                waiting_tasks: 0,
                waiting_let_go: 0,
            });
            for (key, t) in tally.by_name {
                view.by_name.entry(key).or_default().merge(&t);
            }
            for (source, (ns, at)) in tally.longest {
                view.longest
                    .entry(source)
                    .or_insert_with(|| WindowMax::new(window_ns))
                    .record(at, ns);
            }
            view.unseen_wakeups += tally.unseen_wakeups;
            view.untraced_switches += tally.untraced_switches;
            view.waiting_tasks = tally.waiting_tasks;
            view.waiting_let_go += tally.waiting_let_go;
        }
        for (cpu, lost) in interval.lost_events {
            if let Some(view) = self.cpus.get_mut(&cpu) {
                view.lost_events += lost;
            }
        }
        for (key, stats) in interval.tasks {
            let view = self.tasks.entry(key).or_insert_with(|| TaskView {
                lifetime: LatencyStats::new(self.spike_threshold_ns, None),
                window: WindowMax::new(window_ns),
                buckets: BucketCounts::new(&self.buckets_ns),
                native: NativeCounts::default(),
            });
            // Same shape: both are plain HDR statistics.
            let _ = view.lifetime.merge(&stats);
            if let Some(at) = stats.max_at_ns() {
                view.window.record(at, stats.max_ns);
            }
            view.buckets.add(&stats);
            view.native.add(&stats);
        }
    }
}
