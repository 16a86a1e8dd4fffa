//! The sampling choices both front ends make, made in one place: the
//! default real-time priority, the priority range of a policy, and which
//! CPUs a selection means on this host. `measure` (command-line flags) and
//! `config` (the daemon's `[measure]` and `[export]` sections) both check
//! their values here, so they accept the same things and refuse them with
//! the same words.

use std::fmt;

use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::host::HostInfo;
use crate::rt::sys::Policy;

/// The default real-time priority: high enough to preempt ordinary RT
/// work, below the kernel's own per-CPU threads at 99.
pub const DEFAULT_RT_PRIORITY: i32 = 80;

/// The priority used when none is given: `DEFAULT_RT_PRIORITY` for the
/// real-time policies, 0 (the only one it accepts) for `other`.
pub fn default_priority(policy: Policy) -> i32 {
    if policy.is_realtime() {
        DEFAULT_RT_PRIORITY
    } else {
        0
    }
}

/// `priority` if `policy` accepts it, else why not.
pub fn check_priority(policy: Policy, priority: i64) -> Result<i32, String> {
    let (lowest, highest) = policy.priority_range();
    if (i64::from(lowest)..=i64::from(highest)).contains(&priority) {
        // Within an i32 range, so the conversion is exact.
        Ok(priority as i32)
    } else {
        Err(format!(
            "{priority} is outside {lowest}..={highest}, the range of the {} policy",
            policy.name()
        ))
    }
}

/// A set of CPUs as the user writes it: `all`, or a kernel CPU list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSelection {
    /// Every CPU that is online and in the process's affinity mask.
    All,
    List(Vec<usize>),
}

impl CpuSelection {
    /// Reads `all` or a CPU list such as `0-3,6`.
    pub fn parse(text: &str) -> Result<CpuSelection, String> {
        if text.trim() == "all" {
            return Ok(CpuSelection::All);
        }
        parse_cpu_list(text)
            .map(CpuSelection::List)
            .map_err(|e| format!("{e} (or write \"all\")"))
    }

    /// The CPUs this selection means on `host`, each of them online and in
    /// the process's affinity mask, at least one.
    pub fn resolve(&self, host: &HostInfo) -> Result<Vec<usize>, String> {
        let usable = &host.usable_cpus;
        let cpus = match self {
            CpuSelection::All => usable.clone(),
            CpuSelection::List(cpus) => {
                if let Some(bad) = cpus.iter().find(|cpu| !usable.contains(cpu)) {
                    return Err(format!(
                        "CPU {bad} is offline, absent or outside this process's affinity; \
                         usable CPUs are {}",
                        format_cpu_list(usable)
                    ));
                }
                cpus.clone()
            }
        };
        if cpus.is_empty() {
            return Err(
                "no usable CPU found (none is both online and in this process's \
                        affinity mask)"
                    .to_string(),
            );
        }
        Ok(cpus)
    }
}

impl CpuSelection {
    /// The CPUs the daemon keeps a sampler slot for: the selection's CPUs
    /// usable now and, for a list, its CPUs that are offline now but in
    /// the affinity mask (`HostInfo::allowed_cpus`), sampled once they
    /// come online. A hotplug storm at start is no configuration error.
    /// (`All` also gains CPUs that come online later: the collector adds
    /// them.)
    pub fn resolve_daemon(&self, host: &HostInfo) -> Result<Vec<usize>, String> {
        let CpuSelection::List(listed) = self else {
            return self.resolve(host);
        };
        let online = host.online_cpus.as_deref().unwrap_or(&host.usable_cpus);
        for &cpu in listed {
            let later = !online.contains(&cpu) && host.allowed_cpus.contains(&cpu);
            if !host.usable_cpus.contains(&cpu) && !later {
                return Err(format!(
                    "CPU {cpu} is absent or outside this process's affinity; usable CPUs are {}",
                    format_cpu_list(&host.usable_cpus)
                ));
            }
        }
        if listed.is_empty() {
            return Err("no CPU listed".to_string());
        }
        Ok(listed.clone())
    }
}

/// Why an online CPU has no sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unmeasured {
    /// Outside the process's cgroup cpuset (a container's `cpuset.cpus`;
    /// the kubelet's static CPU manager keeps exclusive CPUs out of
    /// shared-pool pods).
    Cpuset,
    /// Isolated at boot (`isolcpus=`) and outside the affinity mask the
    /// process inherited.
    Isolated,
    /// Outside the process's affinity mask (`taskset`, systemd's
    /// `CPUAffinity=`).
    Affinity,
    /// Usable, but not in `measure.cpus` / `--cpus`.
    Config,
}

impl Unmeasured {
    /// The value of the `reason` label and of the JSON field.
    pub fn name(self) -> &'static str {
        match self {
            Unmeasured::Cpuset => "cpuset",
            Unmeasured::Isolated => "isolated",
            Unmeasured::Affinity => "affinity",
            Unmeasured::Config => "config",
        }
    }

    /// What it means and what to do about it, for people.
    pub fn explain(self) -> &'static str {
        match self {
            Unmeasured::Cpuset => {
                "outside this process's cgroup cpuset; in Kubernetes with the static CPU \
                 manager, exclusive CPUs never enter a shared pod's cpuset: install latencyd on \
                 the host (systemd) to measure them"
            }
            Unmeasured::Isolated => {
                "isolated at boot (isolcpus=) and outside the inherited affinity mask; set \
                 CPUAffinity= in the unit (or taskset) to include it"
            }
            Unmeasured::Affinity => {
                "outside this process's affinity mask; widen CPUAffinity= in the unit (or \
                 taskset) to include it"
            }
            Unmeasured::Config => "not in measure.cpus (or --cpus)",
        }
    }
}

