//! The hardware-noise windows (`[hwnoise]`) rendered: the
//! `latencyd_hwnoise_*` families, the `hwnoise` object of
//! `/api/v1/status` and the status page's line. Every family is absent
//! when `[hwnoise]` is off.

use std::collections::BTreeMap;

use prometheus::proto::{Metric, MetricType};
use serde::Serialize;
use serde_json::value::RawValue;

use super::{HwnoisePart, Outcome, Status};
use crate::calendar::format_rfc3339_ms;
use crate::cpulist::format_cpu_list;
use crate::exposition::Family;
use crate::exposition::metric::{counter, gauge, label};
use crate::instruments::shape::{PageLine, Part, PartBuild};
use crate::units::NS_PER_SEC;
use crate::units::Now;

/// The hwnoise part, from what the family builders are given.
fn part(part: &dyn Part) -> Option<&HwnoisePart> {
    part.as_any().downcast_ref()
}

/// The windows' status, when `[hwnoise]` is on.
fn on(s: &dyn Part) -> Option<Status> {
    let status = part(s)?.status();
    status.enabled.then_some(status)
}

fn cpu(cpu: usize) -> Vec<prometheus::proto::LabelPair> {
    vec![label("cpu", &cpu.to_string())]
}

fn active(s: &dyn Part, _now: Now) -> Vec<Metric> {
    on(s)
        .map(|st| gauge(vec![], f64::from(u8::from(st.active.is_some()))))
        .into_iter()
        .collect()
}

fn windows_total(s: &dyn Part, _now: Now) -> Vec<Metric> {
    on(s)
        .map(|st| counter(vec![], st.windows_total as f64))
        .into_iter()
        .collect()
}

/// Every reason, 0 until it happens, so that `increase()` sees the first.
fn windows_skipped_total(s: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(st) = on(s) else {
        return vec![];
    };
    ["busy", "unavailable", "failed"]
        .into_iter()
        .map(|reason| {
            let n = st.skipped.get(reason).copied().unwrap_or(0);
            counter(vec![label("reason", reason)], n as f64)
        })
        .collect()
}

fn next_window_start_timestamp_seconds(s: &dyn Part, _now: Now) -> Vec<Metric> {
    on(s)
        .and_then(|st| st.next_start_unix_ns)
        .map(|ns| gauge(vec![], ns as f64 / NS_PER_SEC as f64))
        .into_iter()
        .collect()
}

/// Per CPU of the windows, once one ran.
fn gap_max_seconds(s: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(st) = on(s).filter(|st| st.windows_total > 0 || st.active.is_some()) else {
        return vec![];
    };
    (st.cpus.iter())
        .map(|&c| {
            let us = st.per_cpu.get(&c).map_or(0, |t| t.window_max_us);
            gauge(cpu(c), us as f64 / 1e6)
        })
        .collect()
}

fn per_cpu(
    s: &dyn Part,
    value: impl Fn(&crate::instruments::hwnoise::CpuTotals) -> u64,
) -> Vec<Metric> {
    let Some(st) = on(s) else {
        return vec![];
    };
    (st.cpus.iter())
        .map(|&c| {
            let n = st.per_cpu.get(&c).map_or(0, &value);
            counter(cpu(c), n as f64)
        })
        .collect()
}

fn samples_total(s: &dyn Part, _now: Now) -> Vec<Metric> {
    per_cpu(s, |t| t.samples)
}

fn nmis_total(s: &dyn Part, _now: Now) -> Vec<Metric> {
    per_cpu(s, |t| t.nmis)
}

fn smis_total(s: &dyn Part, _now: Now) -> Vec<Metric> {
    on(s)
        .and_then(|st| st.smis_total)
        .map(|n| counter(vec![], n as f64))
        .into_iter()
        .collect()
}

fn kept_apart_total(s: &dyn Part, _now: Now) -> Vec<Metric> {
    if on(s).is_none() {
        return vec![];
    }
    let mut out = Vec::new();
    let Some(h) = part(s) else {
        return vec![];
    };
    for (&c, k) in &h.kept_apart {
        for (source, n) in [("sampler", k.wakeups), ("timerlat", k.timerlat_periods)] {
            let labels = vec![label("cpu", &c.to_string()), label("source", source)];
            out.push(counter(labels, n as f64));
        }
    }
    out
}

