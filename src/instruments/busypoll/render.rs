//! The busy-poll windows (`[busypoll]`) rendered: the
//! `latencyd_busypoll_*` families, the `busypoll` object of
//! `/api/v1/status` and the status page's line. Every family is absent
//! when `[busypoll]` is off.

use std::collections::BTreeMap;

use prometheus::proto::{LabelPair, Metric, MetricType};
use serde::Serialize;
use serde_json::value::RawValue;

use super::BusypollPart;
use super::unix_ns;
use crate::calendar::format_rfc3339_ms;
use crate::cpulist::format_cpu_list;
use crate::exposition::Family;
use crate::exposition::metric::{counter, gauge, histogram, label};
use crate::instruments::shape::{PageLine, Part, PartBuild};
use crate::units::Now;
use crate::units::{NS_PER_SEC, format_duration_ns};

const NS: f64 = NS_PER_SEC as f64;

/// The part, when `[busypoll]` is on.
fn on(part: &dyn Part) -> Option<&BusypollPart> {
    part.as_any()
        .downcast_ref::<BusypollPart>()
        .filter(|b| b.config.enabled)
}

fn cpu(cpu: usize) -> Vec<LabelPair> {
    vec![label("cpu", &cpu.to_string())]
}

fn gap_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(b) = on(p) else {
        return vec![];
    };
    (b.per_cpu.iter())
        .map(|(&c, g)| {
            let cumulative = g.counts.iter().scan(0, |sum, n| {
                *sum += n;
                Some(*sum)
            });
            histogram(cpu(c), &b.bounds_ns, cumulative, g.count, g.sum_ns)
        })
        .collect()
}

fn gap_max_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(last) = on(p).and_then(|b| b.last_window.as_ref()) else {
        return vec![];
    };
    (last.per_cpu.iter())
        .map(|(&c, w)| gauge(cpu(c), w.max_ns as f64 / NS))
        .collect()
}

fn gaps_over_threshold_total(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(b) = on(p) else {
        return vec![];
    };
    (b.per_cpu.iter())
        .map(|(&c, g)| counter(cpu(c), g.over_threshold as f64))
        .collect()
}

fn threshold_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    on(p)
        .map(|b| gauge(vec![], b.config.threshold_ns as f64 / NS))
        .into_iter()
        .collect()
}

fn active(p: &dyn Part, _now: Now) -> Vec<Metric> {
    on(p)
        .map(|b| gauge(vec![], f64::from(u8::from(b.active.is_some()))))
        .into_iter()
        .collect()
}

fn windows_total(p: &dyn Part, _now: Now) -> Vec<Metric> {
    on(p)
        .map(|b| counter(vec![], b.windows_total as f64))
        .into_iter()
        .collect()
}

/// Every reason, 0 until it happens, so that `increase()` sees the first.
fn windows_skipped_total(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(b) = on(p) else {
        return vec![];
    };
    let n = b.skipped.get("failed").copied().unwrap_or(0);
    vec![counter(vec![label("reason", "failed")], n as f64)]
}

fn next_window_start_timestamp_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    (on(p).and_then(|b| b.next))
        .map(|w| gauge(vec![], unix_ns(w.start) as f64 / NS))
        .into_iter()
        .collect()
}

/// The `latencyd_busypoll_*` families, in the order served.
pub(super) const FAMILIES: &[Family<PartBuild>] = &[
    Family {
        name: "latencyd_busypoll_gap_seconds",
        help: "Gaps a busy-polling thread saw on a CPU kept for polling workloads ([busypoll] windows, as oslat measures): time the OS took the CPU away between two reads of its counter, over every window. Buckets round up as for latencyd_wakeup_latency_seconds.",
        kind: MetricType::HISTOGRAM,
        labels: &["cpu"],
        build: gap_seconds,
    },
    Family {
        name: "latencyd_busypoll_gap_max_seconds",
        help: "The longest gap of the last [busypoll] window that ran, per CPU, exact to the counter's tick.",
        kind: MetricType::GAUGE,
        labels: &["cpu"],
        build: gap_max_seconds,
    },
    Family {
        name: "latencyd_busypoll_gaps_over_threshold_total",
        help: "Gaps at least busypoll.threshold long (latencyd_busypoll_threshold_seconds), per CPU, over every window.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: gaps_over_threshold_total,
    },
    Family {
        name: "latencyd_busypoll_threshold_seconds",
        help: "busypoll.threshold: the longest gap a polling workload tolerates (oslat's -T, cnf-tests' OSLAT_MAXIMUM_LATENCY); exported when [busypoll] is enabled.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: threshold_seconds,
    },
    Family {
        name: "latencyd_busypoll_active",
        help: "1 while a [busypoll] window's pollers spin their CPUs, else 0; exported when [busypoll] is enabled.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: active,
    },
    Family {
        name: "latencyd_busypoll_windows_total",
        help: "[busypoll] windows whose pollers ran to their end.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: windows_total,
    },
    Family {
        name: "latencyd_busypoll_windows_skipped_total",
        help: "[busypoll] windows that did not run, by reason: failed (a poller could not start: a CPU offline, its priority refused; the why is in /api/v1/status and the log).",
        kind: MetricType::COUNTER,
        labels: &["reason"],
        build: windows_skipped_total,
    },
    Family {
        name: "latencyd_busypoll_next_window_start_timestamp_seconds",
        help: "When the next [busypoll] window starts (Unix time).",
        kind: MetricType::GAUGE,
        labels: &[],
        build: next_window_start_timestamp_seconds,
    },
];