/// The CPUs online on `host` that have no sampler (not in `measured`),
/// each with why, in CPU order. Empty where the online CPUs are unknown.
pub fn unmeasured_cpus(host: &HostInfo, measured: &[usize]) -> Vec<(usize, Unmeasured)> {
    let Some(online) = &host.online_cpus else {
        return Vec::new();
    };
    online
        .iter()
        .filter(|cpu| !measured.contains(cpu))
        .map(|&cpu| {
            let outside_cpuset = host
                .cpuset_cpus
                .as_ref()
                .is_some_and(|cpuset| !cpuset.contains(&cpu));
            let reason = if outside_cpuset {
                Unmeasured::Cpuset
            } else if !host.usable_cpus.contains(&cpu) {
                if host.isolated_cpus.contains(&cpu) {
                    Unmeasured::Isolated
                } else {
                    Unmeasured::Affinity
                }
            } else {
                Unmeasured::Config
            };
            (cpu, reason)
        })
        .collect()
}

impl fmt::Display for CpuSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuSelection::All => f.write_str("all"),
            CpuSelection::List(cpus) => f.write_str(&format_cpu_list(cpus)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(usable: &[usize]) -> HostInfo {
        let mut host = HostInfo::detect();
        host.usable_cpus = usable.to_vec();
        host
    }

    #[test]
    fn the_daemon_keeps_listed_cpus_that_are_offline_now_for_later() {
        let mut host = host(&[0, 1]);
        host.online_cpus = Some(vec![0, 1, 3]);
        host.allowed_cpus = vec![0, 1, 2, 3];
        let list = CpuSelection::List(vec![0, 2]);
        assert_eq!(
            list.resolve_daemon(&host),
            Ok(vec![0, 2]),
            "2 is offline, allowed"
        );
        let err = CpuSelection::List(vec![0, 3])
            .resolve_daemon(&host)
            .unwrap_err();
        assert!(
            err.contains("CPU 3 is absent or outside"),
            "online, not in the mask: {err}"
        );
        let err = CpuSelection::List(vec![7])
            .resolve_daemon(&host)
            .unwrap_err();
        assert!(err.contains("CPU 7"), "{err}");
        assert_eq!(CpuSelection::All.resolve_daemon(&host), Ok(vec![0, 1]));
        // measure keeps cyclictest's rule: listed CPUs must be usable now.
        assert!(list.resolve(&host).is_err());
    }

    #[test]
    fn priorities_are_checked_against_the_policy() {
        assert_eq!(check_priority(Policy::Fifo, 80), Ok(80));
        assert_eq!(
            check_priority(Policy::Fifo, 100),
            Err("100 is outside 1..=99, the range of the fifo policy".to_string())
        );
        assert!(check_priority(Policy::Other, 1).is_err());
        assert_eq!(default_priority(Policy::Other), 0);
        assert_eq!(default_priority(Policy::RoundRobin), DEFAULT_RT_PRIORITY);
    }

    #[test]
    fn every_online_cpu_without_a_sampler_is_named_with_its_reason() {
        let mut h = host(&[0, 1, 3]);
        h.online_cpus = Some((0..8).collect());
        h.cpuset_cpus = Some(vec![0, 1, 2, 3, 5]);
        h.isolated_cpus = vec![2, 6];
        // 1 by config; 2 isolated (in the cpuset, not in the mask); 4, 6, 7
        // outside the cpuset whatever else; 5 in the cpuset, not the mask.
        assert_eq!(
            unmeasured_cpus(&h, &[0, 3]),
            vec![
                (1, Unmeasured::Config),
                (2, Unmeasured::Isolated),
                (4, Unmeasured::Cpuset),
                (5, Unmeasured::Affinity),
                (6, Unmeasured::Cpuset),
                (7, Unmeasured::Cpuset),
            ]
        );
        // Without a readable cpuset, the mask decides.
        h.cpuset_cpus = None;
        assert_eq!(
            unmeasured_cpus(&h, &[0, 1, 3])[1],
            (4, Unmeasured::Affinity)
        );
        assert_eq!(
            unmeasured_cpus(&h, &[0, 1, 3])[0],
            (2, Unmeasured::Isolated)
        );
        // Unknown online CPUs: nothing claimed.
        h.online_cpus = None;
        assert!(unmeasured_cpus(&h, &[0]).is_empty());
    }

    #[test]
    fn a_selection_resolves_to_usable_cpus_or_says_which_is_not() {
        let h = host(&[0, 1, 3]);
        assert_eq!(CpuSelection::All.resolve(&h), Ok(vec![0, 1, 3]));
        assert_eq!(
            CpuSelection::parse("1,3").unwrap().resolve(&h),
            Ok(vec![1, 3])
        );
        let err = CpuSelection::parse("2").unwrap().resolve(&h).unwrap_err();
        assert!(err.starts_with("CPU 2 is offline") && err.ends_with("usable CPUs are 0-1,3"));
        assert!(CpuSelection::All.resolve(&host(&[])).is_err());
        assert!(
            CpuSelection::parse("x")
                .unwrap_err()
                .contains("or write \"all\"")
        );
    }
}
