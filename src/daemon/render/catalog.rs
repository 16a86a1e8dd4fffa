//! The catalogue of `/metrics`: every family latencyd exports, with its
//! help text, type, label names and the function that builds it
//! (`families.rs`, and each registered instrument's own), in the order
//! they are served; docs/metrics.md is checked against what
//! a running daemon serves.

use prometheus::proto::MetricType;

use super::families;
use super::families::Build;
pub use super::families::Family;
use crate::instruments::registry::INSTRUMENTS;

/// Every family latencyd exports, in the order they are served: each
/// group of the daemon's ([`SERVED`]) followed by the families of the
/// next registered instruments, each built from its part.
pub fn families() -> impl Iterator<Item = Family> {
    let mut next = 0;
    SERVED.iter().flat_map(move |&(own, instruments)| {
        let from = next.min(INSTRUMENTS.len());
        next = from.saturating_add(instruments).min(INSTRUMENTS.len());
        let registered = INSTRUMENTS[from..next].iter().flat_map(|entry| {
            (entry.families.iter()).map(move |f| f.with_build(Build::Part(entry.name, f.build)))
        });
        own.iter().copied().chain(registered)
    })
}

/// The daemon's groups of families, each with how many registered
/// instruments' follow it (in registry order; the last takes the rest),
/// so that every family is served where it always has been: forensics'
/// and the observer's after the configuration's, the load windows' after
/// the record's, the host facts' after the host's, the others after the
/// build's.
const SERVED: &[(&[Family], usize)] = &[
    (SAMPLERS_AND_CONFIG, 2),
    (TRACEFS_AND_RECORD, 1),
    (HOST_INFO, 1),
    (BUILD_INFO, usize::MAX),
];

/// The samplers' and the configuration's families.
const SAMPLERS_AND_CONFIG: &[Family] = &[
    Family {
        name: "latencyd_wakeup_latency_seconds",
        help: "Wake-up latency of the samplers: how late each woke after its deadline. Buckets round up: a sample counts in the first bucket whose le is at or above the upper edge of its HDR bucket (at most 0.78 % above the sample), so no bucket holds a sample above its le.",
        kind: MetricType::HISTOGRAM,
        labels: &["cpu"],
        build: Build::State(families::wakeup_latency_seconds),
    },
    Family {
        name: "latencyd_wakeup_latency_max_seconds",
        help: "Exact maximum wake-up latency since the daemon started.",
        kind: MetricType::GAUGE,
        labels: &["cpu"],
        build: Build::State(families::wakeup_latency_max_seconds),
    },
    Family {
        name: "latencyd_wakeup_latency_window_max_seconds",
        help: "Exact maximum wake-up latency sampled in the trailing window (export.max_window), filed by when the sample was taken: a wake-up stays here for at least the window after it happened. Absent while the window holds no sample.",
        kind: MetricType::GAUGE,
        labels: &["cpu"],
        build: Build::State(families::wakeup_latency_window_max_seconds),
    },
    Family {
        name: "latencyd_missed_periods_total",
        help: "Periods skipped because a wake-up came after the next deadline.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: Build::State(families::missed_periods_total),
    },
    Family {
        name: "latencyd_wakeup_latency_overflows_total",
        help: "Samples the HDR histogram could not hold: above its range (17.2 s), or past a sampler's full 16-bit counters in an interval the exporter did not collect; still counted in the maximum, ranked at it in quantiles.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: Build::State(families::wakeup_latency_overflows_total),
    },
    Family {
        name: "latencyd_spikes_total",
        help: "Samples above measure.spike_threshold (latencyd_config_spike_threshold_seconds), the host's latency budget.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: Build::State(families::spikes_total),
    },
    Family {
        name: "latencyd_sampler_realtime",
        help: "1 when the sampler runs with the configured real-time policy and locked memory, else 0.",
        kind: MetricType::GAUGE,
        labels: &["cpu", "policy"],
        build: Build::State(families::sampler_realtime),
    },
    Family {
        name: "latencyd_sampler_scheduling_changes_total",
        help: "Times the sampler's policy, priority or CPUs were found changed behind latencyd's back (chrt, tuna, a tuned profile, a cgroup move), read at every collector tick; set back at once with realtime.restore = true, else latencyd_sampler_realtime is 0 while it lasts.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: Build::State(families::sampler_scheduling_changes_total),
    },
    Family {
        name: "latencyd_sampler_online",
        help: "1 while the CPU is online, as /sys/devices/system/cpu/online says (read once a second); 0 while it is offline (its sampler stops and resumes when it is back).",
        kind: MetricType::GAUGE,
        labels: &["cpu"],
        build: Build::State(families::sampler_online),
    },
    Family {
        name: "latencyd_cpu_unmeasured",
        help: "1 for each CPU online at start that latencyd does not measure, with why: cpuset (outside the cgroup's cpuset, as exclusive CPUs are for a Kubernetes pod in the shared pool), isolated (isolcpus= and outside the inherited affinity), affinity (outside the affinity mask), config (not in measure.cpus).",
        kind: MetricType::GAUGE,
        labels: &["cpu", "reason"],
        build: Build::State(families::cpu_unmeasured),
    },
    Family {
        name: "latencyd_sampler_stalls_total",
        help: "Stalls of the sampler: its latest wake-up older than measure.stall_threshold (it did not run: a higher-priority task or the host held its CPU). Counted when found; the log names what held the CPU and the record files the stretch as a gap.",
        kind: MetricType::COUNTER,
        labels: &["cpu"],
        build: Build::State(families::sampler_stalls_total),
    },
    Family {
        name: "latencyd_sampler_last_sample_timestamp_seconds",
        help: "Unix time of the sampler's latest wake-up (its heartbeat): the wall clock at the scrape minus how long ago it woke, so a step of the wall clock moves it too.",
        kind: MetricType::GAUGE,
        labels: &["cpu"],
        build: Build::State(families::sampler_last_sample_timestamp_seconds),
    },
    Family {
        name: "latencyd_config_interval_seconds",
        help: "The sampling interval.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: Build::State(families::config_interval_seconds),
    },
    Family {
        name: "latencyd_config_spike_threshold_seconds",
        help: "measure.spike_threshold: the host's latency budget. latencyd_spikes_total counts the samples above it; alerts and dashboards read it.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: Build::State(families::config_spike_threshold_seconds),
    },
    Family {
        name: "latencyd_pm_qos_held_seconds",
        help: "The value latencyd holds on /dev/cpu_dma_latency (measure.pm_qos); absent when it holds none. Latencies measured under a PM QoS request are not comparable with latencies measured without one.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: Build::State(families::pm_qos_held_seconds),
    },
    Family {
        name: "latencyd_config_reload_failures_total",
        help: "SIGHUP reloads refused: the new configuration was invalid, or reading and checking it did not finish within 10 s (the log says which).",
        kind: MetricType::COUNTER,
        labels: &[],
        build: Build::State(families::config_reload_failures_total),
    },
    Family {
        name: "latencyd_config_last_reload_successful",
        help: "1 if the latest configuration reload (or the start) succeeded, 0 if it was refused.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: Build::State(families::config_last_reload_successful),
    },
    Family {
        name: "latencyd_config_last_reload_success_timestamp_seconds",
        help: "Unix time of the latest successful configuration load (the start or a reload).",
        kind: MetricType::GAUGE,
        labels: &[],
        build: Build::State(families::config_last_reload_success_timestamp_seconds),
    },
];

