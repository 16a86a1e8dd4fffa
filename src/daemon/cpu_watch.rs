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
/// How long after the online list last changed the usable CPUs are read
/// at every reading: the cpuset's effective CPUs follow hotplug from a
/// kernel work queue, a moment after the online list.
const SETTLE_NS: u64 = 10 * NS_PER_SEC;

/// The online list as one read saw it, and the usable CPUs of it.
type UsableRead = Option<(Vec<usize>, Vec<usize>)>;

/// A read of the usable CPUs on the blocking pool.
type UsableJob = JoinHandle<UsableRead>;

/// Where the readings come from: the host, or a script in tests.
#[derive(Clone, Copy)]
struct Readers {
    online: fn() -> Option<Vec<usize>>,
    usable: fn(&[usize]) -> UsableRead,
}

const HOST: Readers = Readers {
    online: sys::online_cpus,
    usable: crate::host::usable_now,
};

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
    /// The usable CPUs being read.
    job: Option<UsableJob>,
    next_ns: u64,
    next_usable_ns: u64,
    /// Until when every reading reads the usable CPUs too.
    settle_until_ns: u64,
    read: Readers,
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
            settle_until_ns: 0,
            read: HOST,
        }
    }

    /// Reads the online list when due, and when it changed, the usable
    /// CPUs (on the blocking pool); true when a reading completed. Never
    /// waits.
    pub(super) async fn step(&mut self, now_ns: u64) -> bool {
        let mut fresh = false;
        if self.job.as_ref().is_some_and(|job| job.is_finished())
            && let Some(job) = self.job.take()
        {
            // A finished task's result is ready: this await does not wait.
            // The online list kept is the one the usable CPUs were read
            // with, not the one that started the read: in a storm the two
            // differ, and the next read must see the difference.
            if let Ok(read) = job.await {
                match &read {
                    Some((online, usable)) if Some(usable) != self.latest.usable.as_ref() => {
                        tracing::debug!("CPUs online {online:?}, usable {usable:?}");
                    }
                    None => tracing::debug!("the online or usable CPUs could not be read"),
                    Some(_) => {}
                }
                self.latest = match read {
                    Some((online, usable)) => Reading {
                        online: Some(online),
                        usable: Some(usable),
                    },
                    None => Reading::default(),
                };
                fresh = true;
            }
        }
        if self.job.is_none() && now_ns >= self.next_ns {
            self.next_ns = now_ns + READ_EVERY_NS;
            let online = (self.read.online)();
            // A change, not the first reading: the cpuset may lag it.
            if self.latest.online.is_some() && online != self.latest.online {
                self.settle_until_ns = now_ns + SETTLE_NS;
            }
            if online != self.latest.online
                || now_ns < self.settle_until_ns
                || now_ns >= self.next_usable_ns
            {
                self.next_usable_ns = now_ns + USABLE_EVERY_NS;
                let (allowed, usable) = (self.allowed.clone(), self.read.usable);
                self.job = Some(tokio::task::spawn_blocking(move || usable(&allowed)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The online lists the scripted host shows, one per read.
    static SCRIPT: Mutex<Vec<Vec<usize>>> = Mutex::new(Vec::new());

    fn next_online() -> Option<Vec<usize>> {
        let mut script = SCRIPT.lock().unwrap();
        let online = script.first().cloned();
        if script.len() > 1 {
            script.remove(0);
        }
        online
    }

    fn scripted_usable(allowed: &[usize]) -> UsableRead {
        let online = next_online()?;
        let usable = online
            .iter()
            .copied()
            .filter(|c| allowed.contains(c))
            .collect();
        Some((online, usable))
    }

    /// Steps at `now_ns` until a reading completes (or a while passed:
    /// none was started).
    async fn settle(watch: &mut CpuWatch, now_ns: u64) {
        for _ in 0..2000 {
            if watch.step(now_ns).await {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    #[tokio::test]
    async fn a_cpu_back_between_two_reads_of_a_storm_is_seen_at_the_next() {
        // CPU 1 is online when the tick reads the list, offline again when
        // the blocking read of the usable CPUs runs, then online for good:
        // the next tick must read the usable CPUs again, not wait for the
        // 30 s re-read.
        *SCRIPT.lock().unwrap() = vec![vec![0, 1], vec![0], vec![0, 1]];
        let mut watch = CpuWatch::new(true, vec![0, 1]);
        watch.read = Readers {
            online: next_online,
            usable: scripted_usable,
        };
        settle(&mut watch, 0).await;
        assert_eq!(watch.usable(), Some(&[0][..]));
        settle(&mut watch, READ_EVERY_NS).await;
        assert_eq!(watch.usable(), Some(&[0, 1][..]), "CPU 1 is usable again");
        assert_eq!(watch.online(1), Some(true));
    }

    /// The cpuset's effective CPUs as the scripted host shows them.
    static CPUSET: Mutex<Vec<Vec<usize>>> = Mutex::new(Vec::new());

    fn lagging_usable(_: &[usize]) -> UsableRead {
        let mut cpuset = CPUSET.lock().unwrap();
        let usable = cpuset.first().cloned()?;
        if cpuset.len() > 1 {
            cpuset.remove(0);
        }
        Some((vec![0, 1], usable))
    }

    fn both_online() -> Option<Vec<usize>> {
        Some(vec![0, 1])
    }

    #[tokio::test]
    async fn a_cpuset_that_lags_the_online_list_is_read_again() {
        // CPU 1 is online, but the cpuset's effective CPUs (updated from a
        // work queue after hotplug) leave it out at the first read.
        *CPUSET.lock().unwrap() = vec![vec![0], vec![0, 1]];
        let mut watch = CpuWatch::new(true, vec![0, 1]);
        watch.latest.online = Some(vec![0]);
        watch.read = Readers {
            online: both_online,
            usable: lagging_usable,
        };
        settle(&mut watch, 0).await;
        assert_eq!(watch.usable(), Some(&[0][..]));
        settle(&mut watch, READ_EVERY_NS).await;
        assert_eq!(
            watch.usable(),
            Some(&[0, 1][..]),
            "read again within the settling time"
        );
    }

    static STEADY_READS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn counted_usable(_: &[usize]) -> UsableRead {
        STEADY_READS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some((vec![0, 1], vec![0, 1]))
    }

    #[tokio::test]
    async fn a_steady_host_has_its_usable_cpus_read_at_start_then_every_30_s() {
        // The first reading is not a change: no second-by-second re-reads
        // (each would hold a blocking thread) unless a CPU goes or comes.
        let mut watch = CpuWatch::new(true, vec![0, 1]);
        watch.read = Readers {
            online: both_online,
            usable: counted_usable,
        };
        for second in 0..31 {
            watch.step(second * READ_EVERY_NS).await;
            if watch.job.is_some() {
                settle(&mut watch, second * READ_EVERY_NS).await;
            }
        }
        assert_eq!(STEADY_READS.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
