//! What the host offers for real-time measurement: kernel and PREEMPT_RT,
//! the CPUs this process may use, the privileges and limits that decide
//! whether samplers can run real-time, RT throttling and clock resolution.
//!
//! Detection reads procfs/sysfs and asks `sys`; it never fails as a whole:
//! what cannot be read is reported as unknown.
//!
//! - `fingerprint`: the facts that decide the host's latency, their
//!   identifier and their differences.
//! - `facts`: reading those facts (kernel, command line, CPU, firmware,
//!   idle and frequency, PM QoS, scheduler, IRQs, tuned, virtualisation).
//! - `topology`: package, core, node and SMT siblings of each CPU.
//! - `json`: the JSON form of both, for every edge that prints them.

pub mod facts;
pub mod fingerprint;
pub mod json;
pub mod topology;

pub use facts::FactReader;
pub use fingerprint::{Fact, FactChange, Fingerprint};
pub use topology::CpuTopology;

use std::fs;

use crate::cpulist::parse_cpu_list;
use crate::rt::engine::RtLimits;
use crate::rt::sys;

/// Capability bits from `linux/capability.h`.
const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_NICE: u32 = 23;

#[derive(Debug, Clone)]
pub struct HostInfo {
    pub uname: sys::Uname,
    /// The kernel is PREEMPT_RT (`/sys/kernel/realtime` is 1, or `uname -v`
    /// names PREEMPT_RT).
    pub preempt_rt: bool,
    /// CPUs that are online and in this process's affinity mask.
    pub usable_cpus: Vec<usize>,
    /// The CPUs this process's affinity mask allows, offline ones included
    /// (`Cpus_allowed_list` of `/proc/self/status`; `sched_getaffinity`
    /// leaves offline CPUs out), read at start: a CPU that comes online
    /// later is usable if it is among them.
    pub allowed_cpus: Vec<usize>,
    pub online_cpus: Option<Vec<usize>>,
    /// The CPUs this process's cgroup may run on (`cpuset.cpus.effective`
    /// of cgroup v2, `cpuset.effective_cpus` of v1), where readable. Under
    /// the kubelet's static CPU manager a shared-pool pod's cpuset leaves
    /// out the CPUs given exclusively to other pods.
    pub cpuset_cpus: Option<Vec<usize>>,
    /// CPUs taken out of the scheduler's domains at boot (`isolcpus=`,
    /// `/sys/devices/system/cpu/isolated`); processes started without an
    /// explicit affinity do not run there.
    pub isolated_cpus: Vec<usize>,
    pub cap_sys_nice: bool,
    pub cap_ipc_lock: bool,
    /// `RLIMIT_RTPRIO` (`None`: unlimited).
    pub rtprio_limit: Option<u64>,
    /// `RLIMIT_MEMLOCK` in bytes (`None`: unlimited).
    pub memlock_limit: Option<u64>,
    /// `/proc/sys/kernel/sched_rt_runtime_us`; -1 disables RT throttling.
    pub sched_rt_runtime_us: Option<i64>,
    pub clock_resolution_ns: Option<u64>,
}

impl HostInfo {
    pub fn detect() -> HostInfo {
        let uname = sys::uname().unwrap_or_default();
        let realtime_flag = fs::read_to_string("/sys/kernel/realtime")
            .map(|s| s.trim() == "1")
            .unwrap_or(false);
        let preempt_rt = realtime_flag || uname.version.contains("PREEMPT_RT");
        let online_cpus = sys::online_cpus();
        let affinity = sys::process_affinity().unwrap_or_default();
        let usable_cpus = match &online_cpus {
            Some(online) => affinity
                .iter()
                .copied()
                .filter(|cpu| online.contains(cpu))
                .collect(),
            None => affinity,
        };
        let cpuset_cpus = read_cpuset();
        let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
        let allowed_cpus = allowed_of(&status).unwrap_or_else(|| usable_cpus.clone());
        let isolated_cpus = fs::read_to_string("/sys/devices/system/cpu/isolated")
            .ok()
            .and_then(|s| parse_cpu_list(&s).ok())
            .unwrap_or_default();
        let effective_caps = parse_cap_eff(&status).unwrap_or(0);
        HostInfo {
            uname,
            preempt_rt,
            usable_cpus,
            allowed_cpus,
            online_cpus,
            cpuset_cpus,
            isolated_cpus,
            cap_sys_nice: effective_caps & (1 << CAP_SYS_NICE) != 0,
            cap_ipc_lock: effective_caps & (1 << CAP_IPC_LOCK) != 0,
            rtprio_limit: sys::rtprio_limit().ok().flatten(),
            memlock_limit: sys::memlock_limit().ok().flatten(),
            sched_rt_runtime_us: fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
            clock_resolution_ns: sys::clock_resolution_ns().ok(),
        }
    }