/// The `busypoll` object of `/api/v1/status`.
#[derive(Serialize)]
struct BusypollBody {
    enabled: bool,
    cpus: String,
    every_ns: u64,
    at_ns: u64,
    duration_ns: u64,
    /// `SCHED_FIFO` priority of the pollers (null: the normal policy).
    priority: Option<i32>,
    threshold_ns: u64,
    active: bool,
    /// The running window's end (RFC 3339), while one polls.
    until: Option<String>,
    next_start: Option<String>,
    windows_total: u64,
    skipped: BTreeMap<&'static str, u64>,
    last_skip: Option<String>,
    last_window: Option<WindowBody>,
}

#[derive(Serialize)]
struct WindowBody {
    start: String,
    end: String,
    counter: &'static str,
    cpus: BTreeMap<usize, super::WindowCpu>,
    moved_off: Vec<usize>,
}

impl Serialize for super::WindowCpu {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("WindowCpu", 5)?;
        s.serialize_field("gaps", &self.gaps)?;
        s.serialize_field("max_ns", &self.max_ns)?;
        s.serialize_field("p99_ns", &self.p99_ns)?;
        s.serialize_field("p9999_ns", &self.p9999_ns)?;
        s.serialize_field("over_threshold", &self.over_threshold)?;
        s.end()
    }
}

/// Its object of `/api/v1/status`.
pub(super) fn status(b: &BusypollPart) -> Box<RawValue> {
    let c = &b.config;
    let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let body = BusypollBody {
        enabled: c.enabled,
        cpus: format_cpu_list(&c.cpus),
        every_ns: ns(c.schedule.every),
        at_ns: ns(c.schedule.at),
        duration_ns: ns(c.schedule.duration),
        priority: c.priority,
        threshold_ns: c.threshold_ns,
        active: b.active.is_some(),
        until: b.active.map(|w| format_rfc3339_ms(unix_ns(w.end))),
        next_start: (b.next.filter(|_| c.enabled)).map(|w| format_rfc3339_ms(unix_ns(w.start))),
        windows_total: b.windows_total,
        skipped: b.skipped.clone(),
        last_skip: b.last_skip.clone(),
        last_window: b.last_window.as_ref().map(|w| WindowBody {
            start: format_rfc3339_ms(w.start_unix_ns),
            end: format_rfc3339_ms(w.end_unix_ns),
            counter: w.counter,
            cpus: w.per_cpu.clone(),
            moved_off: w.moved_off.clone(),
        }),
    };
    serde_json::value::to_raw_value(&body).expect("the busy-poll status serializes")
}

/// The `[busypoll]` line: the window polling now and until when, else
/// the last window's longest gap and the next one (None when off).
pub(super) fn page_line(b: &BusypollPart) -> Option<PageLine> {
    if !b.config.enabled {
        return None;
    }
    let cpus = format_cpu_list(&b.config.cpus);
    if let Some(w) = b.active {
        return Some(PageLine {
            text: format!(
                "latencyd polls CPUs {cpus} until {}, as a DPDK thread would.",
                format_rfc3339_ms(unix_ns(w.end))
            ),
            running: Some("Busy-poll window"),
        });
    }
    let last = b.last_window.as_ref().map_or_else(
        || "none has run yet".to_string(),
        |w| {
            let max = w.per_cpu.values().map(|c| c.max_ns).max().unwrap_or(0);
            let over: u64 = w.per_cpu.values().map(|c| c.over_threshold).sum();
            format!(
                "the last, to {}, saw a longest gap of {:.1} us ({over} at least {})",
                format_rfc3339_ms(w.end_unix_ns),
                max as f64 / 1_000.0,
                format_duration_ns(b.config.threshold_ns)
            )
        },
    );
    let next = b
        .next
        .map_or_else(|| "-".to_string(), |w| format_rfc3339_ms(unix_ns(w.start)));
    Some(PageLine {
        text: format!("Busy-poll windows on CPUs {cpus}: {last}; next from {next}."),
        running: None,
    })
}
