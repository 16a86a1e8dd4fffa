//! The scheduled load windows (`[load]`) as the `latencyd_load_*`
//! families, `/api/v1/status` and the status page show them.

use serde::Serialize;

use prometheus::proto::Metric;

use super::families::Scrape;
use super::metric::{counter, gauge, label};
use crate::calendar::format_rfc3339_ms;
use crate::daemon::state::MonitorState;

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

impl LoadBody {
    pub(super) fn of(s: &MonitorState) -> LoadBody {
        let l = &s.load;
        let c = &s.config.load;
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
pub(super) fn page_line(s: &MonitorState) -> Option<(String, bool)> {
    let l = &s.load;
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
            s.config.load.cpus,
            at(w.end)
        ),
        None => format!(
            "Load windows: {profile} on CPUs {}, next from {} to {}.",
            s.config.load.cpus,
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
    Some((line, l.active.is_some()))
}

pub fn load_active(s: &Scrape) -> Vec<Metric> {
    s.state
        .load
        .profile
        .map(|p| {
            gauge(
                vec![label("profile", p.name())],
                f64::from(u8::from(s.state.load.active.is_some())),
            )
        })
        .into_iter()
        .collect()
}

pub fn load_window_end_timestamp_seconds(s: &Scrape) -> Vec<Metric> {
    s.state
        .load
        .profile
        .zip(s.state.load.active)
        .map(|(p, w)| gauge(vec![label("profile", p.name())], unix_seconds(w.end)))
        .into_iter()
        .collect()
}

pub fn load_next_window_start_timestamp_seconds(s: &Scrape) -> Vec<Metric> {
    s.state
        .load
        .profile
        .zip(s.state.load.next)
        .map(|(p, w)| gauge(vec![label("profile", p.name())], unix_seconds(w.start)))
        .into_iter()
        .collect()
}

pub fn load_windows_total(s: &Scrape) -> Vec<Metric> {
    s.state
        .load
        .profile
        .map(|p| {
            counter(
                vec![label("profile", p.name())],
                s.state.load.windows_total as f64,
            )
        })
        .into_iter()
        .collect()
}

pub fn load_throughput(s: &Scrape) -> Vec<Metric> {
    s.state
        .load
        .report
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

pub fn load_failures_total(s: &Scrape) -> Vec<Metric> {
    s.state
        .load
        .profile
        .iter()
        .flat_map(|p| {
            s.state.load.failures.iter().map(move |(g, n)| {
                counter(
                    vec![label("generator", g), label("profile", p.name())],
                    *n as f64,
                )
            })
        })
        .collect()
}

/// A wall-clock time as Unix seconds.
fn unix_seconds(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
