//! `/api/v1/status`: the host, the configuration that matters, every
//! sampler, the CPUs not measured and the gaps in the measurement, how
//! the record goes, and each registered instrument's object. The JSON
//! layer's own DTOs.

use serde::Serialize;

use crate::calendar::format_rfc3339_ms;
use crate::daemon::state::MonitorState;
use crate::daemon::state::Statuses;
use crate::host::json::TrustFacts;

/// Where the registered instruments' objects are served among the
/// daemon's own: after each property named, so many of them (those that
/// have one, in registry order; the last takes the rest), so that each
/// is where it has always been.
pub const OBJECTS_AFTER: [(&str, usize); 2] = [("gaps", 1), ("record", usize::MAX)];

#[derive(Serialize)]
pub struct StatusBody {
    version: &'static str,
    uptime_ns: u64,
    healthy: bool,
    realtime: bool,
    non_rt_reasons: Vec<String>,
    listen: String,
    reload_failures: u64,
    /// What latencyd holds on `/dev/cpu_dma_latency`, in ns (`null`: none).
    pm_qos_held_ns: Option<u64>,
    host: HostBody,
    config: ConfigBody,
    samplers: Vec<SamplerBody>,
    /// Online CPUs without a sampler, with why.
    unmeasured_cpus: Vec<UnmeasuredBody>,
    /// The latest stretches without samples (stalls, offline CPUs),
    /// oldest first, those going on included.
    gaps: Vec<GapBody>,
    /// The registered instruments' objects, each under its name, where
    /// [`OBJECTS_AFTER`] puts them.
    #[serde(flatten)]
    after_gaps: Statuses,
    record: RecordBody,
    #[serde(flatten)]
    after_record: Statuses,
    /// The registered instruments' fields among the daemon's own (the
    /// host's fingerprint and topology), last.
    #[serde(flatten)]
    fields: Statuses,
}

