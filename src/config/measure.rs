//! `[measure]`: what to sample and how.

use std::collections::BTreeMap;

use super::{
    ConfigError, Effective, RealtimeConfig, SectionReader, as_bool, as_cpu_selection,
    as_duration_ns, as_integer, as_string, key_error, quoted,
};
use crate::host::HostInfo;
use crate::rt::sys::Policy;
use crate::sampling::{CpuSelection, check_priority, default_priority};
use crate::units::{NS_PER_MS, NS_PER_SEC, NS_PER_US, format_duration_ns};

/// Below this a sampler spends its whole period waking up.
const MIN_INTERVAL_NS: u64 = 10 * NS_PER_US;
/// A sampler notices a stop request at its next wake-up, and the daemon
/// promises to exit within a second of SIGTERM.
const MAX_INTERVAL_NS: u64 = NS_PER_SEC;
const MAX_WARMUP_NS: u64 = 3_600 * NS_PER_SEC;
const MAX_SPIKE_THRESHOLD_NS: u64 = 10 * NS_PER_SEC;
/// A stall is longer than this many periods: shorter silences are late
/// wake-ups, which the histogram already shows.
const MIN_STALL_PERIODS: u64 = 5;
const MAX_STALL_THRESHOLD_NS: u64 = 3_600 * NS_PER_SEC;

/// `stall_threshold = "auto"`: 2 s, or five intervals if longer. Long
/// against any wake-up a healthy real-time host has, short against an
/// operator's patience.
pub fn auto_stall_threshold_ns(interval_ns: u64) -> u64 {
    (2 * NS_PER_SEC).max(MIN_STALL_PERIODS * interval_ns)
}

const KEYS: &[&str] = &[
    "cpus",
    "interval",
    "policy",
    "priority",
    "warmup",
    "spike_threshold",
    "stall_threshold",
    "pm_qos",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasureConfig {
    pub cpus: CpuSelection,
    pub interval_ns: u64,
    pub policy: Policy,
    pub priority: i32,
    pub warmup_ns: u64,
    pub spike_threshold_ns: u64,
    /// A sampler whose latest wake-up is older than this has stalled (it
    /// did not run): said, counted, filed in the record as a gap.
    pub stall_threshold_ns: u64,
    /// `stall_threshold` was "auto" (derived from the interval).
    pub stall_threshold_auto: bool,
    /// Hold /dev/cpu_dma_latency at 0 while running.
    pub pm_qos: bool,
}

impl MeasureConfig {
    pub(super) fn read(r: &mut SectionReader<'_>) -> Result<MeasureConfig, ConfigError> {
        r.only(KEYS)?;
        let cpus = r.read(
            "cpus",
            || CpuSelection::All,
            as_cpu_selection,
            |cpus| quoted(&cpus.to_string()),
        )?;
        let interval_ns = r.read(
            "interval",
            || NS_PER_MS,
            |v| within(as_duration_ns(v)?, MIN_INTERVAL_NS, MAX_INTERVAL_NS),
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let policy = r.read(
            "policy",
            || Policy::Fifo,
            |v| match as_string(v)?.as_str() {
                "fifo" => Ok(Policy::Fifo),
                "rr" => Ok(Policy::RoundRobin),
                "other" => Ok(Policy::Other),
                _ => Err("expected \"fifo\", \"rr\" or \"other\"".to_string()),
            },
            |p| quoted(p.name()),
        )?;
        let priority = r.read(
            "priority",
            || default_priority(policy),
            |v| check_priority(policy, as_integer(v)?),
            |p| p.to_string(),
        )?;
        let warmup_ns = r.read(
            "warmup",
            || NS_PER_SEC,
            |v| within(as_duration_ns(v)?, 0, MAX_WARMUP_NS),
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let spike_threshold_ns = r.read(
            "spike_threshold",
            || 100 * NS_PER_US,
            |v| within(as_duration_ns(v)?, 1, MAX_SPIKE_THRESHOLD_NS),
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let stall_threshold = r.read(
            "stall_threshold",
            || None,
            |v| match as_string(v) {
                Ok(word) if word == "auto" => Ok(None),
                _ => {
                    let ns = as_duration_ns(v)?;
                    let lowest = MIN_STALL_PERIODS * interval_ns;
                    within(ns, lowest, MAX_STALL_THRESHOLD_NS)
                        .map(Some)
                        .map_err(|e| {
                            format!("{e} (at least {MIN_STALL_PERIODS} intervals), or \"auto\"")
                        })
                }
            },
            |t| quoted(&t.map_or_else(|| "auto".to_string(), format_duration_ns)),
        )?;
        let pm_qos = r.read("pm_qos", || false, as_bool, |b| b.to_string())?;
        Ok(MeasureConfig {
            cpus,
            interval_ns,
            policy,
            priority,
            warmup_ns,
            spike_threshold_ns,
            stall_threshold_ns: stall_threshold
                .unwrap_or_else(|| auto_stall_threshold_ns(interval_ns)),
            stall_threshold_auto: stall_threshold.is_none(),
            pm_qos,
        })
    }

    /// The CPUs to keep a sampler for on this host, offline ones of a
    /// list included (checked by `check_against`).
    pub fn cpu_list(&self, host: &HostInfo) -> Vec<usize> {
        self.cpus.resolve_daemon(host).unwrap_or_default()
    }

    pub(super) fn check_against(
        &self,
        host: &HostInfo,
        realtime: &RealtimeConfig,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        if let Err(reason) = self.cpus.resolve_daemon(host) {
            return Err(key_error(effective, "measure.cpus", reason));
        }
        let allowed = host.max_rt_priority();
        if realtime.required && self.policy.is_realtime() && self.priority as u64 > allowed {
            let p = self.priority;
            let lower = if allowed >= 1 {
                format!(", lower measure.priority to {allowed} or less")
            } else {
                String::new()
            };
            return Err(key_error(
                effective,
                "measure.priority",
                format!(
                    "this process may not use real-time priority {p}: RLIMIT_RTPRIO is {allowed} \
                     and it lacks CAP_SYS_NICE. Set LimitRTPRIO={p} in the systemd unit (or \
                     `ulimit -r {p}`){lower}, or set realtime.required = false to run without \
                     real-time guarantees"
                ),
            ));
        }
        Ok(())
    }
}

fn within(ns: u64, lowest: u64, highest: u64) -> Result<u64, String> {
    if (lowest..=highest).contains(&ns) {
        Ok(ns)
    } else {
        Err(format!(
            "must be between {} and {}",
            format_duration_ns(lowest),
            format_duration_ns(highest)
        ))
    }
}
