//! What the kernel's timerlat measured (`[timerlat]`), rendered from its
//! part: the `latencyd_timerlat_*` metric families, its object in
//! `/api/v1/status`, `/api/v1/timerlat`'s JSON (its DTOs are here, with
//! the renderer that fills them) and the status page's lines.

use prometheus::proto::{Metric, MetricType};
use serde::Serialize;
use serde_json::value::RawValue;

use super::TimerlatPart;
use super::tracer::describe_users;
use crate::exposition::Family;
use crate::exposition::metric::{availability, counter, gauge, histogram, label};
use crate::forensics::verdict::human;
use crate::instruments::event::Context;
use crate::instruments::shape::{Part, PartBuild};
use crate::series::SeriesCopy;
use crate::tracefs::Capability;
use crate::units::NS_PER_SEC;
use crate::units::Now;

const NS: f64 = NS_PER_SEC as f64;

/// The timerlat histogram's name (with native buckets in the protobuf
/// exposition).
pub const TIMERLAT_HISTOGRAM: &str = "latencyd_timerlat_latency_seconds";

/// Its families, in the order `/metrics` serves them.
pub(super) const FAMILIES: &[Family<PartBuild>] = &[
    Family {
        name: TIMERLAT_HISTOGRAM,
        help: "The kernel's timerlat tracer ([timerlat]) per CPU and context: irq, how late the timer's interrupt handler ran; thread, how late the thread it woke ran; user, how late that thread, a user-space one, came back for its next period (kernels with timerlat_fd). Buckets round up as for latencyd_wakeup_latency_seconds.",
        kind: MetricType::HISTOGRAM,
        labels: &["context", "cpu"],
        build: latency_seconds,
    },
    Family {
        name: "latencyd_timerlat_latency_max_seconds",
        help: "Exact maximum timerlat latency per CPU and context since the daemon started.",
        kind: MetricType::GAUGE,
        labels: &["context", "cpu"],
        build: latency_max_seconds,
    },
    Family {
        name: "latencyd_timerlat_latency_window_max_seconds",
        help: "Exact maximum timerlat latency per CPU and context in the trailing window (export.max_window), filed by when the kernel took it. Absent while the window holds none.",
        kind: MetricType::GAUGE,
        labels: &["context", "cpu"],
        build: latency_window_max_seconds,
    },
    Family {
        name: "latencyd_timerlat_periods_total",
        help: "Timer periods the kernel's timerlat ran on a CPU while latencyd read it (by its period numbers): the IRQ and thread counts of latencyd_timerlat_latency_seconds should equal it; fewer means lost events.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: periods_total,
    },
    Family {
        name: "latencyd_timerlat_available",
        help: "1 when [timerlat] is enabled and the tracer runs, 0 when enabled but unavailable (no tracer in this kernel, no tracefs, another program running timerlat or osnoise at start; the reason is in /api/v1/timerlat); absent when disabled.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: available,
    },
    Family {
        name: "latencyd_timerlat_neighbour_info",
        help: "1 for each other program running timerlat or osnoise beside latencyd's timerlat, by tracefs instance (top: the top-level buffer; rtla names its instance after its tool) and tracer: they share the host-wide osnoise/ settings. Logged at warn when one appears.",
        kind: MetricType::GAUGE,
        labels: &["instance", "tracer"],
        build: neighbour_info,
    },
    Family {
        name: "latencyd_timerlat_disturbances_total",
        help: "Times another program started timerlat or osnoise beside latencyd's, or changed an osnoise/ setting latencyd set; each is logged at warn and latencyd does not set it back. Absent unless timerlat runs.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: disturbances_total,
    },
    Family {
        name: "latencyd_timerlat_lost_pages_total",
        help: "Ring-buffer pages of timerlat that the kernel flagged with events lost before them, and reads that failed: samples missing from latencyd_timerlat_latency_seconds. Absent unless timerlat runs.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: lost_pages_total,
    },
];

/// The part of a family's builder (always timerlat's, by the registry).
fn part(part: &dyn Part) -> Option<&TimerlatPart> {
    part.as_any().downcast_ref()
}

fn labels(cpu: usize, context: Context) -> Vec<prometheus::proto::LabelPair> {
    vec![
        label("context", context.name()),
        label("cpu", &cpu.to_string()),
    ]
}

fn latency_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(t) = part(p) else { return vec![] };
    (t.series.iter())
        .map(|(&(cpu, context), v)| {
            histogram(
                labels(cpu, context),
                v.buckets.bounds_ns(),
                v.buckets.cumulative().into_iter(),
                v.lifetime.count,
                v.lifetime.sum_ns,
            )
        })
        .collect()
}