/// A window as `/api/v1/status` shows it.
#[derive(Serialize)]
pub struct WindowBody {
    start: String,
    end: String,
    cpus: String,
    /// `ran`, or `skipped`.
    outcome: &'static str,
    /// Why it was skipped: busy, unavailable or failed, and the words.
    reason: Option<String>,
    why: Option<String>,
    samples: u64,
    max_gap_ns: u64,
    nmis: u64,
    /// null: SMIs could not be counted.
    smis: Option<u64>,
}

/// What one CPU measured while a window spun it.
#[derive(Serialize)]
pub struct KeptApartBody {
    /// Sampler wake-ups, and the largest of their latencies.
    wakeups: u64,
    max_ns: u64,
    timerlat_periods: u64,
}

/// The `hwnoise` object of `/api/v1/status`.
#[derive(Serialize)]
pub struct HwnoiseBody {
    enabled: bool,
    cpus: String,
    threshold_ns: u64,
    width_ns: u64,
    window_ns: u64,
    /// A window spins its CPUs now.
    active: bool,
    next_start: Option<String>,
    windows_total: u64,
    skipped: BTreeMap<&'static str, u64>,
    last_window: Option<WindowBody>,
    /// Why SMIs are not counted (null when they are, or before a window).
    smis_unread: Option<String>,
    /// Per CPU: what was measured while a window spun it, kept apart.
    kept_apart: BTreeMap<usize, KeptApartBody>,
    /// Why no window runs at all though enabled (null while they do).
    stopped: Option<String>,
}

/// The `latencyd_hwnoise_*` families, in the order served.
pub(super) const FAMILIES: &[Family<PartBuild>] = &[
    Family {
        name: "latencyd_hwnoise_active",
        help: "1 while a [hwnoise] window's hwlat tracer spins its CPUs with interrupts off, else 0; exported when [hwnoise] is enabled. The samplers' and timerlat's wake-ups on those CPUs meanwhile are kept out of their families (latencyd_hwnoise_kept_apart_total).",
        kind: MetricType::GAUGE,
        labels: &[],
        build: active,
    },
    Family {
        name: "latencyd_hwnoise_windows_total",
        help: "[hwnoise] windows whose hwlat tracer ran.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: windows_total,
    },
    Family {
        name: "latencyd_hwnoise_windows_skipped_total",
        help: "[hwnoise] windows that did not run, by reason: busy (another program runs hwlat; latencyd never takes it), unavailable (no tracefs, or a kernel without hwlat), failed (a setting the kernel refused); logged with why.",
        kind: MetricType::COUNTER,
        labels: &["reason"],
        build: windows_skipped_total,
    },
    Family {
        name: "latencyd_hwnoise_next_window_start_timestamp_seconds",
        help: "When the next [hwnoise] window starts (Unix time).",
        kind: MetricType::GAUGE,
        labels: &[],
        build: next_window_start_timestamp_seconds,
    },
    Family {
        name: "latencyd_hwnoise_gap_max_seconds",
        help: "The largest gap hwlat saw on a CPU (time the hardware, firmware or hypervisor took with interrupts off) in the running [hwnoise] window, else in the last one that ran; 0 when none passed the threshold.",
        kind: MetricType::GAUGE,
        labels: &["cpu"],
        build: gap_max_seconds,
    },
    Family {
        name: "latencyd_hwnoise_samples_total",
        help: "hwlat samples with a gap over hwnoise.threshold, per CPU, over all windows.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: samples_total,
    },
    Family {
        name: "latencyd_hwnoise_nmis_total",
        help: "NMIs the hwlat tracer counted inside its samples, per CPU.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: nmis_total,
    },
    Family {
        name: "latencyd_hwnoise_smis_total",
        help: "SMIs on the windows' CPUs during [hwnoise] windows, from MSR 0x34 (Intel); absent where it cannot be read (/api/v1/status says why).",
        kind: MetricType::COUNTER,
        labels: &[],
        build: smis_total,
    },
    Family {
        name: "latencyd_hwnoise_kept_apart_total",
        help: "What was measured on a CPU while a [hwnoise] window spun it, kept out of the latency families and filed apart in the record: source=sampler counts wake-ups, source=timerlat periods.",
        kind: MetricType::COUNTER,
        labels: &["cpu", "source"],
        build: kept_apart_total,
    },
];

