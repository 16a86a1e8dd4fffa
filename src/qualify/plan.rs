//! What a qualification will do: the profile (a ready one or a file),
//! the options and cnf-tests' environment variables read into phases,
//! each with its CPUs, length and maximum, and where each came from.
//!
//! Precedence, most specific first, so that an OpenShift user switches
//! by changing the command: an option over the environment over the
//! profile; at each of the three, a phase's own maximum over the shared
//! one (`--hwlat-maximum` over `--maximum-latency`,
//! `HWLATDETECT_MAXIMUM_LATENCY` over `MAXIMUM_LATENCY`, `[hwlat]
//! maximum_us` over `maximum_latency_us`).

use super::profile::{FactLevels, Profile, RunWhen, Section};
use crate::cli::QualifyArgs;
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::units::{NS_PER_SEC, parse_duration_ns};

/// The kind of a phase and the tool whose measurement it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Hwlat,
    Idle,
    Loaded(String),
    Timerlat,
    Busypoll,
}

impl Kind {
    /// The tool that measures the same thing, as reports name it.
    pub fn tool(&self) -> &'static str {
        match self {
            Kind::Hwlat => "hwlatdetect",
            Kind::Idle | Kind::Loaded(_) => "cyclictest",
            Kind::Timerlat => "timerlat",
            Kind::Busypoll => "oslat",
        }
    }
}

/// A maximum and where it came from (an option, a variable, the profile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Threshold {
    pub us: u64,
    pub from: String,
}

#[derive(Debug, Clone)]
pub struct PhasePlan {
    pub name: String,
    pub kind: Kind,
    pub when: RunWhen,
    pub runtime_s: u64,
    pub maximum: Option<Threshold>,
    pub cpus: Vec<usize>,
    /// Busy-poll: where oslat's main thread waits.
    pub main_cpu: Option<usize>,
    pub priority: i32,
    pub interval_us: u64,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub profile: String,
    pub description: String,
    pub cpus: Vec<usize>,
    pub cpus_from: String,
    pub levels: FactLevels,
    pub phases: Vec<PhasePlan>,
    pub notes: Vec<String>,
}

/// The host's CPUs as the plan needs them.
pub struct HostCpus<'a> {
    pub usable: &'a [usize],
    pub isolated: &'a [usize],
}

/// Reads a maximum in µs: a whole number of microseconds.
fn micros(value: &str, what: &str) -> Result<u64, String> {
    value.trim().parse::<u64>().map_err(|_| {
        format!("{what} {value:?}: give the maximum as a whole number of microseconds (e.g. 20)")
    })
}

/// A length: a bare number is seconds; at least one second.
fn seconds(value: &str, what: &str) -> Result<u64, String> {
    let ns = parse_duration_ns(value, Some(NS_PER_SEC)).map_err(|e| format!("{what}: {e}"))?;
    if ns < NS_PER_SEC || ns % NS_PER_SEC != 0 {
        return Err(format!(
            "{what} {value:?}: give whole seconds, at least 1s (e.g. 300, 5m)"
        ));
    }
    Ok(ns / NS_PER_SEC)
}

/// The reader of the environment (the process's, or a test's).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn env_value(env: Env, name: &str) -> Option<String> {
    env(name).filter(|v| !v.trim().is_empty())
}

/// A CPU list that must name usable CPUs.
fn cpus_of(list: &str, what: &str, usable: &[usize]) -> Result<Vec<usize>, String> {
    let cpus = parse_cpu_list(list).map_err(|e| format!("{what} {list:?}: {e}"))?;
    if let Some(cpu) = cpus.iter().find(|c| !usable.contains(c)) {
        return Err(format!(
            "{what} {list:?}: CPU {cpu} is not online or not ours to use (usable: {})",
            format_cpu_list(usable)
        ));
    }
    if cpus.is_empty() {
        return Err(format!("{what} {list:?}: names no CPU"));
    }
    Ok(cpus)
}

