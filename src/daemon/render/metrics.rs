//! `/metrics`: the metrics of DESIGN.md, built by a custom
//! `prometheus::core::Collector` from the daemon's state at scrape time,
//! next to the crate's process collector. All latencies in seconds.

use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::{Encoder, Registry, TextEncoder};

use crate::daemon::state::{BucketCounts, MonitorState};
use crate::units::NS_PER_SEC;

const NS: f64 = NS_PER_SEC as f64;

/// The metrics latencyd exports: (name, help, type, label names).
const FAMILIES: &[(&str, &str, MetricType, &[&str])] = &[
    (
        "latencyd_wakeup_latency_seconds",
        "Wake-up latency of the samplers: how late each woke after its deadline.",
        MetricType::HISTOGRAM,
        &["cpu"],
    ),
    (
        "latencyd_wakeup_latency_max_seconds",
        "Exact maximum wake-up latency since the daemon started.",
        MetricType::GAUGE,
        &["cpu"],
    ),
    (
        "latencyd_wakeup_latency_window_max_seconds",
        "Exact maximum wake-up latency over the trailing window (export.max_window); absent while the window holds no sample.",
        MetricType::GAUGE,
        &["cpu"],
    ),
    (
        "latencyd_missed_periods_total",
        "Periods skipped because a wake-up came after the next deadline.",
        MetricType::COUNTER,
        &["cpu"],
    ),
    (
        "latencyd_wakeup_latency_overflows_total",
        "Samples above the HDR histogram's range (10 s); still counted in the maximum.",
        MetricType::COUNTER,
        &["cpu"],
    ),
    (
        "latencyd_spikes_total",
        "Samples above measure.spike_threshold.",
        MetricType::COUNTER,
        &["cpu"],
    ),
    (
        "latencyd_sampler_realtime",
        "1 when the sampler runs with the configured real-time policy and locked memory, else 0.",
        MetricType::GAUGE,
        &["cpu", "policy"],
    ),
    (
        "latencyd_sampler_online",
        "1 while the CPU is there to sample; 0 after it went offline (its sampler stopped) until sampling resumes.",
        MetricType::GAUGE,
        &["cpu"],
    ),
    (
        "latencyd_sampler_last_sample_timestamp_seconds",
        "Unix time of the sampler's latest wake-up (its heartbeat).",
        MetricType::GAUGE,
        &["cpu"],
    ),
    (
        "latencyd_config_interval_seconds",
        "The sampling interval.",
        MetricType::GAUGE,
        &[],
    ),
    (
        "latencyd_config_reload_failures_total",
        "SIGHUP reloads refused because the new configuration was invalid.",
        MetricType::COUNTER,
        &[],
    ),
    (
        "latencyd_host_info",
        "What the host runs; always 1.",
        MetricType::GAUGE,
        &["kernel", "preempt_rt", "machine", "nodename"],
    ),
    (
        "latencyd_build_info",
        "What latencyd is; always 1.",
        MetricType::GAUGE,
        &["version"],
    ),
];

/// `CLOCK_MONOTONIC` now, in ns: the real one (`sys::monotonic_now_ns`)
/// or, in tests, a fixed one, the same the HTTP handlers use.
pub type Clock = fn() -> u64;

/// Builds the metric families from the state, at the time `now_ns` says.
pub struct StateCollector {
    state: Arc<Mutex<MonitorState>>,
    now_ns: Clock,
    descs: Vec<Desc>,
}

impl StateCollector {
    pub fn new(state: Arc<Mutex<MonitorState>>, now_ns: Clock) -> StateCollector {
        let descs = FAMILIES
            .iter()
            .map(|(name, help, _, labels)| {
                Desc::new(
                    name.to_string(),
                    help.to_string(),
                    labels.iter().map(|l| l.to_string()).collect(),
                    Default::default(),
                )
                .expect("the metric descriptions are valid")
            })
            .collect();
        StateCollector {
            state,
            now_ns,
            descs,
        }
    }
}

impl Collector for StateCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // A poisoned lock means a panic elsewhere; the data is still the
        // latest state, so serve it rather than nothing.
        let now_ns = (self.now_ns)();
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        families(&state, now_ns)
    }
}

fn label(name: &str, value: &str) -> LabelPair {
    let mut pair = LabelPair::default();
    pair.set_name(name.to_string());
    pair.set_value(value.to_string());
    pair
}

fn gauge(labels: Vec<LabelPair>, value: f64) -> Metric {
    let mut g = Gauge::default();
    g.set_value(value);
    let mut m = Metric::default();
    m.set_label(labels);
    m.set_gauge(g);
    m
}

fn counter(labels: Vec<LabelPair>, value: f64) -> Metric {
    let mut c = Counter::default();
    c.set_value(value);
    let mut m = Metric::default();
    m.set_label(labels);
    m.set_counter(c);
    m
}

fn histogram(labels: Vec<LabelPair>, buckets: &BucketCounts, count: u64, sum_ns: u128) -> Metric {
    let mut h = Histogram::default();
    h.set_sample_count(count);
    h.set_sample_sum(sum_ns as f64 / NS);
    h.set_bucket(
        buckets
            .bounds_ns()
            .iter()
            .zip(buckets.cumulative())
            .map(|(&bound, cumulative)| {
                let mut b = Bucket::default();
                b.set_upper_bound(bound as f64 / NS);
                b.set_cumulative_count(cumulative);
                b
            })
            .collect(),
    );
    let mut m = Metric::default();
    m.set_label(labels);
    m.set_histogram(h);
    m
}

