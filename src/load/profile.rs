//! The load profiles: names a person chooses by, each a set of command
//! lines for installed, well-kept generators (rt-tests' hackbench,
//! stress-ng), sized by the CPUs the load runs on.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::load::sys::prepare_child;

/// A named background load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Profile {
    Rteval,
    Cpu,
    Memory,
    Io,
    Network,
    Irq,
    All,
}

/// Every profile with what it runs, as `--load help` and the docs list them.
pub const PROFILES: [(Profile, &str); 7] = [
    (
        Profile::Rteval,
        "rteval's loads: hackbench -P per NUMA node, restarted as it ends, and a compile-like \
         CPU and memory load (stress-ng --cpu --vm)",
    ),
    (
        Profile::Cpu,
        "stress-ng --cpu, every method, one worker per CPU",
    ),
    (
        Profile::Memory,
        "stress-ng --vm (64 MiB each) and --memcpy, one worker each per CPU",
    ),
    (
        Profile::Io,
        "stress-ng --hdd (64 MiB each, in a private temporary directory), one worker per CPU",
    ),
    (
        Profile::Network,
        "stress-ng --sock and --udp over loopback, one worker each per CPU",
    ),
    (
        Profile::Irq,
        "stress-ng --timer (1 MHz high-resolution timers) and --signal, one worker each per CPU",
    ),
    (
        Profile::All,
        "hackbench and every stress-ng stressor above at once",
    ),
];

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Rteval => "rteval",
            Profile::Cpu => "cpu",
            Profile::Memory => "memory",
            Profile::Io => "io",
            Profile::Network => "network",
            Profile::Irq => "irq",
            Profile::All => "all",
        }
    }

    /// Reads a profile's name, or says which names there are.
    pub fn parse(text: &str) -> Result<Profile, String> {
        PROFILES
            .iter()
            .map(|(profile, _)| *profile)
            .find(|profile| profile.name() == text.trim())
            .ok_or_else(|| {
                format!(
                    "'{text}' is not a load profile; choose one of {}",
                    PROFILES
                        .iter()
                        .map(|(p, _)| p.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }

    /// The generators this profile runs on `cpus`, grouped into NUMA
    /// nodes by `node_of` (hackbench runs once per node, as rteval runs
    /// it). `scratch` is the load's private directory.
    pub fn generators(
        self,
        cpus: &[usize],
        node_of: impl Fn(usize) -> i32,
        scratch: &Path,
    ) -> Vec<Generator> {
        let n = cpus.len().max(1).to_string();
        let mut stressors: Vec<String> = Vec::new();
        let mut add = |words: &[&str]| stressors.extend(words.iter().map(|w| w.to_string()));
        let hackbench = matches!(self, Profile::Rteval | Profile::All);
        match self {
            // Not --fork: its children lead process groups of their own,
            // out of reach of the load's group kill.
            Profile::Rteval => add(&["--cpu", &n, "--vm", &n, "--vm-bytes", "64M"]),
            Profile::Cpu => add(&["--cpu", &n, "--cpu-method", "all"]),
            Profile::Memory => add(&["--vm", &n, "--vm-bytes", "64M", "--memcpy", &n]),
            Profile::Io => add(&["--hdd", &n, "--hdd-bytes", "64M"]),
            Profile::Network => add(&["--sock", &n, "--udp", &n]),
            Profile::Irq => add(&["--timer", &n, "--signal", &n]),
            Profile::All => add(&[
                "--cpu",
                &n,
                "--vm",
                &n,
                "--vm-bytes",
                "64M",
                "--memcpy",
                &n,
                "--hdd",
                &n,
                "--hdd-bytes",
                "64M",
                "--sock",
                &n,
                "--udp",
                &n,
                "--timer",
                &n,
                "--signal",
                &n,
            ]),
        }
        let mut generators = if hackbench {
            hackbench_per_node(cpus, node_of)
        } else {
            Vec::new()
        };
        let yaml = scratch.join("stress-ng.yaml");
        let mut args = stressors;
        args.extend(
            [
                "--metrics-brief",
                "--yaml",
                &yaml.to_string_lossy(),
                "--temp-path",
                &scratch.to_string_lossy(),
            ]
            .iter()
            .map(|w| w.to_string()),
        );
        generators.push(Generator {
            name: "stress-ng".to_string(),
            kind: Kind::StressNg { yaml },
            program: "stress-ng",
            package: "stress-ng",
            args,
            cpus: cpus.to_vec(),
        });
        generators
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Messages each hackbench sender passes to each receiver (rteval's
/// default `loops`).
pub const HACKBENCH_LOOPS: u64 = 1000;
/// hackbench's senders (and receivers) per group, its default.
pub const HACKBENCH_FDS: u64 = 20;

/// How a generator reports what it achieved.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Runs for the whole load; writes its metrics (bogo-ops per stressor)
    /// to this YAML file as it exits.
    StressNg { yaml: PathBuf },
    /// Ends after a fixed amount of work and is restarted (as rteval
    /// restarts it); each run prints its time.
    Hackbench { groups: usize, loops: u64 },
}

/// One generator's command line and where it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Generator {
    pub name: String,
    pub kind: Kind,
    pub program: &'static str,
    /// The Debian package that installs `program`.
    pub package: &'static str,
    pub args: Vec<String>,
    pub cpus: Vec<usize>,
}

impl Generator {
    /// Starts it in the process group `group`, on its CPUs, under
    /// SCHED_OTHER, its output into `output_path`.
    /// The program is the one `PATH` names, run by its path: a copy that
    /// cannot run is a failure to start, not a reason to try the next one
    /// on `PATH` (as execvp would).
    pub(super) fn spawn(&self, group: i32, scratch: &Path) -> std::io::Result<Child> {
        let program = find_program(self.program).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "{} is no longer on PATH (the package {})",
                    self.program, self.package
                ),
            )
        })?;
        // hackbench's output is its one run's; stress-ng's accumulates
        // over its restarts.
        let hackbench = matches!(self.kind, Kind::Hackbench { .. });
        let output = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(hackbench)
            .append(!hackbench)
            .open(self.output_path(scratch))?;
        let mut command = Command::new(program);
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output);
        prepare_child(&mut command, group, &self.cpus)?;
        command.spawn()
    }

    /// The file its standard output and error go to, in the load's
    /// scratch directory.
    pub(super) fn output_path(&self, scratch: &Path) -> PathBuf {
        scratch.join(format!("{}.out", self.name.replace(' ', "-")))
    }

    /// The command line as run, for the report.
    pub fn command_line(&self) -> String {
        std::iter::once(self.program.to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Where `program` is on `PATH`, or None.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Checks that every program `profile` needs is installed, before
/// anything starts; the error names the packages to install.
pub fn check_installed(profile: Profile) -> Result<(), String> {
    check_installed_with(profile, |program| find_program(program).is_some())
}

fn check_installed_with(profile: Profile, found: impl Fn(&str) -> bool) -> Result<(), String> {
    let generators = profile.generators(&[0], |_| -1, Path::new("/nonexistent"));
    let mut missing: Vec<(&str, &str)> = Vec::new();
    for g in &generators {
        if !found(g.program) && !missing.iter().any(|(p, _)| *p == g.program) {
            missing.push((g.program, g.package));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the load profile '{profile}' runs {}, not found on PATH: install {} (apt-get install {})",
        missing
            .iter()
            .map(|(p, _)| *p)
            .collect::<Vec<_>>()
            .join(" and "),
        missing
            .iter()
            .map(|(_, pkg)| format!("the package {pkg}"))
            .collect::<Vec<_>>()
            .join(" and "),
        missing
            .iter()
            .map(|(_, pkg)| *pkg)
            .collect::<Vec<_>>()
            .join(" ")
    ))
}

/// rteval's hackbench: one per NUMA node on its CPUs, three groups per
/// CPU of the largest node on every node.
fn hackbench_per_node(cpus: &[usize], node_of: impl Fn(usize) -> i32) -> Vec<Generator> {
    let mut nodes: Vec<(i32, Vec<usize>)> = Vec::new();
    for &cpu in cpus {
        let node = node_of(cpu);
        match nodes.iter_mut().find(|(n, _)| *n == node) {
            Some((_, list)) => list.push(cpu),
            None => nodes.push((node, vec![cpu])),
        }
    }
    let biggest = nodes.iter().map(|(_, c)| c.len()).max().unwrap_or(1);
    let groups = 3 * biggest;
    let args: Vec<String> = [
        "-P",
        "-g",
        &groups.to_string(),
        "-l",
        &HACKBENCH_LOOPS.to_string(),
        "-s",
        "1000",
    ]
    .iter()
    .map(|w| w.to_string())
    .collect();
    (nodes.into_iter())
        .map(|(node, node_cpus)| Generator {
            name: if node >= 0 {
                format!("hackbench node {node}")
            } else {
                "hackbench".to_string()
            },
            kind: Kind::Hackbench {
                groups,
                loops: HACKBENCH_LOOPS,
            },
            program: "hackbench",
            package: "rt-tests",
            args: args.clone(),
            cpus: node_cpus,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_unknown_names_list_the_choices() {
        for (profile, _) in PROFILES {
            assert_eq!(Profile::parse(profile.name()), Ok(profile));
        }
        let err = Profile::parse("heavy").unwrap_err();
        assert!(err.contains("'heavy' is not a load profile"), "{err}");
        assert!(
            err.contains("rteval, cpu, memory, io, network, irq, all"),
            "{err}"
        );
    }

    #[test]
    fn rteval_runs_hackbench_per_node_with_three_groups_per_cpu_of_the_largest_node() {
        let scratch = Path::new("/tmp/x");
        let node_of = |cpu: usize| if cpu < 4 { 0 } else { 1 };
        let gens = Profile::Rteval.generators(&[0, 1, 2, 3, 4, 5], node_of, scratch);
        let hb: Vec<_> = gens.iter().filter(|g| g.program == "hackbench").collect();
        assert_eq!(hb.len(), 2);
        assert_eq!(hb[0].cpus, vec![0, 1, 2, 3]);
        assert_eq!(hb[1].cpus, vec![4, 5]);
        assert_eq!(
            hb[0].command_line(),
            "hackbench -P -g 12 -l 1000 -s 1000",
            "rteval's command line, groups from the largest node"
        );
        let sn = gens.iter().find(|g| g.program == "stress-ng").unwrap();
        assert!(
            sn.command_line()
                .starts_with("stress-ng --cpu 6 --vm 6 --vm-bytes 64M")
        );
        assert!(sn.args.contains(&"/tmp/x/stress-ng.yaml".to_string()));
        assert_eq!(sn.cpus, vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn missing_generators_are_named_with_their_packages() {
        assert_eq!(check_installed_with(Profile::Rteval, |_| true), Ok(()));
        let err = check_installed_with(Profile::Rteval, |p| p != "hackbench").unwrap_err();
        assert_eq!(
            err,
            "the load profile 'rteval' runs hackbench, not found on PATH: install the package \
             rt-tests (apt-get install rt-tests)"
        );
        let err = check_installed_with(Profile::All, |_| false).unwrap_err();
        assert!(
            err.contains("runs hackbench and stress-ng")
                && err.contains("apt-get install rt-tests stress-ng"),
            "{err}"
        );
        assert!(check_installed_with(Profile::Cpu, |p| p == "hackbench").is_err());
    }

    #[test]
    fn single_purpose_profiles_run_stress_ng_alone() {
        for profile in [
            Profile::Cpu,
            Profile::Memory,
            Profile::Io,
            Profile::Network,
            Profile::Irq,
        ] {
            let gens = profile.generators(&[1], |_| 0, Path::new("/s"));
            assert_eq!(gens.len(), 1, "{profile}");
            assert_eq!(gens[0].program, "stress-ng");
        }
        let all = Profile::All.generators(&[0, 1], |_| -1, Path::new("/s"));
        assert_eq!(
            all[0].name, "hackbench",
            "no node known: no node in the name"
        );
        for stressor in [
            "--cpu", "--vm", "--hdd", "--sock", "--udp", "--timer", "--signal",
        ] {
            assert!(all[1].args.iter().any(|a| a == stressor), "{stressor}");
        }
    }
}