    /// The highest real-time priority this process may set: any with
    /// CAP_SYS_NICE, else what RLIMIT_RTPRIO allows.
    pub fn max_rt_priority(&self) -> u64 {
        if self.cap_sys_nice {
            99
        } else {
            self.rtprio_limit.map_or(99, |limit| limit.min(99))
        }
    }

    /// Whether `mlockall(MCL_FUTURE)` can be relied on: with a finite
    /// RLIMIT_MEMLOCK and no CAP_IPC_LOCK, the call itself may succeed and
    /// every later allocation past the limit then fails, which would take
    /// the process down mid-run.
    pub fn memory_lock_is_safe(&self) -> bool {
        self.cap_ipc_lock || self.memlock_limit.is_none()
    }

    /// What the engine needs to know of the process's privileges.
    pub fn rt_limits(&self) -> RtLimits {
        RtLimits {
            memory_lock_is_safe: self.memory_lock_is_safe(),
            memlock_limit: self.memlock_limit,
            rtprio_limit: self.rtprio_limit,
        }
    }

    /// The same summary as `/sys/kernel/realtime` gives, for cyclictest's
    /// `sysinfo.realtime` field.
    pub fn realtime_flag(&self) -> u8 {
        u8::from(self.preempt_rt)
    }
}

/// The CPUs of this process's cpuset cgroup now (`cpuset_of`), where
/// readable.
pub fn read_cpuset() -> Option<Vec<usize>> {
    fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|cgroups| cpuset_of(&cgroups, |path| fs::read_to_string(path).ok()))
}

/// The CPUs usable now out of `allowed` (the affinity mask at start,
/// offline CPUs included): those online and, where the cgroup has a
/// cpuset, in it. `None` when the online list cannot be read. Reads
/// sysfs and cgroupfs: not for a thread that must not wait. Returns the
/// online list it read too: the one the usable CPUs are of, which may
/// differ from one read a moment before (a hotplug storm).
pub fn usable_now(allowed: &[usize]) -> Option<(Vec<usize>, Vec<usize>)> {
    let cpuset = read_cpuset();
    let online = sys::online_cpus()?;
    let usable = usable_of(&online, allowed, cpuset.as_deref());
    Some((online, usable))
}

/// `usable_now` from what it reads.
fn usable_of(online: &[usize], allowed: &[usize], cpuset: Option<&[usize]>) -> Vec<usize> {
    online
        .iter()
        .copied()
        .filter(|cpu| allowed.contains(cpu) && cpuset.is_none_or(|set| set.contains(cpu)))
        .collect()
}

/// `Cpus_allowed_list:` of `/proc/self/status`.
pub(crate) fn allowed_of(status: &str) -> Option<Vec<usize>> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .and_then(|list| parse_cpu_list(list.trim()).ok())
}

