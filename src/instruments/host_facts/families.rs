//! The host facts' metric families, each built from its part: where each
//! CPU sits, the fingerprint with its main facts, its changes and how
//! long a read takes.

use prometheus::proto::{LabelPair, Metric, MetricType};

use super::HostFactsPart;
use crate::exposition::Family;
use crate::exposition::metric::{counter, gauge, label};
use crate::instruments::shape::{Part, PartBuild};
use crate::units::{NS_PER_SEC, Now};

const NS: f64 = NS_PER_SEC as f64;

/// Its families, in the order `/metrics` serves them.
pub(super) const FAMILIES: &[Family<PartBuild>] = &[
    Family {
        name: "latencyd_cpu_info",
        help: "Where each online CPU sits: package (socket), core, NUMA node and SMT siblings (a CPU list); always 1. Join on cpu to group other series; never a label of the latency series themselves.",
        kind: MetricType::GAUGE,
        labels: &["cpu", "package", "core", "node", "smt_sibling"],
        build: cpu_info,
    },
    Family {
        name: "latencyd_host_fingerprint_info",
        help: "The host's latency-relevant configuration: the identifier over all its facts (GET /api/v1/host lists them) and the main ones; always 1. A new identifier is a new configuration.",
        kind: MetricType::GAUGE,
        labels: &[
            "fingerprint",
            "kernel",
            "preempt",
            "cmdline_hash",
            "microcode",
            "bios_version",
            "cpu_model",
            "smt",
            "idle_driver",
            "idle_governor",
            "cpufreq_governor",
            "pm_qos_us",
            "tuned_profile",
            "hypervisor",
        ],
        build: host_fingerprint_info,
    },
    Family {
        name: "latencyd_host_fingerprint_changes_total",
        help: "Changes of the host's fingerprint seen since start (the first at start counts when the record's last facts differ).",
        kind: MetricType::COUNTER,
        labels: &[],
        build: host_fingerprint_changes_total,
    },
    Family {
        name: "latencyd_host_fingerprint_last_change_timestamp_seconds",
        help: "When the last change of the host's fingerprint was seen; absent until one is.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: host_fingerprint_last_change_timestamp_seconds,
    },
    Family {
        name: "latencyd_host_fact_changed_timestamp_seconds",
        help: "When a family of facts (kernel.release, cpuidle.states, irq, ...) last changed; one series per family that changed since start.",
        kind: MetricType::GAUGE,
        labels: &["fact"],
        build: host_fact_changed_timestamp_seconds,
    },
    Family {
        name: "latencyd_host_facts_read_duration_seconds",
        help: "How long the latest read of the host's facts took (host.reread_interval apart, on the exporter's side).",
        kind: MetricType::GAUGE,
        labels: &[],
        build: host_facts_read_duration_seconds,
    },
];

fn part(p: &dyn Part) -> Option<&HostFactsPart> {
    p.as_any().downcast_ref::<HostFactsPart>()
}

fn cpu_info(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(p) = part(p) else { return Vec::new() };
    let known = |v: Option<String>| v.unwrap_or_else(|| "unknown".to_string());
    (p.track.topology.iter())
        .map(|t| {
            gauge(
                vec![
                    label("core", &known(t.core.map(|c| c.to_string()))),
                    label("cpu", &t.cpu.to_string()),
                    label("node", &known(t.node.map(|n| n.to_string()))),
                    label("package", &known(t.package.map(|p| p.to_string()))),
                    label("smt_sibling", &known(t.smt_siblings.clone())),
                ],
                1.0,
            )
        })
        .collect()
}

fn host_fingerprint_info(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(p) = part(p) else { return Vec::new() };
    let mut labels: Vec<LabelPair> = super::render::main_facts(&p.track)
        .iter()
        .map(|(name, value)| label(name, value))
        .collect();
    labels.sort_by(|a, b| a.name().cmp(b.name()));
    vec![gauge(labels, 1.0)]
}

fn host_fingerprint_changes_total(p: &dyn Part, _now: Now) -> Vec<Metric> {
    (part(p).into_iter())
        .map(|p| counter(vec![], p.track.changes_total as f64))
        .collect()
}

fn host_fingerprint_last_change_timestamp_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    (part(p)
        .and_then(|p| p.track.last_change_unix_ns)
        .into_iter())
    .map(|ns| gauge(vec![], ns as f64 / NS))
    .collect()
}

fn host_fact_changed_timestamp_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(p) = part(p) else { return Vec::new() };
    (p.track.family_changed_unix_ns.iter())
        .map(|(fact, ns)| gauge(vec![label("fact", fact)], *ns as f64 / NS))
        .collect()
}

fn host_facts_read_duration_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    (part(p).into_iter())
        .map(|p| gauge(vec![], p.track.read_duration_ns as f64 / NS))
        .collect()
}
