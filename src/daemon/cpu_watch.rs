//! The sampled CPUs reconciled against the host. A sampler notices for
//! itself that its CPU went offline (it wakes elsewhere), and a restart
//! brings it back; those events are a shortcut. The truth is what
//! `/sys/devices/system/cpu/online` and the cgroup's cpuset say, read once
//! a second: the online list on the runtime thread (a sysfs file the
//! kernel prints from memory, without a lock, in microseconds), the
//! cpuset on the blocking pool only when the online list changed (cgroupfs
//! takes the cgroup lock, which hotplug holds). Whichever order a hotplug
//! storm took,
//! every configured CPU that is online and allowed ends with a running
//! sampler, `latencyd_sampler_online` says what sysfs says, and a CPU
//! online without a running sampler for longer than `UNSAMPLED_GRACE_NS`
//! makes the daemon unhealthy (`MonitorState::health`).

use tokio::task::JoinHandle;

use crate::rt::engine::Engine;
use crate::rt::sys;
use crate::units::NS_PER_SEC;

/// How often the CPUs online are read.
const READ_EVERY_NS: u64 = NS_PER_SEC;
/// How often the usable CPUs are read even if none went on or off line
/// (the cgroup's cpuset may change by itself).
const USABLE_EVERY_NS: u64 = 30 * NS_PER_SEC;

/// A read of the usable CPUs on the blocking pool.
type UsableJob = JoinHandle<Option<Vec<usize>>>;

/// One reading of the host's CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Reading {
    /// `/sys/devices/system/cpu/online`.
    online: Option<Vec<usize>>,
    /// Online, in the affinity mask at start, and in the cpuset.
    usable: Option<Vec<usize>>,
}

/// What the collector knows of the host's CPUs, and the reading under way.
pub(super) struct CpuWatch {
    /// `measure.cpus = "all"`: a CPU that becomes usable gets a sampler.
    grows: bool,
    /// The affinity mask at start, offline CPUs included.
    allowed: Vec<usize>,
    latest: Reading,
    /// The online list whose usable CPUs are being read.
    job: Option<(Option<Vec<usize>>, UsableJob)>,
    next_ns: u64,
    next_usable_ns: u64,
}

impl CpuWatch {
    pub(super) fn new(grows: bool, allowed: Vec<usize>) -> CpuWatch {
        CpuWatch {
            grows,
            allowed,
            latest: Reading::default(),
            job: None,
            next_ns: 0,
            next_usable_ns: 0,
        }
    }

    /// Reads the online list when due, and when it changed, the usable
    /// CPUs (on the blocking pool); true when a reading completed. Never
    /// waits.
    pub(super) async fn step(&mut self, now_ns: u64) -> bool {
        let mut fresh = false;
        if self.job.as_ref().is_some_and(|(_, job)| job.is_finished())
            && let Some((online, job)) = self.job.take()
        {
            // A finished task's result is ready: this await does not wait.
            if let Ok(usable) = job.await {
                self.latest = Reading { online, usable };
                fresh = true;
            }
        }
        if self.job.is_none() && now_ns >= self.next_ns {
            self.next_ns = now_ns + READ_EVERY_NS;
            let online = sys::online_cpus();
            if online != self.latest.online || now_ns >= self.next_usable_ns {
                self.next_usable_ns = now_ns + USABLE_EVERY_NS;
                let allowed = self.allowed.clone();
                let job = tokio::task::spawn_blocking(move || crate::host::usable_now(&allowed));
                self.job = Some((online, job));
            }
        }
        fresh
    }

    /// Whether `cpu` is online by the latest reading (None: not read yet).
    pub(super) fn online(&self, cpu: usize) -> Option<bool> {
        self.latest
            .online
            .as_ref()
            .map(|online| online.contains(&cpu))
    }

    /// The CPUs usable by the latest reading, if known.
    pub(super) fn usable(&self) -> Option<&[usize]> {
        self.latest.usable.as_deref()
    }

    /// The CPUs that are usable now and have no slot, which the engine
    /// should sample (none unless the selection is `all`).
    pub(super) fn missing(&self, engine: &Engine) -> Vec<usize> {
        let (true, Some(usable)) = (self.grows, &self.latest.usable) else {
            return Vec::new();
        };
        usable
            .iter()
            .copied()
            .filter(|cpu| engine.slots.iter().all(|slot| slot.cpu != *cpu))
            .collect()
    }
}