/// Its object of `/api/v1/status`.
pub(super) fn status(h: &HwnoisePart) -> Box<RawValue> {
    serde_json::value::to_raw_value(&HwnoiseBody::of(h)).expect("the hwnoise status serializes")
}

impl HwnoiseBody {
    fn of(h: &HwnoisePart) -> HwnoiseBody {
        let st = h.status();
        let last_window = st.last_window.as_ref().map(|w| {
            let (reason, why) = match &w.outcome {
                Outcome::Ran => (None, None),
                Outcome::Skipped(kind, why) => (Some(kind.name().to_string()), Some(why.clone())),
            };
            WindowBody {
                start: format_rfc3339_ms(w.start_unix_ns),
                end: format_rfc3339_ms(w.end_unix_ns),
                cpus: format_cpu_list(&w.cpus),
                outcome: if reason.is_some() { "skipped" } else { "ran" },
                reason,
                why,
                samples: w.samples(),
                max_gap_ns: w.max_us() * 1_000,
                nmis: w.nmis(),
                smis: w.smis,
            }
        });
        HwnoiseBody {
            enabled: st.enabled,
            cpus: format_cpu_list(&st.cpus),
            threshold_ns: st.threshold_us * 1_000,
            width_ns: st.width_us * 1_000,
            window_ns: st.window_us * 1_000,
            active: st.active.is_some(),
            next_start: st.next_start_unix_ns.map(format_rfc3339_ms),
            windows_total: st.windows_total,
            skipped: st.skipped.clone(),
            last_window,
            smis_unread: st.smis_unread.clone(),
            kept_apart: (h.kept_apart.iter())
                .map(|(&c, k)| {
                    let body = KeptApartBody {
                        wakeups: k.wakeups,
                        max_ns: k.max_ns,
                        timerlat_periods: k.timerlat_periods,
                    };
                    (c, body)
                })
                .collect(),
            stopped: st.stopped.clone(),
        }
    }
}

/// The `[hwnoise]` line: the window spinning now and until when, else
/// the last window's result and the next one (None when off).
pub(super) fn page_line(h: &HwnoisePart) -> Option<PageLine> {
    let st = h.status();
    if !st.enabled {
        return None;
    }
    if let Some(why) = &st.stopped {
        return Some(line(
            format!("Hardware noise windows are enabled but none runs: {why}."),
            false,
        ));
    }
    if let Some(active) = &st.active {
        return Some(line(
            format!(
                "hwlat spins CPUs {} with interrupts off until {}; their wake-ups meanwhile \
                 are kept out of the figures below.",
                format_cpu_list(&active.cpus),
                format_rfc3339_ms(active.end_unix_ns)
            ),
            true,
        ));
    }
    let last = st.last_window.as_ref().map_or_else(
        || "none has run yet".to_string(),
        |w| match &w.outcome {
            Outcome::Ran => format!(
                "the last, to {}, saw a largest gap of {} us",
                format_rfc3339_ms(w.end_unix_ns),
                w.max_us()
            ),
            Outcome::Skipped(kind, why) => format!("the last was skipped ({}: {why})", kind.name()),
        },
    );
    Some(line(
        format!(
            "Hardware noise windows on CPUs {}: {last}; next from {}.",
            format_cpu_list(&st.cpus),
            st.next_start_unix_ns
                .map_or_else(|| "-".to_string(), format_rfc3339_ms)
        ),
        false,
    ))
}

fn line(text: String, running: bool) -> PageLine {
    PageLine {
        text,
        running: running.then_some("Hardware noise window"),
    }
}
