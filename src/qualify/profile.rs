//! A qualification's profile: a ready one (`deploy/qualify/`, built in
//! by name) or a TOML file of the same form, each key checked by name.

use serde::Deserialize;

/// The ready profiles, by name.
pub const PROFILES: [(&str, &str); 3] = [
    (
        "cnf-tests",
        include_str!("../../deploy/qualify/cnf-tests.toml"),
    ),
    ("smoke", include_str!("../../deploy/qualify/smoke.toml")),
    (
        "certification-24h",
        include_str!("../../deploy/qualify/certification-24h.toml"),
    ),
];

/// A profile file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub description: Option<String>,
    pub runtime: Option<String>,
    pub cpus: Option<String>,
    pub maximum_latency_us: Option<u64>,
    #[serde(default)]
    pub require_thresholds: bool,
    #[serde(default)]
    pub facts: FactLevels,
    #[serde(default)]
    pub hwlat: Section,
    #[serde(default)]
    pub idle: Section,
    #[serde(default)]
    pub loaded: Section,
    #[serde(default)]
    pub timerlat: Section,
    #[serde(default)]
    pub busypoll: Section,
}

/// One phase's section of a profile. `profiles` belongs to `[loaded]`
/// and `cpus` to `[busypoll]`; elsewhere they are refused by name.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub run: Option<RunWhen>,
    pub maximum_us: Option<u64>,
    pub runtime: Option<String>,
    pub priority: Option<i32>,
    pub interval_us: Option<u64>,
    pub profiles: Option<Vec<String>>,
    pub cpus: Option<String>,
}

/// Whether a phase runs: always (it must measure, or the qualification
/// could not), where the kernel can, or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunWhen {
    Always,
    IfAvailable,
    Never,
}

/// What a disqualifying fact does: fails the facts phase, is warned
/// about, or is not looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Fail,
    Warn,
    Ignore,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FactLevels {
    /// The kernel is not PREEMPT_RT.
    pub preempt_rt: Level,
    /// The samplers or pollers could not run SCHED_FIFO.
    pub realtime: Level,
    /// A measured CPU shares its core with another online CPU.
    pub smt: Level,
    /// A measured CPU's cpufreq governor is not `performance`.
    pub governor: Level,
    /// A measured CPU may enter an idle state slower to leave than
    /// `deepest_idle_us`.
    pub idle_states: Level,
    pub deepest_idle_us: u64,
    /// A measured CPU is not isolated (isolcpus or nohz_full).
    pub isolation: Level,
}

impl Default for FactLevels {
    fn default() -> FactLevels {
        FactLevels {
            preempt_rt: Level::Warn,
            realtime: Level::Fail,
            smt: Level::Warn,
            governor: Level::Warn,
            idle_states: Level::Warn,
            deepest_idle_us: 10,
            isolation: Level::Warn,
        }
    }
}

impl Profile {
    /// A ready profile by name, or a file.
    pub fn load(name_or_file: &str) -> Result<(String, Profile), String> {
        let (name, text) = match PROFILES.iter().find(|(n, _)| *n == name_or_file) {
            Some((name, text)) => (name.to_string(), text.to_string()),
            None => {
                let text = std::fs::read_to_string(name_or_file).map_err(|e| {
                    let names: Vec<&str> = PROFILES.iter().map(|p| p.0).collect();
                    format!(
                        "--profile {name_or_file:?}: neither a ready profile ({}) nor a \
                         readable file ({e})",
                        names.join(", ")
                    )
                })?;
                (name_or_file.to_string(), text)
            }
        };
        match Profile::parse(&text) {
            Ok(profile) => Ok((name, profile)),
            Err(e) => Err(format!("profile {name}: {e}")),
        }
    }

    pub fn parse(text: &str) -> Result<Profile, String> {
        let profile: Profile = config::Config::builder()
            .add_source(config::File::from_str(text, config::FileFormat::Toml))
            .build()
            .and_then(config::Config::try_deserialize)
            .map_err(|e| e.to_string())?;
        for (name, section) in [
            ("hwlat", &profile.hwlat),
            ("idle", &profile.idle),
            ("timerlat", &profile.timerlat),
            ("busypoll", &profile.busypoll),
        ] {
            if section.profiles.is_some() {
                return Err(format!(
                    "[{name}] profiles: only [loaded] runs load profiles"
                ));
            }
        }
        for (name, section) in [
            ("hwlat", &profile.hwlat),
            ("idle", &profile.idle),
            ("loaded", &profile.loaded),
            ("timerlat", &profile.timerlat),
        ] {
            if section.cpus.is_some() {
                return Err(format!(
                    "[{name}] cpus: only [busypoll] has CPUs of its own; the measured CPUs \
                     are the profile's top-level cpus"
                ));
            }
        }
        Ok(profile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ready_profile_parses() {
        for (name, text) in PROFILES {
            Profile::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn a_profile_file_is_read_and_its_mistakes_named() {
        let err = Profile::parse("[idle]\nmaximum = 5\n").unwrap_err();
        assert!(err.contains("maximum"), "{err}");
        let err = Profile::parse("[idle]\nprofiles = [\"cpu\"]\n").unwrap_err();
        assert!(err.contains("[idle] profiles"), "{err}");
        let err = Profile::parse("[facts]\nsmt = \"maybe\"\n").unwrap_err();
        assert!(err.contains("maybe"), "{err}");
        let err = Profile::load("no-such-profile").unwrap_err();
        assert!(err.contains("cnf-tests, smoke, certification-24h"), "{err}");
    }
}
