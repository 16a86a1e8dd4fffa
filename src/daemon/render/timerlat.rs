//! What the kernel's timerlat measured (`[timerlat]`), rendered: the
//! `latencyd_timerlat_*` metric families, `/api/v1/timerlat`'s JSON (its
//! DTOs are here, with the renderer that fills them) and the status
//! page's lines.

use prometheus::proto::Metric;
use serde::Serialize;

use super::families::Scrape;
use super::metric::{availability, counter, gauge, histogram, label};
use super::series::SeriesCopy;
use crate::daemon::state::MonitorState;
use crate::forensics::verdict::human;
use crate::instruments::event::Context;
use crate::instruments::timerlat::describe_users;
use crate::tracefs::Capability;
use crate::units::NS_PER_SEC;

const NS: f64 = NS_PER_SEC as f64;

/// The timerlat histogram's name (with native buckets in the protobuf
/// exposition).
pub const TIMERLAT_HISTOGRAM: &str = "latencyd_timerlat_latency_seconds";

fn labels(cpu: usize, context: Context) -> Vec<prometheus::proto::LabelPair> {
    vec![
        label("context", context.name()),
        label("cpu", &cpu.to_string()),
    ]
}

/// `latencyd_timerlat_latency_seconds`, one per CPU and context.
pub fn timerlat_histograms(state: &MonitorState) -> Vec<Metric> {
    (state.timerlat.series.iter())
        .map(|(&(cpu, context), v)| {
            histogram(
                labels(cpu, context),
                &v.buckets,
                v.lifetime.count,
                v.lifetime.sum_ns,
            )
        })
        .collect()
}

/// The series of `timerlat_histograms` as copies, to be built and
/// encoded after the lock is released.
pub fn timerlat_series(state: &MonitorState) -> Vec<SeriesCopy> {
    (state.timerlat.series.iter())
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

pub fn timerlat_latency_seconds(s: &Scrape) -> Vec<Metric> {
    timerlat_histograms(s.state)
}

pub fn timerlat_latency_max_seconds(s: &Scrape) -> Vec<Metric> {
    (s.state.timerlat.series.iter())
        .map(|(&(cpu, c), v)| gauge(labels(cpu, c), v.lifetime.max_ns as f64 / NS))
        .collect()
}

pub fn timerlat_latency_window_max_seconds(s: &Scrape) -> Vec<Metric> {
    (s.state.timerlat.series.iter())
        .filter_map(|(&(cpu, c), v)| {
            let max = v.window.max(s.now.monotonic_ns)?;
            Some(gauge(labels(cpu, c), max as f64 / NS))
        })
        .collect()
}

pub fn timerlat_periods_total(s: &Scrape) -> Vec<Metric> {
    let t = &s.state.timerlat;
    (t.seqnums.keys())
        .map(|&cpu| counter(vec![label("cpu", &cpu.to_string())], t.periods(cpu) as f64))
        .collect()
}

/// Absent when timerlat is off.
pub fn timerlat_available(s: &Scrape) -> Vec<Metric> {
    let status = s.state.timerlat.status();
    availability(status.enabled, status.available)
}

/// One series per other user of timerlat or osnoise, while it runs.
pub fn timerlat_neighbour_info(s: &Scrape) -> Vec<Metric> {
    (s.state.timerlat.status().neighbours.iter())
        .map(|(instance, tracer)| {
            gauge(
                vec![label("instance", instance), label("tracer", tracer)],
                1.0,
            )
        })
        .collect()
}

/// Absent while timerlat does not run.
pub fn timerlat_disturbances_total(s: &Scrape) -> Vec<Metric> {
    let status = s.state.timerlat.status();
    if !status.available {
        return vec![];
    }
    vec![counter(vec![], status.disturbances as f64)]
}

/// Absent while timerlat does not run.
pub fn timerlat_lost_pages_total(s: &Scrape) -> Vec<Metric> {
    let status = s.state.timerlat.status();
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
pub fn page_lines(state: &MonitorState, now_ns: u64) -> Vec<String> {
    let t = &state.timerlat;
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

pub fn timerlat_json(state: &MonitorState, now_ns: u64) -> TimerlatJson {
    let t = &state.timerlat;
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
        window_ns: state.config.export.max_window_ns,
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