/// The tracefs instances' and the record's families.
const TRACEFS_AND_RECORD: &[Family] = &[
    Family {
        name: "latencyd_tracefs_instance_repairs_total",
        help: "Times latencyd found its tracefs instance (user forensics or observe) changed or broken behind its back by another program and set it back or made it again; each is logged at warn. A series exists while that user is enabled.",
        kind: MetricType::COUNTER,
        labels: &["user"],
        build: Build::State(families::tracefs_instance_repairs_total),
    },
    Family {
        name: "latencyd_record_intervals_written_total",
        help: "Intervals written to the on-disk record (record.*), one per record.interval with every CPU's histogram.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: Build::State(families::record_intervals_written_total),
    },
    Family {
        name: "latencyd_record_write_errors_total",
        help: "Failed attempts to write the record (disk full, directory unwritable); /api/v1/status says why. Measuring goes on and the intervals wait in memory.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: Build::State(families::record_write_errors_total),
    },
    Family {
        name: "latencyd_record_intervals_dropped_total",
        help: "Intervals the record gave up: more waited for a failing disk than latencyd keeps in memory (64), or the writer was stuck.",
        kind: MetricType::COUNTER,
        labels: &[],
        build: Build::State(families::record_intervals_dropped_total),
    },
    Family {
        name: "latencyd_record_bytes",
        help: "Bytes the record's files take in record.dir.",
        kind: MetricType::GAUGE,
        labels: &[],
        build: Build::State(families::record_bytes),
    },
];

/// What the host runs.
const HOST_INFO: &[Family] = &[Family {
    name: "latencyd_host_info",
    help: "What the host runs; always 1.",
    kind: MetricType::GAUGE,
    labels: &["kernel", "preempt_rt", "machine", "nodename"],
    build: Build::State(families::host_info),
}];

/// What latencyd is.
const BUILD_INFO: &[Family] = &[Family {
    name: "latencyd_build_info",
    help: "What latencyd is; always 1.",
    kind: MetricType::GAUGE,
    labels: &["version", "revision"],
    build: Build::State(families::build_info),
}];
