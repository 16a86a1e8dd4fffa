//! What the observer found, rendered: the `latencyd_task_*`,
//! `latencyd_cpu_interference_*` and `latencyd_observe_*` metric families,
//! and `/api/v1/observe`'s JSON (its DTOs are here, with the renderer
//! that fills them).

use prometheus::proto::Metric;
use serde::Serialize;

use super::families::Scrape;
use super::metric::{availability, counter, gauge, histogram, label};
use crate::daemon::state::{MonitorState, ObservedCpu};
use crate::forensics::Capability;
use crate::forensics::verdict::human;
use crate::observe::{Source, TaskKey};
use crate::units::NS_PER_SEC;

const NS: f64 = NS_PER_SEC as f64;

/// The task latency histogram's name (with native buckets in the
/// protobuf exposition).
pub const TASK_HISTOGRAM: &str = "latencyd_task_wakeup_latency_seconds";

fn task_labels(key: &TaskKey) -> Vec<prometheus::proto::LabelPair> {
    vec![
        label("container", &key.container),
        label("cpu", &key.cpu.to_string()),
        label("task", &key.task),
    ]
}

/// `latencyd_task_wakeup_latency_seconds`, one per task series.
pub fn task_histograms(state: &MonitorState) -> Vec<Metric> {
    state
        .observe
        .tasks
        .iter()
        .map(|(key, v)| {
            histogram(
                task_labels(key),
                &v.buckets,
                v.lifetime.count,
                v.lifetime.sum_ns,
            )
        })
        .collect()
}

/// `latencyd_task_wakeup_latency_seconds` at a scrape.
pub fn task_wakeup_latency_seconds(s: &Scrape) -> Vec<Metric> {
    task_histograms(s.state)
}

pub fn task_wakeup_latency_window_max_seconds(s: &Scrape) -> Vec<Metric> {
    (s.state.observe.tasks.iter())
        .filter_map(|(key, v)| {
            let max = v.window.max(s.now.monotonic_ns)?;
            Some(gauge(task_labels(key), max as f64 / NS))
        })
        .collect()
}

pub fn task_wakeup_latency_max_seconds(s: &Scrape) -> Vec<Metric> {
    (s.state.observe.tasks.iter())
        .map(|(key, v)| gauge(task_labels(key), v.lifetime.max_ns as f64 / NS))
        .collect()
}

pub fn cpu_interference_seconds_total(s: &Scrape) -> Vec<Metric> {
    by_name(s.state, true)
}

pub fn cpu_interference_total(s: &Scrape) -> Vec<Metric> {
    by_name(s.state, false)
}

/// The interference counters by CPU, source and name: time (`seconds`)
/// or count. SMIs have a count but no duration.
fn by_name(state: &MonitorState, seconds: bool) -> Vec<Metric> {
    (state.observe.cpus.iter())
        .flat_map(|(cpu, view)| {
            view.by_name.iter().filter_map(move |((source, name), t)| {
                if seconds && *source == Source::Smi {
                    return None;
                }
                let labels = vec![
                    label("cpu", &cpu.to_string()),
                    label("name", name),
                    label("source", source.name()),
                ];
                let value = if seconds {
                    t.ns as f64 / NS
                } else {
                    t.count as f64
                };
                Some(counter(labels, value))
            })
        })
        .collect()
}

pub fn cpu_interference_window_max_seconds(s: &Scrape) -> Vec<Metric> {
    let now_ns = s.now.monotonic_ns;
    (s.state.observe.cpus.iter())
        .flat_map(|(cpu, view)| {
            view.longest.iter().filter_map(move |(source, window)| {
                let max = window.max(now_ns)?;
                let labels = vec![
                    label("cpu", &cpu.to_string()),
                    label("source", source.name()),
                ];
                Some(gauge(labels, max as f64 / NS))
            })
        })
        .collect()
}

/// Absent when the observer is off.
pub fn observe_available(s: &Scrape) -> Vec<Metric> {
    let status = s.state.observe.status();
    availability(status.enabled, status.available)
}

