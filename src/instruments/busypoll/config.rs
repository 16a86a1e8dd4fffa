//! `[busypoll]`: windows of busy-poll measurement (oslat's) on CPUs kept
//! for polling workloads, scheduled as `[load]`'s are; off by default,
//! and never on a CPU a sampler measures.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::read_schedule;
use crate::config::{
    Config, ConfigError, Effective, Section, SectionReader, SectionSpec, as_bool, as_duration_ns,
    as_integer, as_string, key_error, quoted,
};
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::host::HostInfo;
use crate::load::Schedule;
use crate::sampling::CpuSelection;
use crate::units::format_duration_ns;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusypollConfig {
    pub enabled: bool,
    /// The CPUs polled (none until named: they must be kept for polling
    /// workloads, which only the operator knows).
    pub cpus: Vec<usize>,
    pub schedule: Schedule,
    /// `SCHED_FIFO` at this priority; None: the normal policy, as oslat
    /// runs without `-f`.
    pub priority: Option<i32>,
    /// A gap at least this long counts as over (oslat's `-T`, cnf-tests'
    /// `OSLAT_MAXIMUM_LATENCY`), ns.
    pub threshold_ns: u64,
}

impl BusypollConfig {
    fn read(r: &mut SectionReader<'_>) -> Result<BusypollConfig, ConfigError> {
        r.only(&[
            "enabled",
            "cpus",
            "every",
            "at",
            "duration",
            "priority",
            "threshold",
        ])?;
        let enabled = r.read("enabled", || false, as_bool, |b| b.to_string())?;
        let cpus = r.read(
            "cpus",
            Vec::new,
            |v| {
                let text = as_string(v)?;
                if text.trim() == "none" {
                    return Ok(Vec::new());
                }
                parse_cpu_list(&text).map_err(|e| {
                    format!(
                        "{e}; name the CPUs kept for polling workloads, such as \"3\" or \"6-7\""
                    )
                })
            },
            |c| {
                quoted(&if c.is_empty() {
                    "none".to_string()
                } else {
                    format_cpu_list(c)
                })
            },
        )?;
        let schedule = read_schedule(r, "busypoll", [3600, 1800, 60].map(Duration::from_secs))?;
        let priority = r.read(
            "priority",
            || None,
            |v| match as_integer(v)? {
                0 => Ok(None),
                p @ 1..=99 => Ok(Some(p as i32)),
                _ => Err("must be 0 (the normal policy) or a SCHED_FIFO priority, 1 to 99".into()),
            },
            |p| p.unwrap_or(0).to_string(),
        )?;
        let threshold_ns = r.read(
            "threshold",
            || 20_000,
            |v| match as_duration_ns(v)? {
                0 => Err("must be at least 1us".to_string()),
                ns => Ok(ns),
            },
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let config = BusypollConfig {
            enabled,
            cpus,
            schedule,
            priority,
            threshold_ns,
        };
        if config.enabled && config.cpus.is_empty() {
            return Err(ConfigError {
                source: "the configuration".to_string(),
                key: "busypoll.cpus".to_string(),
                value: None,
                reason: "busy-poll windows need the CPUs kept for polling workloads: name them \
                         (busypoll.cpus = \"3\"), CPUs no sampler measures"
                    .to_string(),
            });
        }
        Ok(config)
    }

    /// No CPU is both polled and sampled (a window would take the
    /// sampler's CPU for its whole length), nor polled while a hwlat
    /// window may spin it (the poller would count hwlat's spin as gaps).
    fn check_beside(
        &self,
        measure: &crate::config::MeasureConfig,
        hwnoise: &crate::instruments::hwnoise::HwnoiseConfig,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        if !self.enabled {
            return Ok(());
        }
        self.check_beside_hwnoise(hwnoise, effective)?;
        let sampled = match &measure.cpus {
            CpuSelection::All => {
                return Err(key_error(
                    effective,
                    "busypoll.cpus",
                    "measure.cpus = \"all\" samples every CPU, so none is left to poll: list the \
                     samplers' CPUs in measure.cpus and leave the polling CPUs out"
                        .to_string(),
                ));
            }
            CpuSelection::List(cpus) => cpus,
        };
        let both: Vec<usize> = (self.cpus.iter())
            .filter(|c| sampled.contains(c))
            .copied()
            .collect();
        if both.is_empty() {
            return Ok(());
        }
        Err(key_error(
            effective,
            "busypoll.cpus",
            format!(
                "CPU {} is sampled too (measure.cpus): a busy-poll window would take it from its \
                 sampler; poll only CPUs no sampler measures",
                format_cpu_list(&both)
            ),
        ))
    }

    /// A polled CPU that hwlat spins too, in windows that meet.
    fn check_beside_hwnoise(
        &self,
        hwnoise: &crate::instruments::hwnoise::HwnoiseConfig,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        let spun: Vec<usize> = match &hwnoise.cpus {
            CpuSelection::All => self.cpus.clone(),
            CpuSelection::List(cpus) => (self.cpus.iter())
                .filter(|c| cpus.contains(c))
                .copied()
                .collect(),
        };
        if !hwnoise.enabled || spun.is_empty() || !self.schedule.meets(&hwnoise.schedule) {
            return Ok(());
        }
        Err(key_error(
            effective,
            "busypoll.at",
            format!(
                "busy-poll windows on CPU {} meet [hwnoise]'s windows on the same CPU: the pollers \
                 would count hwlat's spin as gaps; move one schedule (busypoll.at, hwnoise.at) or \
                 leave the CPU out of hwnoise.cpus",
                format_cpu_list(&spun)
            ),
        ))
    }
}

/// `[busypoll]` as the registry lists it.
pub(super) static SECTION: SectionSpec = SectionSpec {
    name: "busypoll",
    read: |r| Ok(Box::new(BusypollConfig::read(r)?)),
};

impl Section for BusypollConfig {
    fn check_with(&self, config: &Config) -> Result<(), ConfigError> {
        let hwnoise = config.section::<crate::instruments::hwnoise::HwnoiseConfig>();
        self.check_beside(&config.measure, hwnoise, &config.effective)
    }

