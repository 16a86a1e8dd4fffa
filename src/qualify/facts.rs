//! The facts phase: what disqualifies a host before anything is measured
//! (not PREEMPT_RT, SMT on a measured CPU, a governor other than
//! performance, deep idle states, no isolation), each judged at the level
//! the profile gives it. The facts come from the host's fingerprint, the
//! same the daemon watches, so that the verdict and the dashboards name
//! them alike.

use super::profile::{FactLevels, Level};
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::host::{CpuTopology, Fingerprint};

/// One judged fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub level: Level,
    pub passed: bool,
    pub detail: String,
}

/// Every fact the levels do not ignore, judged for `cpus`.
pub fn check(
    fp: &Fingerprint,
    topology: &[CpuTopology],
    cpus: &[usize],
    levels: &FactLevels,
) -> Vec<Check> {
    let judged = [
        ("preempt_rt", levels.preempt_rt, preempt_rt(fp)),
        ("smt", levels.smt, smt(topology, cpus)),
        ("governor", levels.governor, governor(fp, cpus)),
        (
            "idle_states",
            levels.idle_states,
            idle_states(fp, cpus, levels.deepest_idle_us),
        ),
        ("isolation", levels.isolation, isolation(fp, cpus)),
    ];
    judged
        .into_iter()
        .filter(|(_, level, _)| *level != Level::Ignore)
        .map(|(name, level, (passed, detail))| Check {
            name,
            level,
            passed,
            detail,
        })
        .collect()
}

fn preempt_rt(fp: &Fingerprint) -> (bool, String) {
    match fp.value("kernel.preempt") {
        Some("rt") => (true, "kernel.preempt = rt".into()),
        Some(other) => (
            false,
            format!("kernel.preempt = {other}: the kernel is not PREEMPT_RT"),
        ),
        None => (
            false,
            format!(
                "kernel.preempt is {}",
                fp.get("kernel.preempt")
                    .map_or("unknown".into(), |f| f.describe())
            ),
        ),
    }
}

fn smt(topology: &[CpuTopology], cpus: &[usize]) -> (bool, String) {
    let shared: Vec<String> = topology
        .iter()
        .filter(|t| cpus.contains(&t.cpu))
        .filter_map(|t| {
            let siblings = parse_cpu_list(t.smt_siblings.as_deref()?).ok()?;
            let others: Vec<usize> = siblings.into_iter().filter(|&c| c != t.cpu).collect();
            (!others.is_empty()).then(|| {
                format!(
                    "CPU {} shares its core with {}",
                    t.cpu,
                    format_cpu_list(&others)
                )
            })
        })
        .collect();
    if shared.is_empty() {
        (true, "no measured CPU shares its core".into())
    } else {
        (false, shared.join("; "))
    }
}

fn governor(fp: &Fingerprint, cpus: &[usize]) -> (bool, String) {
    let mut other = Vec::new();
    let mut absent = None;
    for cpu in cpus {
        match fp.get(&format!("cpufreq.policy[cpu{cpu}]")) {
            Some(f) => match f.value() {
                Some(v) if v.split(' ').next() == Some("performance") => {}
                Some(v) => other.push(format!("CPU {cpu}: {v}")),
                None => absent = Some(f.describe()),
            },
            None => absent = Some("not read".into()),
        }
    }
    match (other.is_empty(), absent) {
        (true, None) => (
            true,
            "every measured CPU runs the performance governor".into(),
        ),
        (true, Some(why)) => (true, format!("no frequency scaling to govern: {why}")),
        (false, _) => (
            false,
            format!("not the performance governor: {}", other.join("; ")),
        ),
    }
}

/// Enabled idle states slower to leave than `deepest_us`, from the
/// fingerprint's `NAME LATENCYus, ...` per CPU.
fn idle_states(fp: &Fingerprint, cpus: &[usize], deepest_us: u64) -> (bool, String) {
    let mut deep = Vec::new();
    for cpu in cpus {
        let Some(states) = fp.value(&format!("cpuidle.states[cpu{cpu}]")) else {
            continue;
        };
        for state in states.split(", ") {
            let latency = state
                .rsplit_once(' ')
                .and_then(|(_, l)| l.strip_suffix("us"))
                .and_then(|l| l.parse::<u64>().ok());
            if let Some(us) = latency.filter(|&us| us > deepest_us) {
                deep.push(format!(
                    "CPU {cpu}: {} ({us} µs to leave)",
                    state.rsplit_once(' ').map_or(state, |s| s.0)
                ));
            }
        }
    }
    if deep.is_empty() {
        (
            true,
            format!("no enabled idle state takes over {deepest_us} µs to leave"),
        )
    } else {
        (
            false,
            format!(
                "idle states over {deepest_us} µs enabled: {}",
                deep.join("; ")
            ),
        )
    }
}