/// The series of `latencyd_timerlat_latency_seconds` as copies, to be
/// built and encoded after the lock is released.
pub(super) fn series(p: &dyn Part) -> Vec<SeriesCopy> {
    let Some(t) = part(p) else { return vec![] };
    (t.series.iter())
        .map(|(&(cpu, context), v)| SeriesCopy {
            key: vec![
                ("context".to_string(), context.name().to_string()),
                ("cpu".to_string(), cpu.to_string()),
            ],
            buckets: v.buckets.clone(),
            count: v.lifetime.count,
            sum_ns: v.lifetime.sum_ns,
            native: v.native.clone(),
        })
        .collect()
}

fn latency_max_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(t) = part(p) else { return vec![] };
    (t.series.iter())
        .map(|(&(cpu, c), v)| gauge(labels(cpu, c), v.lifetime.max_ns as f64 / NS))
        .collect()
}

fn latency_window_max_seconds(p: &dyn Part, now: Now) -> Vec<Metric> {
    let now_ns = now.monotonic_ns;
    let Some(t) = part(p) else { return vec![] };
    (t.series.iter())
        .filter_map(|(&(cpu, c), v)| {
            let max = v.window.max(now_ns)?;
            Some(gauge(labels(cpu, c), max as f64 / NS))
        })
        .collect()
}

fn periods_total(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(t) = part(p) else { return vec![] };
    (t.seqnums.keys())
        .map(|&cpu| counter(vec![label("cpu", &cpu.to_string())], t.periods(cpu) as f64))
        .collect()
}

/// Absent when timerlat is off.
fn available(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(t) = part(p) else { return vec![] };
    let status = t.status();
    availability(status.enabled, status.available)
}

/// One series per other user of timerlat or osnoise, while it runs.
fn neighbour_info(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(t) = part(p) else { return vec![] };
    (t.status().neighbours.iter())
        .map(|(instance, tracer)| {
            gauge(
                vec![label("instance", instance), label("tracer", tracer)],
                1.0,
            )
        })
        .collect()
}

/// Absent while timerlat does not run.
fn disturbances_total(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(t) = part(p) else { return vec![] };
    let status = t.status();
    if !status.available {
        return vec![];
    }
    vec![counter(vec![], status.disturbances as f64)]
}

/// Absent while timerlat does not run.
fn lost_pages_total(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(t) = part(p) else { return vec![] };
    let status = t.status();
    if !status.available {
        return vec![];
    }
    vec![counter(
        vec![],
        (status.lost_pages + status.read_errors) as f64,
    )]
}

/// The status page's lines: per CPU the worst IRQ and thread latency in
/// the window, and who shares the tracer; or why timerlat does not run
/// (nothing when it is off).
pub(super) fn page_lines(t: &TimerlatPart, now_ns: u64) -> Vec<String> {
    let status = t.status();
    if !status.enabled {
        return vec![];
    }
    if !status.available {
        return vec![format!(
            "timerlat is enabled but unavailable: {} (/api/v1/timerlat)",
            status.reason.as_deref().unwrap_or("unknown reason")
        )];
    }
    let mut lines: Vec<String> = (status.cpus.iter())
        .map(|&cpu| {
            let parts: Vec<String> = Context::ALL
                .into_iter()
                .filter_map(|c| {
                    let max = t.series.get(&(cpu, c))?.window.max(now_ns)?;
                    Some(format!("{} {}", c.name(), human(max)))
                })
                .collect();
            let parts = if parts.is_empty() {
                "no period in the window".to_string()
            } else {
                parts.join(", ")
            };
            format!("timerlat, CPU {cpu}: worst in the window {parts} (/api/v1/timerlat)")
        })
        .collect();
    if !status.neighbours.is_empty() {
        lines.push(format!(
            "timerlat is shared with {}: its host-wide settings may change under latencyd",
            describe_users(&status.neighbours)
        ));
    }
    lines
}

/// Why a live plot of timerlat has nothing to draw: it is off, or cannot
/// run here (the record's timerlat entries stay plottable).
pub(super) fn unplotted(t: &TimerlatPart) -> Option<String> {
    let status = t.status();
    if !status.enabled {
        return Some(
            "timerlat is off, so there is nothing of it to plot: set [timerlat] enabled = true \
             on a kernel with the timerlat tracer (docs/timerlat.md), or plot the record's \
             with from="
                .to_string(),
        );
    }
    (!status.available).then(|| {
        format!(
            "timerlat does not run here: {} (/api/v1/timerlat)",
            status.reason.as_deref().unwrap_or("unknown reason")
        )
    })
}

