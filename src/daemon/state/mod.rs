//! What the daemon knows, as plain data: per CPU the lifetime statistics,
//! the trailing-window maximum, the Prometheus bucket counts and the
//! sampler's condition; plus the host, the configuration, counters of the
//! daemon itself and the registered instruments' parts (`parts.rs`).
//!
//! The collector task updates it from the samplers' intervals; the HTTP
//! handlers read it under one lock, so the numbers of one response come
//! from one state. Tests build it synthetically, without samplers.

mod gaps;
mod parts;

pub use crate::series::native;
pub use crate::series::{
    BucketCounts, MAX_HISTOGRAM_SLOTS, NativeCounts, WindowCount, WindowHistogram, WindowMax,
};
pub use gaps::{GapLog, GapSeen, MAX_GAPS_SEEN};
pub use parts::{Parts, Statuses};

use std::sync::{Mutex, MutexGuard};

use crate::config::Config;
use crate::host::HostInfo;
use crate::rt::sys::{Policy, ThreadScheduling};
use crate::stats::{LatencyStats, ShapeMismatch};
use crate::units::NS_PER_SEC;

/// The state's lock. It stays consistent even if a holder panicked: every
/// update is a whole merge done before the lock is released.
pub fn lock(state: &Mutex<MonitorState>) -> MutexGuard<'_, MonitorState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The condition of one sampler as last seen by the collector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplerView {
    pub tid: i32,
    pub policy: Policy,
    pub priority: i32,
    /// Runs with its real-time policy and locked memory.
    pub realtime: bool,
    /// `CLOCK_MONOTONIC` time of the latest wake-up (0: none yet).
    pub last_sample_ns: u64,
    /// The thread is running (false once it has died).
    pub alive: bool,
    /// The CPU is online (by sysfs, read once a second; before the first
    /// reading, by whether its sampler runs). An offline CPU is not a
    /// failure: health ignores it.
    pub online: bool,
    /// A sampler runs on the CPU now.
    pub sampling: bool,
    /// Since when (`CLOCK_MONOTONIC`) the CPU is online without a running
    /// sampler (a restart under way, or one that fails).
    pub unsampled_since_ns: Option<u64>,
    /// Since when (`CLOCK_MONOTONIC`) its current sampler runs: a stall
    /// is measured from its latest wake-up, or from this before the first.
    pub running_since_ns: u64,
    /// Stalls found since start (`latencyd_sampler_stalls_total`).
    pub stalls: u64,
    /// Its scheduling as the kernel reported it at the latest tick.
    pub scheduling: SchedulingSeen,
    /// Changes of its scheduling made behind latencyd's back, found since
    /// start (`latencyd_sampler_scheduling_changes_total`).
    pub scheduling_changes: u64,
}

/// A sampler's scheduling as read at a tick (`daemon::scheduling`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchedulingSeen {
    /// What the kernel reported (`None`: no running thread).
    pub running: Option<ThreadScheduling>,
    /// It differs from what the sampler set for itself at start.
    pub changed: bool,
}

#[derive(Debug, Clone)]
pub struct CpuView {
    pub cpu: usize,
    pub lifetime: LatencyStats,
    pub window: WindowMax,
    /// Wake-ups over the budget (`measure.spike_threshold`) in the same
    /// window.
    pub over_budget: WindowCount,
    /// Histograms of the same window, for `/plot.svg?window=`.
    pub recent: WindowHistogram,
    pub buckets: BucketCounts,
    /// The same samples in native buckets.
    pub native: NativeCounts,
    pub sampler: SamplerView,
}

impl CpuView {
    /// An empty view shaped by the configuration (spike threshold, window,
    /// buckets).
    pub fn new(cpu: usize, config: &Config, sampler: SamplerView) -> CpuView {
        CpuView {
            cpu,
            lifetime: LatencyStats::new(config.measure.spike_threshold_ns, None),
            window: WindowMax::new(config.export.max_window_ns),
            over_budget: WindowCount::new(config.export.max_window_ns),
            recent: WindowHistogram::new(config.export.max_window_ns),
            buckets: BucketCounts::new(&config.export.buckets_ns),
            native: NativeCounts::default(),
            sampler,
        }
    }

