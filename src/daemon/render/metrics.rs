//! `/metrics`: the metrics of DESIGN.md, built by a custom
//! `prometheus::core::Collector` from the daemon's state at scrape time,
//! next to the crate's process collector. All latencies in seconds.

use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{LabelPair, Metric, MetricFamily};
use prometheus::{Encoder, Registry, TextEncoder};

use super::catalog::FAMILIES;
pub use super::clock::{Clock, Clocks, Now, SYSTEM_CLOCKS};
use super::proto::{counter, gauge, histogram, label};
use crate::daemon::state::{BucketCounts, MonitorState};

use crate::units::NS_PER_SEC;

const NS: f64 = NS_PER_SEC as f64;

/// How far back `latencyd_forensics_worst_capture_info` looks for the
/// worst capture: the alerts' 5-minute range and their 10 minutes of
/// `keep_firing_for`, so that a firing alert links to the capture of the
/// wake-up it pages on.
const WORST_CAPTURE_HORIZON_NS: u64 = 15 * 60 * NS_PER_SEC;

/// The git revision latencyd was built from (`build.rs`; "unknown" when it
/// was built outside a git checkout without `GIT_REVISION_LATENCYD`).
pub const REVISION: &str = env!("GIT_REVISION_LATENCYD");

/// Builds the metric families from the state, at the time `clocks` say.
pub struct StateCollector {
    state: Arc<Mutex<MonitorState>>,
    clocks: Clocks,
    descs: Vec<Desc>,
}

impl StateCollector {
    pub fn new(state: Arc<Mutex<MonitorState>>, clocks: Clocks) -> StateCollector {
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
            clocks,
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
        let now = self.clocks.read();
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        families(&state, now)
    }
}

/// The latency histogram's name (with native buckets in the protobuf
/// exposition).
pub const LATENCY_HISTOGRAM: &str = "latencyd_wakeup_latency_seconds";

/// The metrics of `latencyd_wakeup_latency_seconds`: one per CPU, or one
/// summed over CPUs (`export.per_cpu_histograms`).
pub fn latency_histograms(state: &MonitorState) -> Vec<Metric> {
    if state.config.export.per_cpu_histograms {
        return state
            .cpus
            .iter()
            .map(|v| {
                histogram(
                    vec![label("cpu", &v.cpu.to_string())],
                    &v.buckets,
                    v.lifetime.count,
                    v.lifetime.sum_ns,
                )
            })
            .collect();
    }
    let mut all = BucketCounts::new(&state.config.export.buckets_ns);
    let (mut count, mut sum_ns) = (0, 0);
    for view in &state.cpus {
        all.merge(&view.buckets);
        count += view.lifetime.count;
        sum_ns += view.lifetime.sum_ns;
    }
    vec![histogram(vec![], &all, count, sum_ns)]
}

/// The metric families for `state` at `now`.
pub fn families(state: &MonitorState, now: Now) -> Vec<MetricFamily> {
    families_but(state, now, &[])
}