impl Plan {
    pub fn resolve(args: &QualifyArgs, env: Env, host: &HostCpus) -> Result<Plan, String> {
        let (name, profile) = Profile::load(args.profile.as_deref().unwrap_or("cnf-tests"))?;
        let mut notes = Vec::new();
        let (cpus, cpus_from) = measured_cpus(args, env, &profile, host, &mut notes)?;
        let b = Builder::new(args, env, &profile, &cpus)?;
        let mut phases = vec![
            b.phase(Kind::Hwlat, &profile.hwlat, &args.hwlat_maximum)?,
            b.phase(Kind::Idle, &profile.idle, &args.cyclictest_maximum)?,
        ];
        let loads: Vec<String> = match &args.load {
            Some(list) if list == "none" => Vec::new(),
            Some(list) => list.split(',').map(|p| p.trim().to_string()).collect(),
            None => profile.loaded.profiles.clone().unwrap_or_default(),
        };
        for load in loads {
            crate::load::Profile::parse(&load)
                .map_err(|e| format!("load profile {load:?}: {e}"))?;
            let kind = Kind::Loaded(load);
            let mut phase = b.phase(kind, &profile.loaded, &args.cyclictest_maximum)?;
            phase.when = RunWhen::Always;
            phases.push(phase);
        }
        phases.push(b.phase(Kind::Timerlat, &profile.timerlat, &args.timerlat_maximum)?);
        let section = &profile.busypoll;
        let mut busypoll = b.phase(Kind::Busypoll, section, &args.oslat_maximum)?;
        busypoll.priority = section.priority.unwrap_or(0);
        if busypoll.when != RunWhen::Never {
            let (poll, main) = poll_cpus(args, section, &cpus, host, &mut notes)?;
            busypoll.cpus = poll;
            busypoll.main_cpu = Some(main);
        }
        phases.push(busypoll);
        phases.retain(|p| p.when != RunWhen::Never);
        if profile.require_thresholds
            && let Some(p) = phases.iter().find(|p| p.maximum.is_none())
        {
            return Err(format!(
                "profile {name} needs a maximum for every phase and {} has none: give \
                 --maximum-latency (or the phase's own option), or MAXIMUM_LATENCY",
                p.name
            ));
        }
        Ok(Plan {
            description: profile.description.clone().unwrap_or_default(),
            profile: name,
            cpus,
            cpus_from,
            levels: profile.facts,
            phases,
            notes,
        })
    }
}

/// What every phase's plan is read against: the lengths and the shared
/// maxima at each level, and the measured CPUs.
struct Builder<'a> {
    env: Env<'a>,
    shared: Shared,
    /// `--runtime` or `LATENCY_TEST_RUNTIME`: every phase's length.
    overall_s: Option<u64>,
    profile_s: u64,
    cpus: &'a [usize],
}

impl<'a> Builder<'a> {
    fn new(
        args: &QualifyArgs,
        env: Env<'a>,
        profile: &Profile,
        cpus: &'a [usize],
    ) -> Result<Builder<'a>, String> {
        let overall_s = match (&args.runtime, env_value(env, "LATENCY_TEST_RUNTIME")) {
            (Some(r), _) => Some(seconds(r, "--runtime")?),
            (None, Some(r)) => Some(seconds(&r, "LATENCY_TEST_RUNTIME")?),
            (None, None) => None,
        };
        let shared = Shared {
            option: (args.maximum_latency.as_deref())
                .map(|v| micros(v, "--maximum-latency"))
                .transpose()?,
            env: env_value(env, "MAXIMUM_LATENCY")
                .map(|v| micros(&v, "MAXIMUM_LATENCY"))
                .transpose()?,
            profile: profile.maximum_latency_us,
        };
        let profile_s = (profile.runtime.as_deref())
            .map(|r| seconds(r, "profile runtime"))
            .transpose()?
            .unwrap_or(300);
        Ok(Builder {
            env,
            shared,
            overall_s,
            profile_s,
            cpus,
        })
    }

    /// A phase as its section, its own option and its tool's variable
    /// and the shared maxima say.
    fn phase(
        &self,
        kind: Kind,
        section: &Section,
        option: &Option<String>,
    ) -> Result<PhasePlan, String> {
        let (key, var) = match &kind {
            Kind::Hwlat => ("hwlat", "HWLATDETECT_MAXIMUM_LATENCY"),
            Kind::Idle => ("idle", "CYCLICTEST_MAXIMUM_LATENCY"),
            Kind::Loaded(_) => ("loaded", "CYCLICTEST_MAXIMUM_LATENCY"),
            Kind::Timerlat => ("timerlat", ""),
            Kind::Busypoll => ("busypoll", "OSLAT_MAXIMUM_LATENCY"),
        };
        let runtime_s = match (self.overall_s, &section.runtime) {
            (Some(s), _) => s,
            (None, Some(r)) => seconds(r, &format!("profile [{key}] runtime"))?,
            (None, None) => self.profile_s,
        };
        let maximum = self.shared.pick(section, key, option, var, self.env)?;
        Ok(PhasePlan {
            name: match &kind {
                Kind::Loaded(load) => format!("loaded-{load}"),
                _ => key.to_string(),
            },
            kind,
            when: section.run.unwrap_or(RunWhen::Never),
            runtime_s,
            maximum,
            cpus: self.cpus.to_vec(),
            main_cpu: None,
            priority: section.priority.unwrap_or(95),
            interval_us: section.interval_us.unwrap_or(1000),
        })
    }
}

