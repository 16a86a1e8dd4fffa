//! The catalogue of `/metrics`: every family latencyd exports, with its
//! help text, type and label names, in the order they are served. The
//! renderer (`metrics`) fills them from the state; docs/metrics.md is
//! checked against what a running daemon serves.

use prometheus::proto::MetricType;

/// The metrics latencyd exports: (name, help, type, label names).
pub const FAMILIES: &[(&str, &str, MetricType, &[&str])] = &[
    (
        "latencyd_wakeup_latency_seconds",
        "Wake-up latency of the samplers: how late each woke after its deadline. Buckets round up: a sample counts in the first bucket whose le is at or above the upper edge of its HDR bucket (at most 0.78 % above the sample), so no bucket holds a sample above its le.",
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
        "Exact maximum wake-up latency sampled in the trailing window (export.max_window), filed by when the sample was taken: a wake-up stays here for at least the window after it happened. Absent while the window holds no sample.",
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
        "Samples the HDR histogram could not hold: above its range (17.2 s), or past a sampler's full 16-bit counters in an interval the exporter did not collect; still counted in the maximum, ranked at it in quantiles.",
        MetricType::COUNTER,
        &["cpu"],
    ),
    (
        "latencyd_spikes_total",
        "Samples above measure.spike_threshold (latencyd_config_spike_threshold_seconds), the host's latency budget.",
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
        "latencyd_cpu_unmeasured",
        "1 for each CPU online at start that latencyd does not measure, with why: cpuset (outside the cgroup's cpuset, as exclusive CPUs are for a Kubernetes pod in the shared pool), isolated (isolcpus= and outside the inherited affinity), affinity (outside the affinity mask), config (not in measure.cpus).",
        MetricType::GAUGE,
        &["cpu", "reason"],
    ),
    (
        "latencyd_sampler_last_sample_timestamp_seconds",
        "Unix time of the sampler's latest wake-up (its heartbeat): the wall clock at the scrape minus how long ago it woke, so a step of the wall clock moves it too.",
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
        "latencyd_config_spike_threshold_seconds",
        "measure.spike_threshold: the host's latency budget. latencyd_spikes_total counts the samples above it; alerts and dashboards read it.",
        MetricType::GAUGE,
        &[],
    ),
    (
        "latencyd_pm_qos_held_seconds",
        "The value latencyd holds on /dev/cpu_dma_latency (measure.pm_qos); absent when it holds none. Latencies measured under a PM QoS request are not comparable with latencies measured without one.",
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
        "latencyd_config_last_reload_successful",
        "1 if the latest configuration reload (or the start) succeeded, 0 if it was refused.",
        MetricType::GAUGE,
        &[],
    ),
    (
        "latencyd_config_last_reload_success_timestamp_seconds",
        "Unix time of the latest successful configuration load (the start or a reload).",
        MetricType::GAUGE,
        &[],
    ),
    (
        "latencyd_forensics_available",
        "1 while spike forensics captures (forensics.enabled and the kernel lets it), else 0; /api/v1/status says why not.",
        MetricType::GAUGE,
        &[],
    ),
    (
        "latencyd_forensics_captures_total",
        "Spike captures by CPU and main cause (task, irq, softirq, nmi, steal, sampler, unaccounted); a series appears with its first capture.",
        MetricType::COUNTER,
        &["cpu", "cause"],
    ),
    (
        "latencyd_forensics_spikes_uncaptured_total",
        "Wake-ups over forensics.threshold not captured, by CPU and reason: rate_limited (forensics.per_cpu_interval, forensics.max_per_minute), busy (the recorder's queue was full), failed (reading the trace or writing the capture failed; /api/v1/status says why).",
        MetricType::COUNTER,
        &["cpu", "reason"],
    ),
    (
        "latencyd_smi_total",
        "System management interrupts on the CPU since boot (Intel MSR 0x34), where forensics runs and the MSR can be read.",
        MetricType::COUNTER,
        &["cpu"],
    ),
    (
        "latencyd_record_intervals_written_total",
        "Intervals written to the on-disk record (record.*), one per record.interval with every CPU's histogram.",
        MetricType::COUNTER,
        &[],
    ),
    (
        "latencyd_record_write_errors_total",
        "Failed attempts to write the record (disk full, directory unwritable); /api/v1/status says why. Measuring goes on and the intervals wait in memory.",
        MetricType::COUNTER,
        &[],
    ),
    (
        "latencyd_record_intervals_dropped_total",
        "Intervals the record gave up: more waited for a failing disk than latencyd keeps in memory (64), or the writer was stuck.",
        MetricType::COUNTER,
        &[],
    ),
    (
        "latencyd_record_bytes",
        "Bytes the record's files take in record.dir.",
        MetricType::GAUGE,
        &[],
    ),
    (
        "latencyd_host_info",
        "What the host runs; always 1.",
        MetricType::GAUGE,
        &["kernel", "preempt_rt", "machine", "nodename"],
    ),
    (
        "latencyd_cpu_info",
        "Where each online CPU sits: package (socket), core, NUMA node and SMT siblings (a CPU list); always 1. Join on cpu to group other series; never a label of the latency series themselves.",
        MetricType::GAUGE,
        &["cpu", "package", "core", "node", "smt_sibling"],
    ),
    (
        "latencyd_host_fingerprint_info",
        "The host's latency-relevant configuration: the identifier over all its facts (GET /api/v1/host lists them) and the main ones; always 1. A new identifier is a new configuration.",
        MetricType::GAUGE,
        &[
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
    ),
    (
        "latencyd_host_fingerprint_changes_total",
        "Changes of the host's fingerprint seen since start (the first at start counts when the record's last facts differ).",
        MetricType::COUNTER,
        &[],
    ),
    (
        "latencyd_host_fingerprint_last_change_timestamp_seconds",
        "When the last change of the host's fingerprint was seen; absent until one is.",
        MetricType::GAUGE,
        &[],
    ),
    (
        "latencyd_host_fact_changed_timestamp_seconds",
        "When a family of facts (kernel.release, cpuidle.states, irq, ...) last changed; one series per family that changed since start.",
        MetricType::GAUGE,
        &["fact"],
    ),
    (
        "latencyd_host_facts_read_duration_seconds",
        "How long the latest read of the host's facts took (host.reread_interval apart, on the exporter's side).",
        MetricType::GAUGE,
        &[],
    ),
    (
        "latencyd_build_info",
        "What latencyd is; always 1.",
        MetricType::GAUGE,
        &["version", "revision"],
    ),
];