/// The CPUs of the cpuset cgroup that `/proc/self/cgroup` (`cgroups`)
/// names, read with `read`: cgroup v2's `cpuset.cpus.effective`, else v1's
/// `cpuset.effective_cpus`, from the process's own cgroup or, where that
/// file is absent (the controller not enabled there), the nearest ancestor
/// that has it. `None` when no level can be read.
pub(crate) fn cpuset_of(
    cgroups: &str,
    read: impl Fn(&str) -> Option<String>,
) -> Option<Vec<usize>> {
    // Lines are `id:controllers:path`; v2's is `0::path`.
    let mut candidates: Vec<(&str, &str)> = Vec::new();
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            candidates.push(("/sys/fs/cgroup", path));
        } else if controllers.split(',').any(|c| c == "cpuset") {
            candidates.push(("/sys/fs/cgroup/cpuset", path));
        }
    }
    for (root, path) in candidates {
        let file = if root.ends_with("/cpuset") {
            "cpuset.effective_cpus"
        } else {
            "cpuset.cpus.effective"
        };
        let mut dir = path.trim_end_matches('/').to_string();
        loop {
            if let Some(list) = read(&format!("{root}{dir}/{file}"))
                && let Ok(cpus) = parse_cpu_list(&list)
                && !cpus.is_empty()
            {
                return Some(cpus);
            }
            match dir.rfind('/') {
                Some(cut) => dir.truncate(cut),
                None => break,
            }
        }
    }
    None
}

/// Parses the `CapEff:` line of `/proc/self/status` (hex bit mask).
fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_usable_now_are_online_allowed_and_in_the_cpuset() {
        let status = "Name:\tlatencyd\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,6\n";
        assert_eq!(allowed_of(status), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(allowed_of("Name:\tx\n"), None);
        let allowed = [0, 1, 2, 3, 6];
        assert_eq!(
            usable_of(&[0, 1, 2, 6, 7], &allowed, None),
            vec![0, 1, 2, 6]
        );
        assert_eq!(
            usable_of(&[0, 1, 2, 6, 7], &allowed, Some(&[1, 6])),
            vec![1, 6]
        );
    }

    #[test]
    fn parses_effective_capabilities() {
        let status = "Name:\tlatencyd\nCapInh:\t0000000000000000\nCapEff:\t0000000000804000\n";
        let caps = parse_cap_eff(status).unwrap();
        assert!(caps & (1 << CAP_SYS_NICE) != 0);
        assert!(caps & (1 << CAP_IPC_LOCK) != 0);
        assert_eq!(parse_cap_eff("Name:\tx\n"), None);
        assert_eq!(parse_cap_eff("CapEff:\tzz\n"), None);
    }

    #[test]
    fn the_cpuset_is_read_from_the_nearest_cgroup_that_has_one() {
        let files = |path: &str| match path {
            "/sys/fs/cgroup/kubepods.slice/cpuset.cpus.effective" => Some("0-1,4-7\n".to_string()),
            "/sys/fs/cgroup/cpuset/docker/abc/cpuset.effective_cpus" => Some("2-3\n".to_string()),
            "/sys/fs/cgroup/cpuset.cpus.effective" => Some("0-7\n".to_string()),
            _ => None,
        };
        // v2: the pod's own cgroup lacks the file; its parent has it.
        assert_eq!(
            cpuset_of("0::/kubepods.slice/pod1/cri-x.scope\n", files),
            Some(vec![0, 1, 4, 5, 6, 7])
        );
        // v2 at the root of a cgroup namespace.
        assert_eq!(cpuset_of("0::/\n", files), Some((0..8).collect()));
        // v1: the cpuset hierarchy's line.
        let v1 = "12:memory:/docker/abc\n3:cpuset,cpu:/docker/abc\n";
        assert_eq!(cpuset_of(v1, files), Some(vec![2, 3]));
        // Nothing readable: unknown, not empty.
        assert_eq!(cpuset_of("0::/x\n", |_| None), None);
        assert_eq!(cpuset_of("garbage", files), None);
    }

    #[test]
    fn detection_finds_usable_cpus() {
        let host = HostInfo::detect();
        assert!(!host.usable_cpus.is_empty());
        assert_eq!(host.uname.sysname, "Linux");
        assert!(host.max_rt_priority() <= 99);
    }
}
