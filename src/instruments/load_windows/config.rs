//! `[load]`: scheduled background load windows, for lab and canary hosts
//! (off by default: a production host never loads itself unless told to).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{
    ConfigError, Effective, Section, SectionReader, SectionSpec, as_cpu_selection, as_string,
    key_error, quoted, read_schedule,
};
use crate::host::HostInfo;
use crate::load::{Profile, Schedule, check_installed};
use crate::sampling::CpuSelection;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadConfig {
    /// None: no windows (`profile = "none"`, the default).
    pub profile: Option<Profile>,
    pub cpus: CpuSelection,
    pub schedule: Schedule,
}

impl LoadConfig {
    fn read(r: &mut SectionReader<'_>) -> Result<LoadConfig, ConfigError> {
        r.only(&["profile", "cpus", "every", "at", "duration"])?;
        let profile = r.read(
            "profile",
            || None,
            |v| {
                let text = as_string(v)?;
                if text.trim() == "none" {
                    return Ok(None);
                }
                Profile::parse(&text)
                    .map(Some)
                    .map_err(|e| format!("{e}, or \"none\" for no load windows"))
            },
            |p| quoted(p.map_or("none", Profile::name)),
        )?;
        let cpus = r.read(
            "cpus",
            || CpuSelection::All,
            as_cpu_selection,
            |c| quoted(&c.to_string()),
        )?;
        let schedule = read_schedule(r, "load", [86_400, 2 * 3600, 3600].map(Duration::from_secs))?;
        Ok(LoadConfig {
            profile,
            cpus,
            schedule,
        })
    }
}

/// `[load]` as the registry lists it.
pub(super) static SECTION: SectionSpec = SectionSpec {
    name: "load",
    read: |r| Ok(Box::new(LoadConfig::read(r)?)),
};

impl Section for LoadConfig {
    /// The CPUs exist and may be used, and the generators are installed.
    fn check_against(
        &self,
        host: &HostInfo,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        let Some(profile) = self.profile else {
            return Ok(());
        };
        self.cpus
            .resolve(host)
            .map_err(|e| key_error(effective, "load.cpus", e))?;
        check_installed(profile).map_err(|e| key_error(effective, "load.profile", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::registry::load_for_tests as load;

    #[test]
    fn load_windows_are_off_by_default_and_read_as_scheduled() {
        let (config, _) = load(None, &[], &[]);
        let config = config.unwrap();
        assert_eq!(
            config.section::<LoadConfig>().profile,
            None,
            "no load unless configured"
        );
        let (config, _) = load(
            Some(
                "[load]\nprofile = \"irq\"\ncpus = \"1\"\nevery = \"1d\"\nat = \"02:30\"\nduration = \"45m\"\n",
            ),
            &[],
            &[],
        );
        let config = config.unwrap();
        assert_eq!(
            config.section::<LoadConfig>().profile,
            Some(crate::load::Profile::Irq)
        );
        assert_eq!(
            config.section::<LoadConfig>().cpus,
            CpuSelection::List(vec![1])
        );
        assert_eq!(config.section::<LoadConfig>().schedule.at.as_secs(), 9_000);
        assert_eq!(
            config.section::<LoadConfig>().schedule.duration.as_secs(),
            2_700
        );
        let (config, _) = load(None, &[("LATENCYD_LOAD__AT", "90s")], &[]);
        assert_eq!(
            config
                .unwrap()
                .section::<LoadConfig>()
                .schedule
                .at
                .as_secs(),
            90
        );
    }

    #[test]
    fn bad_load_settings_name_the_key_and_what_is_accepted() {
        let err = |toml: &str| load(Some(toml), &[], &[]).0.unwrap_err().to_string();
        let e = err("[load]\nprofile = \"heavy\"\n");
        assert!(
            e.contains("load.profile") && e.contains("'heavy' is not a load profile"),
            "{e}"
        );
        assert!(e.contains("or \"none\""), "{e}");
        let e = err("[load]\nprofile = \"cpu\"\nevery = \"1h\"\nduration = \"2h\"\nat = \"0s\"\n");
        assert!(
            e.contains("load.duration = 2h is not shorter than load.every = 1h"),
            "{e}"
        );
        let e = err("[load]\nat = \"25:00\"\n");
        assert!(e.contains("load.at") && e.contains("\"HH:MM\""), "{e}");
        let e = err("[load]\nat = \"02:00\"\nevery = \"1h\"\nduration = \"30m\"\n");
        assert!(e.contains("is not within the period"), "{e}");
        let e = err("[load]\nprofile = \"cpu\"\nintensity = 3\n");
        assert!(e.contains("intensity"), "{e}");
    }
}
