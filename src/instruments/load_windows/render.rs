//! The scheduled load windows (`[load]`) as the `latencyd_load_*`
//! families, `/api/v1/status` and the status page show them.

use serde::Serialize;

use prometheus::proto::{Metric, MetricType};
use serde_json::value::RawValue;

use super::LoadPart;
use crate::calendar::format_rfc3339_ms;
use crate::exposition::Family;
use crate::exposition::metric::{counter, gauge, label};
use crate::instruments::shape::{PageLine, Part, PartBuild};
use crate::units::Now;

/// The scheduled load windows: configured or not, the window running,
/// the next one, what the generators achieved.
#[derive(Serialize)]
pub struct LoadBody {
    /// The profile, or null when `[load]` schedules nothing.
    profile: Option<&'static str>,
    cpus: String,
    every_ns: u64,
    at_ns: u64,
    duration_ns: u64,
    active: bool,
    /// The running window's end (RFC 3339), while one runs.
    until: Option<String>,
    next_start: Option<String>,
    windows_total: u64,
    failures: std::collections::BTreeMap<String, u64>,
    /// The running load's report so far, else the last window's.
    report: Option<crate::load::LoadJson>,
}

/// Its object of `/api/v1/status`.
pub(super) fn status(l: &LoadPart) -> Box<RawValue> {
    serde_json::value::to_raw_value(&LoadBody::of(l)).expect("the load's status serializes")
}

impl LoadBody {
    fn of(l: &LoadPart) -> LoadBody {
        let c = &l.config;
        let rfc = |t: std::time::SystemTime| {
            format_rfc3339_ms(
                t.duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            )
        };
        let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        LoadBody {
            profile: l.profile.map(crate::load::Profile::name),
            cpus: c.cpus.to_string(),
            every_ns: ns(c.schedule.every),
            at_ns: ns(c.schedule.at),
            duration_ns: ns(c.schedule.duration),
            active: l.active.is_some(),
            until: l.active.map(|w| rfc(w.end)),
            next_start: l.profile.and(l.next).map(|w| rfc(w.start)),
            windows_total: l.windows_total,
            failures: l.failures.clone(),
            report: l.report.as_ref().map(crate::load::LoadReport::json),
        }
    }
}

/// The `[load]` line: the window running and until when, or the next
/// one, and the generators' throughput (running or last window).
pub(super) fn page_line(l: &LoadPart) -> Option<PageLine> {
    let profile = l.profile?;
    let at = |t: std::time::SystemTime| {
        crate::calendar::format_rfc3339_ms(
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    };
    let mut line = match l.active {
        Some(w) => format!(
            "the {profile} load runs on CPUs {} until {}; the latencies below include it.",
            l.config.cpus,
            at(w.end)
        ),
        None => format!(
            "Load windows: {profile} on CPUs {}, next from {} to {}.",
            l.config.cpus,
            l.next.map_or_else(|| "-".to_string(), |w| at(w.start)),
            l.next.map_or_else(|| "-".to_string(), |w| at(w.end)),
        ),
    };
    if let Some(rates) = l.report.as_ref().and_then(|r| r.rates_line()) {
        let when = if l.active.is_some() {
            "So far"
        } else {
            "Last window"
        };
        line.push_str(&format!(" {when}: {rates}."));
    }
    let failures: u64 = l.failures.values().sum();
    if failures > 0 {
        line.push_str(&format!(
            " {failures} generator failure(s), see the log and latencyd_load_failures_total."
        ));
    }
    Some(PageLine {
        text: line,
        running: l.active.is_some().then_some("Under load"),
    })
}

/// The load's part, from what the family builders are given.
fn part(part: &dyn Part) -> Option<&LoadPart> {
    part.as_any().downcast_ref()
}

fn load_active(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(l) = part(p) else {
        return vec![];
    };
    l.profile
        .map(|p| {
            gauge(
                vec![label("profile", p.name())],
                f64::from(u8::from(l.active.is_some())),
            )
        })
        .into_iter()
        .collect()
}

fn load_window_end_timestamp_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(l) = part(p) else {
        return vec![];
    };
    l.profile
        .zip(l.active)
        .map(|(p, w)| gauge(vec![label("profile", p.name())], unix_seconds(w.end)))
        .into_iter()
        .collect()
}

fn load_next_window_start_timestamp_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(l) = part(p) else {
        return vec![];
    };
    l.profile
        .zip(l.next)
        .map(|(p, w)| gauge(vec![label("profile", p.name())], unix_seconds(w.start)))
        .into_iter()
        .collect()
}

fn load_windows_total(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(l) = part(p) else {
        return vec![];
    };
    l.profile
        .map(|p| counter(vec![label("profile", p.name())], l.windows_total as f64))
        .into_iter()
        .collect()
}

fn load_throughput(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(l) = part(p) else {
        return vec![];
    };
    l.report
        .iter()
        .flat_map(|r| {
            r.generators.iter().flat_map(move |g| {
                g.throughput.iter().map(move |t| {
                    gauge(
                        vec![
                            label("generator", &g.name),
                            label("profile", r.profile.name()),
                            label("unit", t.unit),
                            label("what", &t.what),
                        ],
                        t.rate(),
                    )
                })
            })
        })
        .collect()
}

fn load_failures_total(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(l) = part(p) else {
        return vec![];
    };
    l.profile
        .iter()
        .flat_map(|p| {
            l.failures.iter().map(move |(g, n)| {
                counter(
                    vec![label("generator", g), label("profile", p.name())],
                    *n as f64,
                )
            })
        })
        .collect()
}

/// The `latencyd_load_*` families, in the order served.
pub(super) const FAMILIES: &[Family<PartBuild>] = &[
    Family {
        name: "latencyd_load_active",
        help: "1 while a scheduled load window's generators run ([load]), else 0; exported when [load] names a profile.",
        kind: MetricType::GAUGE,
        labels: &["profile"],
        build: load_active,
    },
    Family {
        name: "latencyd_load_window_end_timestamp_seconds",
        help: "When the load window running now ends (Unix time); absent between windows.",
        kind: MetricType::GAUGE,
        labels: &["profile"],
        build: load_window_end_timestamp_seconds,
    },
    Family {
        name: "latencyd_load_next_window_start_timestamp_seconds",
        help: "When the next load window starts (Unix time).",
        kind: MetricType::GAUGE,
        labels: &["profile"],
        build: load_next_window_start_timestamp_seconds,
    },
    Family {
        name: "latencyd_load_windows_total",
        help: "Load windows whose load started.",
        kind: MetricType::COUNTER,
        labels: &["profile"],
        build: load_windows_total,
    },
    Family {
        name: "latencyd_load_throughput",
        help: "What a load generator achieved per second of its running time, in the window running now or else the last one: stress-ng's bogo-ops/s per stressor (its --metrics), hackbench's messages/s over its completed runs.",
        kind: MetricType::GAUGE,
        labels: &["profile", "generator", "what", "unit"],
        build: load_throughput,
    },
    Family {
        name: "latencyd_load_failures_total",
        help: "Load generators that could not start, exited before the window ended or had to be killed at its end (generator=\"load\": a window whose load could not start at all); logged with why.",
        kind: MetricType::COUNTER,
        labels: &["profile", "generator"],
        build: load_failures_total,
    },
];

/// A wall-clock time as Unix seconds.
fn unix_seconds(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
