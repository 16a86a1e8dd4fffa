//! How each family of the catalogue (`catalog.rs`) is built from the
//! state at a scrape: one function per family, named after it, which the
//! catalogue lists beside the family's name, help, type and labels, so a
//! family cannot be served without its description or described without
//! being served. A registered instrument's families are built in its own
//! folder, from its part.

use prometheus::proto::{LabelPair, Metric};

use super::clock::Now;
use super::metric::{counter, gauge, histogram, label};
use crate::daemon::state::{BucketCounts, MonitorState};
use crate::units::NS_PER_SEC;

const NS: f64 = NS_PER_SEC as f64;

/// The git revision latencyd was built from (`build.rs`; "unknown" when it
/// was built outside a git checkout without `GIT_REVISION_LATENCYD`).
pub const REVISION: &str = env!("GIT_REVISION_LATENCYD");

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

/// What a scrape builds the families from: the state under its lock,
/// the time, and the record's status read once.
pub struct Scrape<'a> {
    pub state: &'a MonitorState,
    pub now: Now,
    pub record: &'a crate::record::Status,
}

/// A family's builder: its metrics at a scrape (none: the family is not
/// served), from the state, or from a registered instrument's part.
#[derive(Debug, Clone, Copy)]
pub enum Build {
    State(fn(&Scrape) -> Vec<Metric>),
    Part(&'static str, crate::instruments::shape::PartBuild),
}

/// A family latencyd exports: its description and its builder (listed in
/// `catalog.rs` and the registry's entries).
pub type Family = crate::exposition::Family<Build>;

fn cpu_label(cpu: usize) -> Vec<LabelPair> {
    vec![label("cpu", &cpu.to_string())]
}

pub fn wakeup_latency_seconds(s: &Scrape) -> Vec<Metric> {
    latency_histograms(s.state)
}

pub fn wakeup_latency_max_seconds(s: &Scrape) -> Vec<Metric> {
    s.state
        .cpus
        .iter()
        .map(|v| gauge(cpu_label(v.cpu), v.lifetime.max_ns as f64 / NS))
        .collect()
}

pub fn wakeup_latency_window_max_seconds(s: &Scrape) -> Vec<Metric> {
    s.state
        .cpus
        .iter()
        .filter_map(|v| {
            v.window
                .max(s.now.monotonic_ns)
                .map(|max| gauge(cpu_label(v.cpu), max as f64 / NS))
        })
        .collect()
}

pub fn missed_periods_total(s: &Scrape) -> Vec<Metric> {
    s.state
        .cpus
        .iter()
        .map(|v| counter(cpu_label(v.cpu), v.lifetime.missed as f64))
        .collect()
}

pub fn wakeup_latency_overflows_total(s: &Scrape) -> Vec<Metric> {
    s.state
        .cpus
        .iter()
        .map(|v| counter(cpu_label(v.cpu), v.lifetime.hdr_overflows as f64))
        .collect()
}

pub fn spikes_total(s: &Scrape) -> Vec<Metric> {
    s.state
        .cpus
        .iter()
        .map(|v| counter(cpu_label(v.cpu), v.lifetime.spikes as f64))
        .collect()
}

pub fn sampler_realtime(s: &Scrape) -> Vec<Metric> {
    s.state
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
        .collect()
}

pub fn sampler_scheduling_changes_total(s: &Scrape) -> Vec<Metric> {
    s.state
        .cpus
        .iter()
        .map(|v| counter(cpu_label(v.cpu), v.sampler.scheduling_changes as f64))
        .collect()
}

pub fn sampler_online(s: &Scrape) -> Vec<Metric> {
    s.state
        .cpus
        .iter()
        .map(|v| gauge(cpu_label(v.cpu), f64::from(u8::from(v.sampler.online))))
        .collect()
}

pub fn cpu_unmeasured(s: &Scrape) -> Vec<Metric> {
    s.state
        .unmeasured
        .iter()
        .map(|(c, reason)| {
            gauge(
                vec![label("cpu", &c.to_string()), label("reason", reason.name())],
                1.0,
            )
        })
        .collect()
}

pub fn sampler_stalls_total(s: &Scrape) -> Vec<Metric> {
    s.state
        .cpus
        .iter()
        .map(|v| counter(cpu_label(v.cpu), v.sampler.stalls as f64))
        .collect()
}

pub fn sampler_last_sample_timestamp_seconds(s: &Scrape) -> Vec<Metric> {
    s.state
        .cpus
        .iter()
        .filter(|v| v.sampler.last_sample_ns > 0)
        .map(|v| {
            gauge(
                cpu_label(v.cpu),
                s.now.unix_seconds_of(v.sampler.last_sample_ns),
            )
        })
        .collect()
}

pub fn config_interval_seconds(s: &Scrape) -> Vec<Metric> {
    vec![gauge(
        vec![],
        s.state.config.measure.interval_ns as f64 / NS,
    )]
}

pub fn config_spike_threshold_seconds(s: &Scrape) -> Vec<Metric> {
    vec![gauge(
        vec![],
        s.state.config.measure.spike_threshold_ns as f64 / NS,
    )]
}

pub fn pm_qos_held_seconds(s: &Scrape) -> Vec<Metric> {
    s.state
        .pm_qos_held_us
        .map(|us| gauge(vec![], f64::from(us) / 1e6))
        .into_iter()
        .collect()
}

pub fn config_reload_failures_total(s: &Scrape) -> Vec<Metric> {
    vec![counter(vec![], s.state.reload.failures as f64)]
}

pub fn config_last_reload_successful(s: &Scrape) -> Vec<Metric> {
    vec![gauge(vec![], f64::from(u8::from(s.state.reload.last_ok)))]
}

pub fn config_last_reload_success_timestamp_seconds(s: &Scrape) -> Vec<Metric> {
    vec![gauge(
        vec![],
        s.now.unix_seconds_of(s.state.reload.last_success_ns),
    )]
}

/// Each registered instrument's that owns one (`Part::tracefs_repairs`),
/// while it is enabled.
pub fn tracefs_instance_repairs_total(s: &Scrape) -> Vec<Metric> {
    (s.state.parts.iter())
        .filter_map(|(name, part)| Some((name, part.tracefs_repairs()?)))
        .map(|(user, n)| counter(vec![label("user", user)], n as f64))
        .collect()
}

pub fn record_intervals_written_total(s: &Scrape) -> Vec<Metric> {
    vec![counter(vec![], s.record.intervals_written as f64)]
}

pub fn record_write_errors_total(s: &Scrape) -> Vec<Metric> {
    vec![counter(vec![], s.record.write_errors as f64)]
}

pub fn record_intervals_dropped_total(s: &Scrape) -> Vec<Metric> {
    vec![counter(vec![], s.record.intervals_dropped as f64)]
}

pub fn record_bytes(s: &Scrape) -> Vec<Metric> {
    vec![gauge(vec![], s.record.bytes as f64)]
}

pub fn host_info(s: &Scrape) -> Vec<Metric> {
    vec![gauge(
        vec![
            label("kernel", &s.state.host.uname.release),
            label(
                "preempt_rt",
                if s.state.host.preempt_rt {
                    "true"
                } else {
                    "false"
                },
            ),
            label("machine", &s.state.host.uname.machine),
            label("nodename", &s.state.host.uname.nodename),
        ],
        1.0,
    )]
}

pub fn build_info(_: &Scrape) -> Vec<Metric> {
    vec![gauge(
        vec![
            label("version", env!("CARGO_PKG_VERSION")),
            label("revision", REVISION),
        ],
        1.0,
    )]
}
