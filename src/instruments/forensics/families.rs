//! Forensics' metric families, each built from its part's journal.

use std::collections::BTreeMap;

use prometheus::proto::{LabelPair, Metric, MetricType};

use crate::exposition::Family;
use crate::exposition::metric::{counter, gauge, label};
use crate::forensics::{JournalData, Summary};
use crate::instruments::shape::{Part, PartBuild};
use crate::units::{NS_PER_SEC, Now};

use super::ForensicsPart;

/// How far back `latencyd_forensics_worst_capture_info` looks for the
/// worst capture: the alerts' 5-minute range and their 10 minutes of
/// `keep_firing_for`, so that a firing alert links to the capture of the
/// wake-up it pages on.
const WORST_CAPTURE_HORIZON_NS: u64 = 15 * 60 * NS_PER_SEC;

/// Its families, in the order `/metrics` serves them.
pub(super) const FAMILIES: &[Family<PartBuild>] = &[
    Family {
        name: "latencyd_forensics_available",
        help: "1 while spike forensics captures (forensics.enabled and the kernel lets it), else 0; /api/v1/status says why not.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: forensics_available,
    },
    Family {
        name: "latencyd_forensics_captures_total",
        help: "Spike captures by CPU and main cause (task, irq, softirq, nmi, steal, sampler, unaccounted); a series appears with its first capture.",
        kind: MetricType::COUNTER,
        labels: &["cpu", "cause"],
        build: forensics_captures_total,
    },
    Family {
        name: "latencyd_forensics_latest_capture_info",
        help: "1 for the newest capture kept of each CPU, its id in the capture label: the page /spikes/{capture} shows it (the alerts' annotations link there). A series appears with the CPU's first capture and changes with each new one.",
        kind: MetricType::GAUGE,
        labels: &["cpu", "capture"],
        build: forensics_latest_capture_info,
    },
    Family {
        name: "latencyd_forensics_worst_capture_info",
        help: "1 for the capture of each CPU's largest latency among its captures of the last 15 minutes (the alerts' 5-minute range and 10 minutes of keep_firing_for), else its newest; its id in the capture label. The alerts' capture_url links to /spikes/{capture}, the capture of the wake-up they page on.",
        kind: MetricType::GAUGE,
        labels: &["cpu", "capture"],
        build: forensics_worst_capture_info,
    },
    Family {
        name: "latencyd_forensics_escalated_captures_total",
        help: "Captures made past the rate limits (forensics.per_cpu_interval, forensics.max_per_minute) because the wake-up was at least 1.5 times as late as every capture of its CPU within forensics.per_cpu_interval: the worst spike always gets its capture. Also counted in latencyd_forensics_captures_total.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: forensics_escalated_captures_total,
    },
    Family {
        name: "latencyd_forensics_spikes_uncaptured_total",
        help: "Wake-ups over forensics.threshold not captured, by CPU and reason: rate_limited (forensics.per_cpu_interval, forensics.max_per_minute), busy (the recorder's queue was full), failed (reading the trace or writing the capture failed; /api/v1/status says why).",
        kind: MetricType::COUNTER,
        labels: &["cpu", "reason"],
        build: forensics_spikes_uncaptured_total,
    },
    Family {
        name: "latencyd_smi_total",
        help: "System management interrupts on the CPU since boot (Intel MSR 0x34), where forensics runs and the MSR can be read.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: smi_total,
    },
];

/// The part's journal, read under its lock (none: nothing to show).
fn with_journal(part: &dyn Part, build: impl FnOnce(&JournalData) -> Vec<Metric>) -> Vec<Metric> {
    match part.as_any().downcast_ref::<ForensicsPart>() {
        Some(p) => build(&p.journal.lock()),
        None => Vec::new(),
    }
}

fn cpu_label(cpu: usize) -> Vec<LabelPair> {
    vec![label("cpu", &cpu.to_string())]
}

/// One counter per CPU.
fn per_cpu(counts: &BTreeMap<usize, u64>) -> Vec<Metric> {
    (counts.iter())
        .map(|(c, n)| counter(cpu_label(*c), *n as f64))
        .collect()
}

/// A capture's info series: 1, its id and CPU as labels.
fn capture_info(s: &Summary) -> Metric {
    let labels = vec![label("capture", &s.id), label("cpu", &s.cpu.to_string())];
    gauge(labels, 1.0)
}

fn forensics_available(part: &dyn Part, _now: Now) -> Vec<Metric> {
    with_journal(part, |f| {
        vec![gauge(vec![], f64::from(u8::from(f.available)))]
    })
}

fn forensics_captures_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    with_journal(part, |f| {
        (f.captured.iter())
            .map(|((c, cause), n)| {
                let labels = vec![label("cause", cause), label("cpu", &c.to_string())];
                counter(labels, *n as f64)
            })
            .collect()
    })
}

fn forensics_latest_capture_info(part: &dyn Part, _now: Now) -> Vec<Metric> {
    with_journal(part, |f| {
        f.latest_by_cpu().into_iter().map(capture_info).collect()
    })
}

fn forensics_worst_capture_info(part: &dyn Part, now: Now) -> Vec<Metric> {
    with_journal(part, |f| {
        (f.worst_by_cpu(now.unix_ns, WORST_CAPTURE_HORIZON_NS)
            .into_iter())
        .map(capture_info)
        .collect()
    })
}

fn forensics_escalated_captures_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    with_journal(part, |f| per_cpu(&f.escalated))
}

fn forensics_spikes_uncaptured_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    with_journal(part, |f| {
        (f.uncaptured.iter())
            .map(|((c, reason), n)| {
                let labels = vec![label("cpu", &c.to_string()), label("reason", reason)];
                counter(labels, *n as f64)
            })
            .collect()
    })
}

fn smi_total(part: &dyn Part, _now: Now) -> Vec<Metric> {
    with_journal(part, |f| per_cpu(&f.smi))
}