/// Listen addresses as one string, comma-separated.
fn join_addrs(addrs: &[std::net::SocketAddr]) -> String {
    addrs
        .iter()
        .map(std::net::SocketAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the on-disk record is written, where, and how it goes.
#[derive(Serialize)]
pub struct RecordBody {
    enabled: bool,
    dir: String,
    interval_ns: u64,
    retention_ns: u64,
    max_bytes: u64,
    /// Why the latest write failed, while writes fail (null when they work).
    error: Option<String>,
    intervals_written: u64,
    write_errors: u64,
    intervals_dropped: u64,
    backlog: usize,
    files: usize,
    bytes: u64,
    /// The oldest file's start (RFC 3339), where a range can begin.
    oldest: Option<String>,
    /// The end of the latest interval written (RFC 3339).
    last_written: Option<String>,
}

impl RecordBody {
    fn of(s: &MonitorState) -> RecordBody {
        let r = s.record.lock().unwrap_or_else(|p| p.into_inner()).clone();
        RecordBody {
            enabled: r.enabled,
            dir: s.config.record.dir.display().to_string(),
            interval_ns: s.config.record.interval_ns,
            retention_ns: s.config.record.retention_ns,
            max_bytes: s.config.record.max_bytes,
            error: r.error,
            intervals_written: r.intervals_written,
            write_errors: r.write_errors,
            intervals_dropped: r.intervals_dropped,
            backlog: r.backlog,
            files: r.files,
            bytes: r.bytes,
            oldest: r.oldest_ns.map(format_rfc3339_ms),
            last_written: r.last_written_ns.map(format_rfc3339_ms),
        }
    }
}

#[derive(Serialize)]
pub struct HostBody {
    nodename: String,
    kernel: String,
    kernel_version: String,
    machine: String,
    #[serde(flatten)]
    facts: TrustFacts,
}

#[derive(Serialize)]
pub struct ConfigBody {
    cpus: Vec<usize>,
    interval_ns: u64,
    policy: &'static str,
    priority: i32,
    warmup_ns: u64,
    spike_threshold_ns: u64,
    pm_qos: bool,
    realtime_required: bool,
    listen: String,
    max_window_ns: u64,
    per_cpu_histograms: bool,
    buckets_ns: Vec<u64>,
    log_level: &'static str,
    /// Where each key's value came from (`section.key` → source).
    sources: std::collections::BTreeMap<String, String>,
}

/// A stretch without samples on one CPU.
#[derive(Serialize)]
pub struct GapBody {
    cpu: usize,
    /// `stalled` or `offline`.
    reason: &'static str,
    /// RFC 3339: the last wake-up before it.
    start: String,
    /// RFC 3339: the wake-up that ended it; null while it lasts.
    end: Option<String>,
    /// How long it lasted, or has lasted so far.
    duration_ns: u64,
    /// What was runnable on the CPU when the stall was found.
    held_by: Option<String>,
}

/// An online CPU latencyd does not measure.
#[derive(Serialize)]
pub struct UnmeasuredBody {
    cpu: usize,
    /// `cpuset`, `isolated`, `affinity` or `config`.
    reason: &'static str,
    /// What the reason means and what to do about it.
    explanation: &'static str,
}

#[derive(Serialize)]
pub struct SamplerBody {
    cpu: usize,
    tid: i32,
    policy: &'static str,
    priority: i32,
    realtime: bool,
    /// What the kernel reported at the latest tick (read every tick), so
    /// that a sampler demoted behind latencyd's back shows as what it is.
    running: Option<RunningBody>,
    /// Its scheduling differs from what it set for itself at start.
    scheduling_changed: bool,
    scheduling_changes: u64,
    alive: bool,
    /// The CPU is online (by sysfs, read once a second): false while it
    /// is offline (its sampler stopped, not failed).
    online: bool,
    /// A sampler runs on the CPU now; false while it is offline, or online
    /// while its sampler restarts.
    sampling: bool,
    last_sample_age_ns: Option<u64>,
}

#[derive(Serialize)]
pub struct RunningBody {
    policy: String,
    priority: i32,
    cpus: Vec<usize>,
}

/// `/api/v1/status` of a state at `now_ns`.
pub fn status(s: &MonitorState, clock: super::clock::Now) -> StatusBody {
    let (now, now_unix_ns) = (clock.monotonic_ns, clock.unix_ns);
    let c = &s.config;
    let host = &s.host;
    let mut parts = s.parts.statuses();
    StatusBody {
        version: env!("CARGO_PKG_VERSION"),
        uptime_ns: now.saturating_sub(s.started_ns),
        healthy: s.health(now).healthy,
        realtime: s.cpus.iter().all(|v| v.sampler.realtime),
        non_rt_reasons: s.non_rt_reasons.clone(),
        listen: join_addrs(&s.listen),
        reload_failures: s.reload.failures,
        pm_qos_held_ns: s
            .pm_qos_held_us
            .map(|us| u64::try_from(us).unwrap_or(0) * 1_000),
        host: HostBody {
            nodename: host.uname.nodename.clone(),
            kernel: host.uname.release.clone(),
            kernel_version: host.uname.version.clone(),
            machine: host.uname.machine.clone(),
            facts: TrustFacts::of(host),
        },
        config: ConfigBody {
            cpus: s.cpus.iter().map(|v| v.cpu).collect(),
            interval_ns: c.measure.interval_ns,
            policy: c.measure.policy.name(),
            priority: c.measure.priority,
            warmup_ns: c.measure.warmup_ns,
            spike_threshold_ns: c.measure.spike_threshold_ns,
            pm_qos: c.measure.pm_qos,
            realtime_required: c.realtime.required,
            listen: join_addrs(&c.export.listen),
            max_window_ns: c.export.max_window_ns,
            per_cpu_histograms: c.export.per_cpu_histograms,
            buckets_ns: c.export.buckets_ns.clone(),
            log_level: c.log.level.name(),
            sources: c
                .effective
                .iter()
                .map(|(key, e)| (key.clone(), e.source.clone()))
                .collect(),
        },
        unmeasured_cpus: s
            .unmeasured
            .iter()
            .map(|&(cpu, reason)| UnmeasuredBody {
                cpu,
                reason: reason.name(),
                explanation: reason.explain(),
            })
            .collect(),
        gaps: s
            .gaps
            .seen
            .iter()
            .map(|g| GapBody {
                cpu: g.cpu,
                reason: g.reason.name(),
                start: format_rfc3339_ms(g.start_unix_ns),
                end: g.end_unix_ns.map(format_rfc3339_ms),
                duration_ns: g
                    .end_unix_ns
                    .unwrap_or(now_unix_ns)
                    .saturating_sub(g.start_unix_ns),
                held_by: g.held_by.clone(),
            })
            .collect(),
        after_gaps: parts.take_first(OBJECTS_AFTER[0].1),
        record: RecordBody::of(s),
        after_record: parts,
        fields: s.parts.status_fields(),
        samplers: s
            .cpus
            .iter()
            .map(|v| SamplerBody {
                cpu: v.cpu,
                tid: v.sampler.tid,
                policy: v.sampler.policy.name(),
                priority: v.sampler.priority,
                realtime: v.sampler.realtime,
                running: v.sampler.scheduling.running.as_ref().map(|r| RunningBody {
                    policy: r.policy_name(),
                    priority: r.priority,
                    cpus: r.cpus.clone(),
                }),
                scheduling_changed: v.sampler.scheduling.changed,
                scheduling_changes: v.sampler.scheduling_changes,
                alive: v.sampler.alive,
                online: v.sampler.online,
                sampling: v.sampler.sampling,
                last_sample_age_ns: (v.sampler.last_sample_ns > 0)
                    .then(|| now.saturating_sub(v.sampler.last_sample_ns)),
            })
            .collect(),
    }
}