    /// Takes in one interval published by this CPU's sampler. The windows
    /// file it by when its samples were taken, not by when it arrived.
    pub fn absorb(&mut self, interval: &LatencyStats) -> Result<(), ShapeMismatch> {
        self.lifetime.merge(interval)?;
        if let Some(max_at_ns) = interval.max_at_ns() {
            self.window.record(max_at_ns, interval.max_ns);
            self.over_budget.add(max_at_ns, interval.spikes);
        }
        self.recent.record(interval);
        self.buckets.add(interval);
        self.native.add(interval);
        Ok(())
    }
}

/// Why the daemon is or is not healthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub healthy: bool,
    /// CPUs whose sampler is dead or has not advanced recently, with the age
    /// of its latest sample in ns (offline CPUs are not counted).
    pub stale: Vec<(usize, u64)>,
}

/// How configuration reloads went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadRecord {
    /// Reloads refused because the new configuration was invalid.
    pub failures: u64,
    /// The latest load (the start, or the latest SIGHUP) succeeded.
    pub last_ok: bool,
    /// `CLOCK_MONOTONIC` time of the latest successful load.
    pub last_success_ns: u64,
}

impl ReloadRecord {
    /// The record of a daemon whose configuration loaded at `started_ns`.
    pub fn started(started_ns: u64) -> ReloadRecord {
        ReloadRecord {
            failures: 0,
            last_ok: true,
            last_success_ns: started_ns,
        }
    }

    pub fn refused(&mut self) {
        self.failures += 1;
        self.last_ok = false;
    }

    pub fn applied(&mut self, now_ns: u64) {
        self.last_ok = true;
        self.last_success_ns = now_ns;
    }
}

pub struct MonitorState {
    pub host: HostInfo,
    pub config: Config,
    pub started_ns: u64,
    pub cpus: Vec<CpuView>,
    /// Why results are not real-time (empty when they are).
    pub non_rt_reasons: Vec<String>,
    /// CPUs online at start that have no sampler, with why
    /// (`sampling::unmeasured_cpus`).
    pub unmeasured: Vec<(usize, crate::sampling::Unmeasured)>,
    pub reload: ReloadRecord,
    /// The listeners' actual addresses (a configured port may be 0).
    pub listen: Vec<std::net::SocketAddr>,
    /// What the record's writer thread is doing (locked on its own).
    pub record: std::sync::Arc<std::sync::Mutex<crate::record::Status>>,
    /// The value held on `/dev/cpu_dma_latency` since start (µs), if any
    /// (`measure.pm_qos`): numbers measured under a PM QoS request are not
    /// comparable with numbers measured without one.
    pub pm_qos_held_us: Option<i32>,
    /// The registered instruments' parts (`instruments::registry`).
    pub parts: Parts,
    /// The latest stretches without samples: stalls and offline CPUs.
    pub gaps: GapLog,
}

/// How long an online CPU may go without a running sampler (its restart
/// after it came back: the once-a-second reading, a thread started)
/// before the daemon is unhealthy.
pub const UNSAMPLED_GRACE_NS: u64 = 5 * NS_PER_SEC;

impl MonitorState {
    /// A sampler that has not woken for this long has stalled
    /// (`measure.stall_threshold`).
    pub fn stale_after_ns(&self) -> u64 {
        self.config.measure.stall_threshold_ns
    }

    pub fn health(&self, now_ns: u64) -> Health {
        let limit = self.stale_after_ns();
        let stale: Vec<(usize, u64)> = self
            .cpus
            .iter()
            .filter_map(|view| {
                let sampler = &view.sampler;
                let last = sampler
                    .last_sample_ns
                    .max(sampler.running_since_ns)
                    .max(self.started_ns);
                let age = now_ns.saturating_sub(last);
                let unsampled = sampler
                    .unsampled_since_ns
                    .is_some_and(|since| now_ns.saturating_sub(since) > UNSAMPLED_GRACE_NS);
                let stale = sampler.sampling && age > limit;
                let unhealthy = !sampler.alive || stale || unsampled;
                (sampler.online && unhealthy).then_some((view.cpu, age))
            })
            .collect();
        Health {
            healthy: stale.is_empty(),
            stale,
        }
    }

    pub fn view(&self, cpu: usize) -> Option<&CpuView> {
        self.cpus.iter().find(|view| view.cpu == cpu)
    }
}