/// Absent while the observer does not trace.
pub fn observe_read_errors_total(s: &Scrape) -> Vec<Metric> {
    let status = s.state.observe.status();
    if !status.available {
        return vec![];
    }
    vec![counter(vec![], status.read_errors as f64)]
}

pub fn observe_lost_events_total(s: &Scrape) -> Vec<Metric> {
    per_cpu(s.state, |v| v.lost_events)
}

pub fn observe_unseen_wakeups_total(s: &Scrape) -> Vec<Metric> {
    per_cpu(s.state, |v| v.unseen_wakeups)
}

pub fn observe_waiting_tasks(s: &Scrape) -> Vec<Metric> {
    (s.state.observe.cpus.iter())
        .map(|(cpu, view)| {
            gauge(
                vec![label("cpu", &cpu.to_string())],
                view.waiting_tasks as f64,
            )
        })
        .collect()
}

pub fn observe_waiting_let_go_total(s: &Scrape) -> Vec<Metric> {
    per_cpu(s.state, |v| v.waiting_let_go)
}

fn per_cpu(state: &MonitorState, value: impl Fn(&ObservedCpu) -> u64) -> Vec<Metric> {
    (state.observe.cpus.iter())
        .map(|(cpu, view)| counter(vec![label("cpu", &cpu.to_string())], value(view) as f64))
        .collect()
}

/// The status page's lines on the observed CPUs: per CPU its worst task
/// in the window and what took the most time since start; or why the
/// observer does not run (nothing when it is off).
pub fn page_lines(state: &MonitorState, now_ns: u64) -> Vec<String> {
    let o = &state.observe;
    let status = o.status();
    if !status.enabled {
        return vec![];
    }
    if !status.available {
        return vec![format!(
            "Observing is enabled but unavailable: {} (/api/v1/observe)",
            status.reason.as_deref().unwrap_or("unknown reason")
        )];
    }
    // Failing reads first: the lines below then miss events.
    let failing = status.failing_after.map(|_| {
        format!(
            "Observing: reads of the ring buffers are failing ({} failed reads since start), \
             the latest: {} (/api/v1/observe)",
            status.read_errors,
            status.last_read_error.as_deref().unwrap_or("unknown error")
        )
    });
    let observed = status.cpus.iter().map(|&cpu| {
        let worst = o
            .tasks
            .iter()
            .filter(|(key, _)| key.cpu == cpu)
            .filter_map(|(key, v)| Some((v.window.max(now_ns)?, key)))
            .max_by_key(|(max, _)| *max)
            .map_or_else(
                || "no real-time task woke in the window".to_string(),
                |(max, key)| format!("task {} at worst {} in the window", key.task, human(max)),
            );
        let most = o
            .cpus
            .get(&cpu)
            .and_then(|v| v.by_name.iter().max_by_key(|(_, t)| t.ns))
            .map_or_else(String::new, |((source, name), t)| {
                format!(
                    "; most time taken by {} {name} ({} since start)",
                    source.name(),
                    human(t.ns)
                )
            });
        format!("Observed, without a sampler: CPU {cpu} — {worst}{most} (/api/v1/observe)")
    });
    failing.into_iter().chain(observed).collect()
}

/// `/api/v1/observe`.
#[derive(Debug, Serialize)]
pub struct ObserveJson {
    pub enabled: bool,
    pub available: bool,
    pub reason: Option<String>,
    /// The window of the `window_max_ns` fields.
    pub window_ns: u64,
    pub capabilities: Vec<Capability>,
    pub observer: ObserverJson,
    pub cpus: Vec<ObservedCpuJson>,
}

#[derive(Debug, Serialize)]
pub struct ObserverJson {
    pub pages: u64,
    pub events: u64,
    pub thread_cpu_ns: u64,
    pub intervals_merged: u64,
    pub read_errors: u64,
    /// The latest failed read, naming its CPU (kept once reads work).
    pub last_read_error: Option<String>,
    /// The tracefs instance it reads (`latencyd-observe-PID`).
    pub instance: Option<String>,
    /// Times the instance was found changed or broken by another program
    /// and set back or made again.
    pub instance_repairs: u64,
}

