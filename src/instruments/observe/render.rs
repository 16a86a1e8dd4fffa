//! What the observer found, rendered: the `latencyd_task_*`,
//! `latencyd_cpu_interference_*` and `latencyd_observe_*` metric families
//! (the task histogram with its native buckets and exemplars),
//! `/api/v1/observe`'s JSON (its DTOs are here, with the renderer that
//! fills them; `api.json` describes them) and its lines among the status
//! page's notes on CPUs without a sampler.

use prometheus::proto::Metric;
use serde::Serialize;
use serde_json::value::RawValue;

use super::{ObservePart, ObservedCpu};
use super::{Source, TaskKey};
use crate::exposition::metric::{availability, counter, gauge, histogram, label};
use crate::forensics::Capability;
use crate::forensics::verdict::human;
use crate::instruments::shape::Part;
use crate::series::SeriesCopy;
use crate::series::exemplars::{Captures, Exemplar, Exemplars, finish};
use crate::units::NS_PER_SEC;
use crate::units::Now;

const NS: f64 = NS_PER_SEC as f64;

/// The task latency histogram's name (with native buckets and exemplars
/// in the protobuf exposition).
pub const TASK_HISTOGRAM: &str = "latencyd_task_wakeup_latency_seconds";

fn task_labels(key: &TaskKey) -> Vec<prometheus::proto::LabelPair> {
    vec![
        label("container", &key.container),
        label("cpu", &key.cpu.to_string()),
        label("task", &key.task),
    ]
}

/// The observer's part (none: nothing to show).
fn of(part: &dyn Part) -> Option<&ObservePart> {
    part.as_any().downcast_ref()
}

/// Each family's builder over the part: empty when it is not this one.
fn over(part: &dyn Part, build: impl FnOnce(&ObservePart) -> Vec<Metric>) -> Vec<Metric> {
    of(part).map_or_else(Vec::new, build)
}

/// `latencyd_task_wakeup_latency_seconds`, one per task series.
pub(super) fn task_wakeup_latency_seconds(part: &dyn Part, _now: Now) -> Vec<Metric> {
    over(part, |o| {
        (o.tasks.iter())
            .map(|(key, v)| {
                histogram(
                    task_labels(key),
                    v.buckets.bounds_ns(),
                    v.buckets.cumulative().into_iter(),
                    v.lifetime.count,
                    v.lifetime.sum_ns,
                )
            })
            .collect()
    })
}

/// The task series as copies, to be built and encoded after the lock is
/// released (the protobuf exposition's native buckets).
pub(super) fn task_series(part: &dyn Part) -> Vec<SeriesCopy> {
    let Some(o) = of(part) else {
        return Vec::new();
    };
    (o.tasks.iter())
        .map(|(key, v)| SeriesCopy {
            key: task_key(key),
            buckets: v.buckets.clone(),
            count: v.lifetime.count,
            sum_ns: v.lifetime.sum_ns,
            native: v.native.clone(),
        })
        .collect()
}

fn task_key(key: &TaskKey) -> Vec<(String, String)> {
    vec![
        ("container".to_string(), key.container.clone()),
        ("cpu".to_string(), key.cpu.to_string()),
        ("task".to_string(), key.task.clone()),
    ]
}

/// Each task series' exemplars: forensics' captures of that task in this
/// run, and its window maximum.
pub(super) fn task_exemplars(part: &dyn Part, captures: &Captures) -> Exemplars {
    let Some(o) = of(part) else {
        return Exemplars::new();
    };
    (o.tasks.iter())
        .map(|(key, view)| {
            let mut list: Vec<Exemplar> = (captures.list.iter())
                .filter(|c| {
                    c.cpu == key.cpu
                        && c.task.as_ref().is_some_and(|(name, container)| {
                            *name == key.task && *container == key.container
                        })
                })
                .map(|c| c.exemplar.clone())
                .collect();
            list.extend(captures.window_exemplar(&view.window, key.cpu, &list));
            (task_key(key), finish(list))
        })
        .collect()
}

pub(super) fn task_wakeup_latency_window_max_seconds(part: &dyn Part, now: Now) -> Vec<Metric> {
    let now_ns = now.monotonic_ns;
    over(part, |o| {
        (o.tasks.iter())
            .filter_map(|(key, v)| {
                let max = v.window.max(now_ns)?;
                Some(gauge(task_labels(key), max as f64 / NS))
            })
            .collect()
    })
}

pub(super) fn task_wakeup_latency_max_seconds(part: &dyn Part, _now: Now) -> Vec<Metric> {
    over(part, |o| {
        (o.tasks.iter())
            .map(|(key, v)| gauge(task_labels(key), v.lifetime.max_ns as f64 / NS))
            .collect()
    })
}

pub(super) fn cpu_interference_seconds_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    over(part, |o| by_name(o, true))
}

pub(super) fn cpu_interference_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    over(part, |o| by_name(o, false))
}

/// The interference counters by CPU, source and name: time (`seconds`)
/// or count. SMIs have a count but no duration.
fn by_name(o: &ObservePart, seconds: bool) -> Vec<Metric> {
    (o.cpus.iter())
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

pub(super) fn cpu_interference_window_max_seconds(part: &dyn Part, now: Now) -> Vec<Metric> {
    let now_ns = now.monotonic_ns;
    over(part, |o| {
        (o.cpus.iter())
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
    })
}

/// Absent when the observer is off.
pub(super) fn observe_available(part: &dyn Part, _now: Now) -> Vec<Metric> {
    over(part, |o| {
        let status = o.status();
        availability(status.enabled, status.available)
    })
}

/// Absent while the observer does not trace.
pub(super) fn observe_read_errors_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    over(part, |o| {
        let status = o.status();
        if !status.available {
            return vec![];
        }
        vec![counter(vec![], status.read_errors as f64)]
    })
}

pub(super) fn observe_lost_events_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    per_cpu(part, |v| v.lost_events)
}

pub(super) fn observe_unseen_wakeups_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    per_cpu(part, |v| v.unseen_wakeups)
}

pub(super) fn observe_waiting_tasks(part: &dyn Part, _now: Now) -> Vec<Metric> {
    over(part, |o| {
        (o.cpus.iter())
            .map(|(cpu, view)| {
                let labels = vec![label("cpu", &cpu.to_string())];
                gauge(labels, view.waiting_tasks as f64)
            })
            .collect()
    })
}

pub(super) fn observe_waiting_let_go_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    per_cpu(part, |v| v.waiting_let_go)
}

fn per_cpu(part: &dyn Part, value: impl Fn(&ObservedCpu) -> u64) -> Vec<Metric> {
    over(part, |o| {
        (o.cpus.iter())
            .map(|(cpu, view)| counter(vec![label("cpu", &cpu.to_string())], value(view) as f64))
            .collect()
    })
}

/// The status page's lines on the observed CPUs: per CPU its worst task
/// in the window and what took the most time since start; or why the
/// observer does not run (nothing when it is off).
pub(super) fn page_lines(o: &ObservePart, now_ns: u64) -> Vec<String> {
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

/// `/api/v1/observe` at `now_ns`, from the part (none: not this one).
pub(super) fn api(part: &dyn Part, now_ns: u64) -> Box<RawValue> {
    let json = of(part).map(|o| observe_json(o, now_ns));
    serde_json::value::to_raw_value(&json).expect("the observer's JSON serializes")
}

pub fn observe_json(o: &ObservePart, now_ns: u64) -> ObserveJson {
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
        window_ns: o.window_ns(),
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