fn isolation(fp: &Fingerprint, cpus: &[usize]) -> (bool, String) {
    let list = |name: &str| {
        fp.value(name)
            .and_then(|v| parse_cpu_list(v).ok())
            .unwrap_or_default()
    };
    let isolated = list("cpus.isolated");
    let nohz = list("cpus.nohz_full");
    let not: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|c| !isolated.contains(c) && !nohz.contains(c))
        .collect();
    if not.is_empty() {
        (
            true,
            format!("CPUs {} are isolated or nohz_full", format_cpu_list(cpus)),
        )
    } else {
        (
            false,
            format!(
                "CPUs {} are neither isolated (isolcpus) nor nohz_full",
                format_cpu_list(&not)
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Fact;

    fn fingerprint(facts: &[(&str, &str)]) -> Fingerprint {
        let mut fp = Fingerprint::default();
        for (name, value) in facts {
            fp.insert(*name, Fact::known(*value));
        }
        fp
    }

    fn topology(cpu: usize, siblings: &str) -> CpuTopology {
        CpuTopology {
            cpu,
            package: Some(0),
            core: Some(cpu as i64),
            node: Some(0),
            smt_siblings: Some(siblings.into()),
        }
    }

    fn all(level: Level) -> FactLevels {
        FactLevels {
            preempt_rt: level,
            realtime: level,
            smt: level,
            governor: level,
            idle_states: level,
            deepest_idle_us: 10,
            isolation: level,
        }
    }

    #[test]
    fn a_tuned_rt_host_passes_every_check() {
        let fp = fingerprint(&[
            ("kernel.preempt", "rt"),
            ("cpufreq.policy[cpu2]", "performance 3000000-3000000 kHz"),
            ("cpuidle.states[cpu2]", "POLL 0us, C1 2us"),
            ("cpus.isolated", "2"),
        ]);
        let checks = check(&fp, &[topology(2, "2")], &[2], &all(Level::Fail));
        assert_eq!(checks.len(), 5);
        assert!(checks.iter().all(|c| c.passed), "{checks:#?}");
    }

    #[test]
    fn each_disqualifying_fact_is_named_with_its_cpu() {
        let fp = fingerprint(&[
            ("kernel.preempt", "full"),
            ("cpufreq.policy[cpu2]", "powersave 800000-3000000 kHz"),
            ("cpuidle.states[cpu2]", "POLL 0us, C1 2us, C6 133us"),
            ("cpus.isolated", ""),
            ("cpus.nohz_full", "3"),
        ]);
        let checks = check(
            &fp,
            &[topology(2, "2,6"), topology(3, "3")],
            &[2, 3],
            &all(Level::Fail),
        );
        let failed: Vec<(&str, &str)> = checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| (c.name, c.detail.as_str()))
            .collect();
        let want = [
            ("preempt_rt", "kernel.preempt = full"),
            ("smt", "CPU 2 shares its core with 6"),
            ("governor", "CPU 2: powersave"),
            ("idle_states", "CPU 2: C6 (133 µs to leave)"),
            ("isolation", "CPUs 2 are neither isolated"),
        ];
        assert_eq!(failed.len(), want.len(), "{failed:#?}");
        for ((name, detail), (want_name, want_detail)) in failed.iter().zip(want) {
            assert_eq!(*name, want_name);
            assert!(
                detail.contains(want_detail),
                "{detail:?} lacks {want_detail:?}"
            );
        }
    }

    #[test]
    fn an_ignored_fact_is_not_looked_at_and_no_cpufreq_is_nothing_to_govern() {
        let mut fp = fingerprint(&[("kernel.preempt", "none")]);
        fp.insert("cpufreq.policy[cpu0]", Fact::absent("no cpufreq driver"));
        let levels = FactLevels {
            preempt_rt: Level::Ignore,
            ..all(Level::Warn)
        };
        let checks = check(&fp, &[], &[0], &levels);
        assert!(!checks.iter().any(|c| c.name == "preempt_rt"));
        let governor = checks.iter().find(|c| c.name == "governor").unwrap();
        assert!(governor.passed && governor.detail.contains("no cpufreq driver"));
    }
}