#[derive(Debug, Serialize)]
pub struct ObservedCpuJson {
    pub cpu: usize,
    /// Longest single interruption per source over the window.
    pub window_max_ns: std::collections::BTreeMap<&'static str, u64>,
    pub interference: Vec<InterferenceJson>,
    pub tasks: Vec<TaskJson>,
    pub lost_events: u64,
    pub unseen_wakeups: u64,
    /// Tasks that left the CPU without their switch-in traced (some
    /// kernels do not trace switches out of idle): their runs count from
    /// their first event, a woken one has no sample.
    pub untraced_switches: u64,
}

#[derive(Debug, Serialize)]
pub struct InterferenceJson {
    pub source: &'static str,
    pub name: String,
    /// Total time taken (absent for SMIs, which are only counted).
    pub ns: Option<u64>,
    pub count: u64,
    pub max_ns: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct TaskJson {
    pub task: String,
    pub container: String,
    pub count: u64,
    pub min_ns: u64,
    pub avg_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub window_max_ns: Option<u64>,
    /// Wake-ups later than measure.spike_threshold.
    pub spikes: u64,
}

pub fn observe_json(state: &MonitorState, now_ns: u64) -> ObserveJson {
    let o = &state.observe;
    let status = o.status();
    let mut cpus: Vec<ObservedCpuJson> = status
        .cpus
        .iter()
        .map(|&cpu| {
            let view = o.cpus.get(&cpu);
            let mut interference: Vec<InterferenceJson> = view
                .map(|v| {
                    v.by_name
                        .iter()
                        .map(|((source, name), t)| {
                            let timed = *source != Source::Smi;
                            InterferenceJson {
                                source: source.name(),
                                name: name.clone(),
                                ns: timed.then_some(t.ns),
                                count: t.count,
                                max_ns: timed.then_some(t.max_ns),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            interference.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.name.cmp(&b.name)));
            ObservedCpuJson {
                cpu,
                window_max_ns: view
                    .map(|v| {
                        v.longest
                            .iter()
                            .filter_map(|(s, w)| Some((s.name(), w.max(now_ns)?)))
                            .collect()
                    })
                    .unwrap_or_default(),
                interference,
                tasks: o
                    .tasks
                    .iter()
                    .filter(|(key, _)| key.cpu == cpu)
                    .map(|(key, v)| TaskJson {
                        task: key.task.clone(),
                        container: key.container.clone(),
                        count: v.lifetime.count,
                        min_ns: v.lifetime.min_ns(),
                        avg_ns: v.lifetime.avg_ns().round() as u64,
                        p99_ns: v.lifetime.quantile_ns(990_000),
                        max_ns: v.lifetime.max_ns,
                        window_max_ns: v.window.max(now_ns),
                        spikes: v.lifetime.spikes,
                    })
                    .collect(),
                lost_events: view.map_or(0, |v| v.lost_events),
                unseen_wakeups: view.map_or(0, |v| v.unseen_wakeups),
                untraced_switches: view.map_or(0, |v| v.untraced_switches),
            }
        })
        .collect();
    cpus.sort_by_key(|c| c.cpu);
    ObserveJson {
        enabled: status.enabled,
        available: status.available,
        reason: status.reason.clone(),
        window_ns: state.config.export.max_window_ns,
        capabilities: status.capabilities.clone(),
        observer: ObserverJson {
            pages: status.pages,
            events: status.events,
            thread_cpu_ns: status.thread_cpu_ns,
            intervals_merged: status.intervals_merged,
            read_errors: status.read_errors,
            last_read_error: status.last_read_error.clone(),
            instance: status.instance.clone(),
            instance_repairs: status.repairs,
        },
        cpus,
    }
}