/// The same without the families named in `skip` (which the protobuf
/// exposition builds itself, outside the lock).
pub fn families_but(state: &MonitorState, now: Now, skip: &[&str]) -> Vec<MetricFamily> {
    let now_ns = now.monotonic_ns;
    let cpu = |c: usize| vec![label("cpu", &c.to_string())];
    let forensics = state.forensics.lock();
    let record = state
        .record
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let mut out = Vec::with_capacity(FAMILIES.len());
    for (name, help, kind, _) in FAMILIES.iter().filter(|f| !skip.contains(&f.0)) {
        let metrics: Vec<Metric> = match *name {
            "latencyd_wakeup_latency_seconds" => latency_histograms(state),
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
                            v.sampler.realtime && v.sampler.alive && v.sampler.sampling,
                        )),
                    )
                })
                .collect(),
            "latencyd_sampler_online" => state
                .cpus
                .iter()
                .map(|v| gauge(cpu(v.cpu), f64::from(u8::from(v.sampler.online))))
                .collect(),
            "latencyd_cpu_unmeasured" => state
                .unmeasured
                .iter()
                .map(|(c, reason)| {
                    gauge(
                        vec![label("cpu", &c.to_string()), label("reason", reason.name())],
                        1.0,
                    )
                })
                .collect(),
            "latencyd_sampler_stalls_total" => state
                .cpus
                .iter()
                .map(|v| counter(cpu(v.cpu), v.sampler.stalls as f64))
                .collect(),
            "latencyd_sampler_last_sample_timestamp_seconds" => state
                .cpus
                .iter()
                .filter(|v| v.sampler.last_sample_ns > 0)
                .map(|v| gauge(cpu(v.cpu), now.unix_seconds_of(v.sampler.last_sample_ns)))
                .collect(),
            "latencyd_config_interval_seconds" => {
                vec![gauge(vec![], state.config.measure.interval_ns as f64 / NS)]
            }
            "latencyd_config_spike_threshold_seconds" => vec![gauge(
                vec![],
                state.config.measure.spike_threshold_ns as f64 / NS,
            )],
            "latencyd_pm_qos_held_seconds" => state
                .pm_qos_held_us
                .map(|us| gauge(vec![], f64::from(us) / 1e6))
                .into_iter()
                .collect(),
            "latencyd_config_reload_failures_total" => {
                vec![counter(vec![], state.reload.failures as f64)]
            }
            "latencyd_config_last_reload_successful" => {
                vec![gauge(vec![], f64::from(u8::from(state.reload.last_ok)))]
            }
            "latencyd_config_last_reload_success_timestamp_seconds" => vec![gauge(
                vec![],
                now.unix_seconds_of(state.reload.last_success_ns),
            )],
            "latencyd_forensics_available" => {
                vec![gauge(vec![], f64::from(u8::from(forensics.available)))]
            }
            "latencyd_forensics_captures_total" => forensics
                .captured
                .iter()
                .map(|((c, cause), n)| {
                    counter(
                        vec![label("cause", cause), label("cpu", &c.to_string())],
                        *n as f64,
                    )
                })
                .collect(),
            "latencyd_forensics_latest_capture_info" => forensics
                .latest_by_cpu()
                .into_iter()
                .map(|s| {
                    let labels = vec![label("capture", &s.id), label("cpu", &s.cpu.to_string())];
                    gauge(labels, 1.0)
                })
                .collect(),
            "latencyd_forensics_worst_capture_info" => forensics
                .worst_by_cpu(now.unix_ns, WORST_CAPTURE_HORIZON_NS)
                .into_iter()
                .map(|s| {
                    let labels = vec![label("capture", &s.id), label("cpu", &s.cpu.to_string())];
                    gauge(labels, 1.0)
                })
                .collect(),
            "latencyd_forensics_escalated_captures_total" => forensics
                .escalated
                .iter()
                .map(|(c, n)| counter(cpu(*c), *n as f64))
                .collect(),
            "latencyd_forensics_spikes_uncaptured_total" => forensics
                .uncaptured
                .iter()
                .map(|((c, reason), n)| {
                    counter(
                        vec![label("cpu", &c.to_string()), label("reason", reason)],
                        *n as f64,
                    )
                })
                .collect(),
            "latencyd_tracefs_instance_repairs_total" => {
                let observe = state.observe.status();
                let users = [
                    ("forensics", forensics.enabled, forensics.repairs),
                    ("observe", observe.enabled, observe.repairs),
                ];
                users
                    .into_iter()
                    .filter(|(_, enabled, _)| *enabled)
                    .map(|(user, _, n)| counter(vec![label("user", user)], n as f64))
                    .collect()
            }
            "latencyd_smi_total" => forensics
                .smi
                .iter()
                .map(|(c, n)| counter(cpu(*c), *n as f64))
                .collect(),
            "latencyd_record_intervals_written_total" => {
                vec![counter(vec![], record.intervals_written as f64)]
            }
            "latencyd_record_write_errors_total" => {
                vec![counter(vec![], record.write_errors as f64)]
            }
            "latencyd_record_intervals_dropped_total" => {
                vec![counter(vec![], record.intervals_dropped as f64)]
            }
            "latencyd_record_bytes" => vec![gauge(vec![], record.bytes as f64)],
            "latencyd_load_active" => state
                .load
                .profile
                .map(|p| {
                    gauge(
                        vec![label("profile", p.name())],
                        f64::from(u8::from(state.load.active.is_some())),
                    )
                })
                .into_iter()
                .collect(),
            "latencyd_load_window_end_timestamp_seconds" => state
                .load
                .profile
                .zip(state.load.active)
                .map(|(p, w)| gauge(vec![label("profile", p.name())], unix_seconds(w.end)))
                .into_iter()
                .collect(),
            "latencyd_load_next_window_start_timestamp_seconds" => state
                .load
                .profile
                .zip(state.load.next)
                .map(|(p, w)| gauge(vec![label("profile", p.name())], unix_seconds(w.start)))
                .into_iter()
                .collect(),
            "latencyd_load_windows_total" => state
                .load
                .profile
                .map(|p| {
                    counter(
                        vec![label("profile", p.name())],
                        state.load.windows_total as f64,
                    )
                })
                .into_iter()
                .collect(),
            "latencyd_load_throughput" => state
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
                .collect(),
            "latencyd_load_failures_total" => state
                .load
                .profile
                .iter()
                .flat_map(|p| {
                    state.load.failures.iter().map(move |(g, n)| {
                        counter(
                            vec![label("generator", g), label("profile", p.name())],
                            *n as f64,
                        )
                    })
                })
                .collect(),
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
            "latencyd_cpu_info" => state
                .fingerprint
                .topology
                .iter()
                .map(|t| {
                    let known = |v: Option<String>| v.unwrap_or_else(|| "unknown".to_string());
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
                .collect(),
            "latencyd_host_fingerprint_info" => {
                let mut labels: Vec<LabelPair> = super::host::main_facts(&state.fingerprint)
                    .iter()
                    .map(|(name, value)| label(name, value))
                    .collect();
                labels.sort_by(|a, b| a.name().cmp(b.name()));
                vec![gauge(labels, 1.0)]
            }
            "latencyd_host_fingerprint_changes_total" => {
                vec![counter(vec![], state.fingerprint.changes_total as f64)]
            }
            "latencyd_host_fingerprint_last_change_timestamp_seconds" => state
                .fingerprint
                .last_change_unix_ns
                .map(|ns| gauge(vec![], ns as f64 / NS))
                .into_iter()
                .collect(),
            "latencyd_host_fact_changed_timestamp_seconds" => state
                .fingerprint
                .family_changed_unix_ns
                .iter()
                .map(|(fact, ns)| gauge(vec![label("fact", fact)], *ns as f64 / NS))
                .collect(),
            "latencyd_host_facts_read_duration_seconds" => vec![gauge(
                vec![],
                state.fingerprint.read_duration_ns as f64 / NS,
            )],
            "latencyd_build_info" => vec![gauge(
                vec![
                    label("version", env!("CARGO_PKG_VERSION")),
                    label("revision", REVISION),
                ],
                1.0,
            )],
            other => super::observe::family(other, state, now.monotonic_ns)
                .unwrap_or_else(|| unreachable!("no metrics for {other}")),
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
    clocks: Clocks,
) -> Registry {
    let registry = process_registry(with_process_metrics);
    registry
        .register(Box::new(StateCollector::new(state, clocks)))
        .expect("latencyd's collector registers once");
    registry
}

/// A registry of the process collector alone (or nothing): what the
/// protobuf and OpenMetrics expositions gather beside `families`, which
/// they build from the state themselves.
pub fn process_registry(with_process_metrics: bool) -> Registry {
    let registry = Registry::new();
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

/// A wall-clock time as Unix seconds.
fn unix_seconds(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