/// The metric families for `state` at `now_ns` (`CLOCK_MONOTONIC`).
pub fn families(state: &MonitorState, now_ns: u64) -> Vec<MetricFamily> {
    let cpu = |c: usize| vec![label("cpu", &c.to_string())];
    let per_cpu_histograms = state.config.export.per_cpu_histograms;
    let mut out = Vec::with_capacity(FAMILIES.len());
    for (name, help, kind, _) in FAMILIES {
        let metrics: Vec<Metric> = match *name {
            "latencyd_wakeup_latency_seconds" if per_cpu_histograms => state
                .cpus
                .iter()
                .map(|v| histogram(cpu(v.cpu), &v.buckets, v.lifetime.count, v.lifetime.sum_ns))
                .collect(),
            "latencyd_wakeup_latency_seconds" => {
                let mut all = BucketCounts::new(&state.config.export.buckets_ns);
                let (mut count, mut sum_ns) = (0, 0);
                for view in &state.cpus {
                    all.merge(&view.buckets);
                    count += view.lifetime.count;
                    sum_ns += view.lifetime.sum_ns;
                }
                vec![histogram(vec![], &all, count, sum_ns)]
            }
            "latencyd_wakeup_latency_max_seconds" => state
                .cpus
                .iter()
                .map(|v| gauge(cpu(v.cpu), v.lifetime.max_ns as f64 / NS))
                .collect(),
            "latencyd_wakeup_latency_window_max_seconds" => state
                .cpus
                .iter()
                .filter_map(|v| {
                    v.window
                        .max(now_ns)
                        .map(|max| gauge(cpu(v.cpu), max as f64 / NS))
                })
                .collect(),
            "latencyd_missed_periods_total" => state
                .cpus
                .iter()
                .map(|v| counter(cpu(v.cpu), v.lifetime.missed as f64))
                .collect(),
            "latencyd_wakeup_latency_overflows_total" => state
                .cpus
                .iter()
                .map(|v| counter(cpu(v.cpu), v.lifetime.hdr_overflows as f64))
                .collect(),
            "latencyd_spikes_total" => state
                .cpus
                .iter()
                .map(|v| counter(cpu(v.cpu), v.lifetime.spikes as f64))
                .collect(),
            "latencyd_sampler_realtime" => state
                .cpus
                .iter()
                .map(|v| {
                    let labels = vec![
                        label("cpu", &v.cpu.to_string()),
                        label("policy", v.sampler.policy.name()),
                    ];
                    gauge(
                        labels,
                        f64::from(u8::from(
                            v.sampler.realtime && v.sampler.alive && v.sampler.online,
                        )),
                    )
                })
                .collect(),
            "latencyd_sampler_online" => state
                .cpus
                .iter()
                .map(|v| gauge(cpu(v.cpu), f64::from(u8::from(v.sampler.online))))
                .collect(),
            "latencyd_sampler_last_sample_timestamp_seconds" => state
                .cpus
                .iter()
                .filter(|v| v.sampler.last_sample_ns > 0)
                .map(|v| gauge(cpu(v.cpu), state.unix_seconds(v.sampler.last_sample_ns)))
                .collect(),
            "latencyd_config_interval_seconds" => {
                vec![gauge(vec![], state.config.measure.interval_ns as f64 / NS)]
            }
            "latencyd_config_reload_failures_total" => {
                vec![counter(vec![], state.reload_failures as f64)]
            }
            "latencyd_host_info" => vec![gauge(
                vec![
                    label("kernel", &state.host.uname.release),
                    label(
                        "preempt_rt",
                        if state.host.preempt_rt {
                            "true"
                        } else {
                            "false"
                        },
                    ),
                    label("machine", &state.host.uname.machine),
                    label("nodename", &state.host.uname.nodename),
                ],
                1.0,
            )],
            "latencyd_build_info" => vec![gauge(
                vec![label("version", env!("CARGO_PKG_VERSION"))],
                1.0,
            )],
            other => unreachable!("no metrics for {other}"),
        };
        if metrics.is_empty() {
            continue;
        }
        let mut family = MetricFamily::default();
        family.set_name(name.to_string());
        family.set_help(help.to_string());
        family.set_field_type(*kind);
        family.set_metric(metrics);
        out.push(family);
    }
    out
}

/// The registry `/metrics` serves: latencyd's collector and the process
/// collector (CPU time, memory, file descriptors of this process).
pub fn registry(
    state: Arc<Mutex<MonitorState>>,
    with_process_metrics: bool,
    now_ns: Clock,
) -> Registry {
    let registry = Registry::new();
    registry
        .register(Box::new(StateCollector::new(state, now_ns)))
        .expect("latencyd's collector registers once");
    if with_process_metrics {
        let process = prometheus::process_collector::ProcessCollector::for_self();
        registry
            .register(Box::new(process))
            .expect("the process collector registers once");
    }
    registry
}

/// Text exposition format 0.0.4 of everything in `registry`.
pub fn render(registry: &Registry) -> Result<String, prometheus::Error> {
    render_families(&registry.gather())
}

/// Renders `families` in the text exposition format 0.0.4.
pub fn render_families(families: &[MetricFamily]) -> Result<String, prometheus::Error> {
    let mut buffer = Vec::with_capacity(16 * 1024);
    TextEncoder::new().encode(families, &mut buffer)?;
    // The encoder writes only UTF-8: names, label values taken from Rust
    // strings, and numbers.
    String::from_utf8(buffer).map_err(|e| prometheus::Error::Msg(e.to_string()))
}
