//! `ObservePart`: what the observer found on the CPUs it watches, as its
//! run took it in — interference totals by source and name with
//! each source's longest interruption over the window, and each real-time
//! task's wake-up latency (lifetime histogram, window maximum by sample
//! time, Prometheus buckets), exactly as for a sampler's CPU.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;

use super::{Interval, Source, Status, Tally, TaskKey};
use crate::config::Config;
use crate::instruments::shape::Part;
use crate::series::{BucketCounts, NativeCounts, WindowMax};
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
pub struct ObservePart {
    /// The observer's own status (locked on its own, briefly).
    pub status: Arc<Mutex<Status>>,
    pub cpus: BTreeMap<usize, ObservedCpu>,
    pub tasks: BTreeMap<TaskKey, TaskView>,
    window_ns: u64,
    spike_threshold_ns: u64,
    buckets_ns: Vec<u64>,
}

impl ObservePart {
    /// Observation off (`observe.enabled = false`), as the status says.
    pub fn off(config: &Config) -> ObservePart {
        ObservePart::new(super::Observer::disabled().status(), config)
    }

    pub fn new(status: Arc<Mutex<Status>>, config: &Config) -> ObservePart {
        ObservePart {
            status,
            cpus: BTreeMap::new(),
            tasks: BTreeMap::new(),
            window_ns: config.export.max_window_ns,
            spike_threshold_ns: config.measure.spike_threshold_ns,
            buckets_ns: config.export.buckets_ns.clone(),
        }
    }

    /// The trailing window of its maxima (`export.max_window`), ns.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
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

impl Part for ObservePart {
    /// None: its own route, `/api/v1/observe`, says all.
    fn status(&self) -> Option<Box<RawValue>> {
        None
    }

    fn cpu_notes(&self, now_ns: u64) -> Vec<String> {
        super::render::page_lines(self, now_ns)
    }

    fn tracefs_repairs(&self) -> Option<u64> {
        let status = self.status();
        status.enabled.then_some(status.repairs)
    }

    fn resize_window(&mut self, window_ns: u64, now_ns: u64) {
        self.window_ns = window_ns;
        let cpus = self.cpus.values_mut().flat_map(|c| c.longest.values_mut());
        for window in cpus.chain(self.tasks.values_mut().map(|t| &mut t.window)) {
            *window = window.resized(window_ns, now_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::observe::CpuTally;

    const S: u64 = 1_000_000_000;

    /// An observer that traces CPU 3, its instance repaired twice.
    fn part(config: &Config) -> ObservePart {
        let status = Status {
            enabled: true,
            available: true,
            cpus: vec![3],
            repairs: 2,
            ..Status::default()
        };
        ObservePart::new(Arc::new(Mutex::new(status)), config)
    }

    /// One interval: an IRQ's interruption of 4 µs ending at `at`, and a
    /// task's wake-up 50 µs late at `at`.
    fn interval(at: u64) -> Interval {
        let mut tally = CpuTally::default();
        tally.add(Source::Irq, "local_timer", 4_000, at);
        let mut stats = LatencyStats::new(100_000, None);
        stats.record_at(50_000, 0, at);
        let key = TaskKey {
            cpu: 3,
            task: "rtapp".to_string(),
            container: String::new(),
        };
        let mut interval = Interval::default();
        interval.cpus.insert(3, tally);
        interval.tasks.insert(key, stats);
        interval
    }

    #[test]
    fn a_reload_of_the_window_resizes_every_maximum_keeping_what_it_holds() {
        let mut config = crate::instruments::registry::builtin_config();
        config.export.max_window_ns = 60 * S;
        let mut part = part(&config);
        part.absorb(interval(100 * S));
        let task = |p: &ObservePart, now| p.tasks.values().next().unwrap().window.max(now);
        let irq = |p: &ObservePart, now| p.cpus[&3].longest[&Source::Irq].max(now);
        assert_eq!(task(&part, 150 * S), Some(50_000));
        assert_eq!(task(&part, 170 * S), None, "a minute later, gone");
        part.resize_window(300 * S, 120 * S);
        assert_eq!(part.window_ns(), 300 * S);
        assert_eq!(task(&part, 170 * S), Some(50_000), "kept, now for 5 min");
        assert_eq!(irq(&part, 390 * S), Some(4_000));
        assert_eq!(irq(&part, 401 * S), None);
        // A series made after the reload gets the new window.
        let mut later = interval(500 * S);
        later.tasks = std::mem::take(&mut later.tasks)
            .into_iter()
            .map(|(mut key, stats)| {
                key.task = "other".to_string();
                (key, stats)
            })
            .collect();
        part.absorb(later);
        let other = part
            .tasks
            .iter()
            .find(|(k, _)| k.task == "other")
            .unwrap()
            .1;
        assert_eq!(other.window.window_ns(), 300 * S);
    }

    #[test]
    fn it_has_no_status_object_and_says_its_instance_repairs_while_enabled() {
        let config = crate::instruments::registry::builtin_config();
        let on = part(&config);
        assert!(Part::status(&on).is_none(), "no object in /api/v1/status");
        assert_eq!(on.tracefs_repairs(), Some(2));
        assert_eq!(ObservePart::off(&config).tracefs_repairs(), None);
        assert!(
            on.cpu_notes(0)[0].starts_with("Observed, without a sampler: CPU 3"),
            "{:?}",
            on.cpu_notes(0)
        );
        assert!(ObservePart::off(&config).cpu_notes(0).is_empty());
    }
}