    /// The CPUs exist and may be used.
    fn check_against(
        &self,
        host: &HostInfo,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        if !self.enabled {
            return Ok(());
        }
        CpuSelection::List(self.cpus.clone())
            .resolve(host)
            .map(|_| ())
            .map_err(|e| key_error(effective, "busypoll.cpus", e))
    }
}

#[cfg(test)]
mod tests {
    use crate::instruments::registry::load_for_tests as load;

    #[test]
    fn busy_poll_windows_are_off_by_default_and_read_every_key() {
        let config = load(None, &[], &[]).0.unwrap();
        let b = config.section::<super::BusypollConfig>();
        assert!(!b.enabled && b.cpus.is_empty());
        assert_eq!((b.priority, b.threshold_ns), (None, 20_000));
        assert_eq!(
            (
                b.schedule.every.as_secs(),
                b.schedule.at.as_secs(),
                b.schedule.duration.as_secs()
            ),
            (3600, 1800, 60)
        );
        let config = load(
            Some(
                "[measure]\ncpus = \"0-1\"\n[busypoll]\nenabled = true\ncpus = \"2-3\"\n\
                 every = \"10m\"\nat = \"0s\"\nduration = \"30s\"\npriority = 1\nthreshold = \"10us\"\n",
            ),
            &[],
            &[],
        )
        .0
        .unwrap();
        let b = config.section::<super::BusypollConfig>();
        assert_eq!(
            (b.cpus.clone(), b.priority, b.threshold_ns),
            (vec![2, 3], Some(1), 10_000)
        );
    }

    #[test]
    fn bad_busy_poll_settings_name_the_key_and_the_fix() {
        for (text, key, says) in [
            ("[busypoll]\nenabled = true\n", "busypoll.cpus", "name them"),
            (
                "[busypoll]\nenabled = true\ncpus = \"3\"\n",
                "busypoll.cpus",
                "measure.cpus = \"all\"",
            ),
            (
                "[measure]\ncpus = \"0-3\"\n[busypoll]\nenabled = true\ncpus = \"3-4\"\n",
                "busypoll.cpus",
                "CPU 3 is sampled too",
            ),
            (
                "[busypoll]\npriority = 100\n",
                "busypoll.priority",
                "1 to 99",
            ),
            (
                "[busypoll]\nthreshold = \"0s\"\n",
                "busypoll.threshold",
                "at least 1us",
            ),
            (
                "[busypoll]\ncpus = \"x\"\n",
                "busypoll.cpus",
                "kept for polling",
            ),
        ] {
            let err = load(Some(text), &[], &[]).0.unwrap_err();
            assert_eq!(err.key, key, "{text}");
            assert!(err.reason.contains(says), "{text}: {}", err.reason);
        }
    }
}