/// The shared maximum at each of the three levels.
struct Shared {
    option: Option<u64>,
    env: Option<u64>,
    profile: Option<u64>,
}

impl Shared {
    /// A phase's maximum by the precedence in the module doc.
    fn pick(
        &self,
        section: &Section,
        phase: &str,
        option: &Option<String>,
        var: &str,
        env: Env,
    ) -> Result<Option<Threshold>, String> {
        let flag = match phase {
            "hwlat" => "--hwlat-maximum",
            "busypoll" => "--oslat-maximum",
            "timerlat" => "--timerlat-maximum",
            _ => "--cyclictest-maximum",
        };
        let own_env = (!var.is_empty())
            .then(|| env_value(env, var))
            .flatten()
            .map(|v| micros(&v, var))
            .transpose()?;
        let candidates = [
            (
                option.as_deref().map(|v| micros(v, flag)).transpose()?,
                flag.to_string(),
            ),
            (self.option, "--maximum-latency".to_string()),
            (own_env, var.to_string()),
            (self.env, "MAXIMUM_LATENCY".to_string()),
            (section.maximum_us, format!("profile [{phase}] maximum_us")),
            (self.profile, "profile maximum_latency_us".to_string()),
        ];
        Ok(candidates
            .into_iter()
            .find_map(|(us, from)| us.map(|us| Threshold { us, from })))
    }
}

/// The measured CPUs: `--cpus`, else the profile's set cut to
/// `LATENCY_TEST_CPUS` CPUs (cnf-tests gives a count, not a list).
fn measured_cpus(
    args: &QualifyArgs,
    env: Env,
    profile: &Profile,
    host: &HostCpus,
    notes: &mut Vec<String>,
) -> Result<(Vec<usize>, String), String> {
    if let Some(list) = &args.cpus {
        return Ok((cpus_of(list, "--cpus", host.usable)?, "--cpus".into()));
    }
    let spec = profile.cpus.as_deref().unwrap_or("isolated");
    let (mut cpus, mut from) = if spec == "isolated" {
        let isolated: Vec<usize> = host
            .isolated
            .iter()
            .copied()
            .filter(|c| host.usable.contains(c))
            .collect();
        if isolated.is_empty() {
            notes.push("no CPU is isolated: every online CPU is measured".into());
            (
                host.usable.to_vec(),
                "every online CPU (none isolated)".to_string(),
            )
        } else {
            (isolated, "the isolated CPUs".to_string())
        }
    } else {
        (
            cpus_of(spec, "profile cpus", host.usable)?,
            "profile cpus".to_string(),
        )
    };
    if let Some(count) = env_value(env, "LATENCY_TEST_CPUS") {
        let n: usize = count.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| {
            format!("LATENCY_TEST_CPUS {count:?}: give how many CPUs to measure (e.g. 4), as cnf-tests does")
        })?;
        if n > cpus.len() {
            return Err(format!(
                "LATENCY_TEST_CPUS {n}: only {} CPUs to choose from ({}, {from})",
                cpus.len(),
                format_cpu_list(&cpus)
            ));
        }
        cpus.truncate(n);
        from = format!("the first {n} of {from} (LATENCY_TEST_CPUS)");
    }
    Ok((cpus, from))
}