/// `/api/v1/timerlat`.
#[derive(Debug, Serialize)]
pub struct TimerlatJson {
    pub enabled: bool,
    pub available: bool,
    pub reason: Option<String>,
    pub period_us: u64,
    pub user_threads: bool,
    pub instance: Option<String>,
    pub window_ns: u64,
    pub capabilities: Vec<Capability>,
    /// Others running timerlat or osnoise now.
    pub neighbours: Vec<NeighbourJson>,
    /// `osnoise/` settings another program changed under latencyd.
    pub retuned: Vec<String>,
    /// What latencyd changed in `osnoise/` (set back when it stops).
    pub changed: Vec<String>,
    pub disturbances: u64,
    pub lost_pages: u64,
    pub read_errors: u64,
    pub last_error: Option<String>,
    pub cpus: Vec<TimerlatCpuJson>,
}

#[derive(Debug, Serialize)]
pub struct NeighbourJson {
    /// The tracefs instance (`top`: the top-level buffer).
    pub instance: String,
    pub tracer: String,
}

#[derive(Debug, Serialize)]
pub struct TimerlatCpuJson {
    pub cpu: usize,
    pub periods: u64,
    /// By context: `irq`, `thread`, `user`.
    pub contexts: std::collections::BTreeMap<&'static str, ContextJson>,
}

#[derive(Debug, Serialize)]
pub struct ContextJson {
    pub count: u64,
    pub min_ns: u64,
    pub avg_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub window_max_ns: Option<u64>,
    /// Latencies later than measure.spike_threshold.
    pub spikes: u64,
}

/// `/api/v1/timerlat` of its part at `now_ns`.
pub(super) fn api(p: &dyn Part, now_ns: u64) -> Box<RawValue> {
    let body = part(p).map(|t| timerlat_json(t, now_ns));
    serde_json::value::to_raw_value(&body).expect("timerlat's JSON serializes")
}

pub fn timerlat_json(t: &TimerlatPart, now_ns: u64) -> TimerlatJson {
    let status = t.status();
    let cpus = (status.cpus.iter())
        .map(|&cpu| TimerlatCpuJson {
            cpu,
            periods: t.periods(cpu),
            contexts: (Context::ALL.into_iter())
                .filter_map(|c| {
                    let v = t.series.get(&(cpu, c))?;
                    Some((
                        c.name(),
                        ContextJson {
                            count: v.lifetime.count,
                            min_ns: v.lifetime.min_ns(),
                            avg_ns: v.lifetime.avg_ns().round() as u64,
                            p99_ns: v.lifetime.quantile_ns(990_000),
                            max_ns: v.lifetime.max_ns,
                            window_max_ns: v.window.max(now_ns),
                            spikes: v.lifetime.spikes,
                        },
                    ))
                })
                .collect(),
        })
        .collect();
    TimerlatJson {
        enabled: status.enabled,
        available: status.available,
        reason: status.reason,
        period_us: status.period_us,
        user_threads: status.user_threads,
        instance: status.instance,
        window_ns: t.window_ns,
        capabilities: status.capabilities,
        neighbours: (status.neighbours.into_iter())
            .map(|(instance, tracer)| NeighbourJson { instance, tracer })
            .collect(),
        retuned: status.retuned,
        changed: status.changed,
        disturbances: status.disturbances,
        lost_pages: status.lost_pages,
        read_errors: status.read_errors,
        last_error: status.last_error,
        cpus,
    }
}

/// Its object in `/api/v1/status`: whether timerlat runs, why not, and
/// who shares it (`/api/v1/timerlat` has the rest).
#[derive(Serialize)]
struct StatusJson {
    enabled: bool,
    available: bool,
    reason: Option<String>,
    /// Others running timerlat or osnoise now, by name:
    /// "instance timerlat_hist (timerlat)".
    neighbours: Vec<String>,
}

pub(super) fn status(t: &TimerlatPart) -> Box<RawValue> {
    let status = t.status();
    let body = StatusJson {
        enabled: status.enabled,
        available: status.available,
        reason: status.reason,
        neighbours: (status.neighbours.iter())
            .map(|user| describe_users(std::slice::from_ref(user)))
            .collect(),
    };
    serde_json::value::to_raw_value(&body).expect("timerlat's status serializes")
}