/// The busy-poll CPUs and the CPU oslat's main thread waits on: the
/// lowest usable CPU not polled. Polling every CPU leaves it nowhere.
fn poll_cpus(
    args: &QualifyArgs,
    section: &Section,
    measured: &[usize],
    host: &HostCpus,
    notes: &mut Vec<String>,
) -> Result<(Vec<usize>, usize), String> {
    let asked = match (&args.poll_cpus, &section.cpus) {
        (Some(list), _) => Some(cpus_of(list, "--poll-cpus", host.usable)?),
        (None, Some(list)) => Some(cpus_of(list, "profile [busypoll] cpus", host.usable)?),
        (None, None) => None,
    };
    if let Some(poll) = asked {
        let main = host
            .usable
            .iter()
            .copied()
            .find(|c| !poll.contains(c))
            .ok_or_else(|| {
                "--poll-cpus: every usable CPU is polled; leave one for oslat's main thread"
                    .to_string()
            })?;
        return Ok((poll, main));
    }
    match host.usable.iter().copied().find(|c| !measured.contains(c)) {
        Some(main) => Ok((measured.to_vec(), main)),
        None => {
            let main = measured[0];
            let poll: Vec<usize> = measured[1..].to_vec();
            if poll.is_empty() {
                return Err(format!(
                    "the busy-poll phase has no CPU to poll: CPU {main} is the only one and \
                     oslat's main thread needs it; give --poll-cpus or [busypoll] run = \"never\""
                ));
            }
            notes.push(format!(
                "busy-poll: CPU {main} is left for oslat's main thread (every CPU is measured)"
            ));
            Ok((poll, main))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const USABLE: [usize; 4] = [0, 1, 2, 3];

    fn resolve(
        args: &QualifyArgs,
        vars: &[(&str, &str)],
        isolated: &[usize],
    ) -> Result<Plan, String> {
        let env = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        };
        let host = HostCpus {
            usable: &USABLE,
            isolated,
        };
        Plan::resolve(args, &env, &host)
    }

    fn maximum(plan: &Plan, phase: &str) -> Option<(u64, String)> {
        let p = plan.phases.iter().find(|p| p.name == phase)?;
        p.maximum.as_ref().map(|m| (m.us, m.from.clone()))
    }

    #[test]
    fn cnf_tests_defaults_are_cnf_tests_own() {
        let plan = resolve(&QualifyArgs::default(), &[], &[2, 3]).unwrap();
        let names: Vec<&str> = plan.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["hwlat", "idle", "busypoll"]);
        assert_eq!(plan.cpus, [2, 3]);
        assert!(plan.phases.iter().all(|p| p.runtime_s == 300));
        assert_eq!(
            maximum(&plan, "hwlat"),
            Some((20, "profile [hwlat] maximum_us".into()))
        );
        assert_eq!(maximum(&plan, "idle"), None);
        let poll = plan.phases.iter().find(|p| p.name == "busypoll").unwrap();
        assert_eq!((poll.cpus.clone(), poll.main_cpu), (vec![2, 3], Some(0)));
    }

    #[test]
    fn a_tools_own_variable_beats_the_shared_one_and_an_option_beats_both() {
        let vars = [
            ("MAXIMUM_LATENCY", "50"),
            ("OSLAT_MAXIMUM_LATENCY", "7"),
            ("HWLATDETECT_MAXIMUM_LATENCY", ""),
            ("LATENCY_TEST_RUNTIME", "60"),
            ("LATENCY_TEST_CPUS", "1"),
        ];
        let plan = resolve(&QualifyArgs::default(), &vars, &[2, 3]).unwrap();
        // An empty variable is unset; the shared one beats the profile's 20.
        assert_eq!(
            maximum(&plan, "hwlat"),
            Some((50, "MAXIMUM_LATENCY".into()))
        );
        assert_eq!(maximum(&plan, "idle"), Some((50, "MAXIMUM_LATENCY".into())));
        assert_eq!(
            maximum(&plan, "busypoll"),
            Some((7, "OSLAT_MAXIMUM_LATENCY".into()))
        );
        assert_eq!(plan.cpus, [2]);
        assert!(plan.phases.iter().all(|p| p.runtime_s == 60));
        let args = QualifyArgs {
            maximum_latency: Some("30".into()),
            oslat_maximum: Some("9".into()),
            runtime: Some("2m".into()),
            ..QualifyArgs::default()
        };
        let plan = resolve(&args, &vars, &[2, 3]).unwrap();
        assert_eq!(
            maximum(&plan, "hwlat"),
            Some((30, "--maximum-latency".into()))
        );
        assert_eq!(
            maximum(&plan, "busypoll"),
            Some((9, "--oslat-maximum".into()))
        );
        assert!(plan.phases.iter().all(|p| p.runtime_s == 120));
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        type Case<'a> = (&'a [(&'a str, &'a str)], QualifyArgs, &'a str);
        let cases: [Case; 6] = [
            (
                &[("MAXIMUM_LATENCY", "-1")],
                QualifyArgs::default(),
                "MAXIMUM_LATENCY \"-1\"",
            ),
            (
                &[("LATENCY_TEST_CPUS", "0-3")],
                QualifyArgs::default(),
                "LATENCY_TEST_CPUS \"0-3\"",
            ),
            (
                &[("LATENCY_TEST_CPUS", "3")],
                QualifyArgs::default(),
                "only 2 CPUs",
            ),
            (
                &[("LATENCY_TEST_RUNTIME", "1.5")],
                QualifyArgs::default(),
                "LATENCY_TEST_RUNTIME",
            ),
            (
                &[],
                QualifyArgs {
                    cpus: Some("7".into()),
                    ..QualifyArgs::default()
                },
                "CPU 7 is not online",
            ),
            (
                &[],
                QualifyArgs {
                    profile: Some("certification-24h".into()),
                    ..QualifyArgs::default()
                },
                "needs a maximum for every phase and idle has none",
            ),
        ];
        for (vars, args, want) in cases {
            let err = resolve(&args, vars, &[2, 3]).unwrap_err();
            assert!(err.contains(want), "{err:?} lacks {want:?}");
        }
    }

    #[test]
    fn without_isolated_cpus_every_cpu_is_measured_and_one_left_for_olats_main_thread() {
        let plan = resolve(&QualifyArgs::default(), &[], &[]).unwrap();
        assert_eq!(plan.cpus, USABLE);
        let poll = plan.phases.iter().find(|p| p.name == "busypoll").unwrap();
        assert_eq!((poll.cpus.clone(), poll.main_cpu), (vec![1, 2, 3], Some(0)));
        assert!(plan.notes.iter().any(|n| n.contains("no CPU is isolated")));
        let args = QualifyArgs {
            poll_cpus: Some("0-3".into()),
            ..QualifyArgs::default()
        };
        let err = resolve(&args, &[], &[]).unwrap_err();
        assert!(err.contains("leave one for oslat's main thread"), "{err}");
    }

    #[test]
    fn loaded_phases_come_from_the_list_in_order() {
        let args = QualifyArgs {
            profile: Some("smoke".into()),
            load: Some("cpu,io".into()),
            ..QualifyArgs::default()
        };
        let plan = resolve(&args, &[], &[]).unwrap();
        let names: Vec<&str> = plan.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "hwlat",
                "idle",
                "loaded-cpu",
                "loaded-io",
                "timerlat",
                "busypoll"
            ]
        );
        let bad = QualifyArgs {
            load: Some("cpu,,io".into()),
            ..args.clone()
        };
        assert!(
            resolve(&bad, &[], &[])
                .unwrap_err()
                .contains("load profile \"\"")
        );
        let args = QualifyArgs {
            load: Some("none".into()),
            ..args
        };
        let plan = resolve(&args, &[], &[]).unwrap();
        assert!(
            !plan
                .phases
                .iter()
                .any(|p| matches!(p.kind, Kind::Loaded(_)))
        );
    }
}
