//! `[observe]`: interference and real-time tasks' wake-up latency on CPUs
//! without a sampler, from the kernel's events (off by default).

use std::collections::BTreeMap;

use crate::config::{
    ConfigError, Effective, Section, SectionReader, SectionSpec, as_bool, as_integer,
    as_ring_buffer_kb, as_string, key_error, quoted,
};
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::host::HostInfo;

const MAX_TASKS_LIMIT: i64 = 4096;
const MAX_NAMES_LIMIT: i64 = 4096;

/// Which CPUs to observe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObserveCpus {
    /// The online CPUs that have no sampler.
    Unmeasured,
    /// Every online CPU.
    All,
    List(Vec<usize>),
}

impl std::fmt::Display for ObserveCpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObserveCpus::Unmeasured => f.write_str("unmeasured"),
            ObserveCpus::All => f.write_str("all"),
            ObserveCpus::List(cpus) => f.write_str(&format_cpu_list(cpus)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObserveConfig {
    pub enabled: bool,
    pub cpus: ObserveCpus,
    pub max_tasks: usize,
    pub max_names: usize,
    pub buffer_size_kb: u64,
}

impl ObserveConfig {
    fn read(r: &mut SectionReader<'_>) -> Result<ObserveConfig, ConfigError> {
        r.only(&[
            "enabled",
            "cpus",
            "max_tasks",
            "max_names",
            "buffer_size_kb",
        ])?;
        let enabled = r.read("enabled", || false, as_bool, |b| b.to_string())?;
        let cpus = r.read(
            "cpus",
            || ObserveCpus::Unmeasured,
            |v| {
                let text = as_string(v)?;
                match text.trim() {
                    "unmeasured" => Ok(ObserveCpus::Unmeasured),
                    "all" => Ok(ObserveCpus::All),
                    list => parse_cpu_list(list)
                        .map(ObserveCpus::List)
                        .map_err(|e| format!("{e} (or write \"unmeasured\" or \"all\")")),
                }
            },
            |cpus| quoted(&cpus.to_string()),
        )?;
        let count = |max: i64| {
            move |v: &config::Value| {
                let n = as_integer(v)?;
                if !(1..=max).contains(&n) {
                    return Err(format!("must be between 1 and {max}"));
                }
                Ok(n as usize)
            }
        };
        let max_tasks = r.read(
            "max_tasks",
            || 64,
            count(MAX_TASKS_LIMIT),
            |n| n.to_string(),
        )?;
        let max_names = r.read(
            "max_names",
            || 64,
            count(MAX_NAMES_LIMIT),
            |n| n.to_string(),
        )?;
        let buffer_size_kb = r.read(
            "buffer_size_kb",
            || 1024,
            as_ring_buffer_kb,
            |n| n.to_string(),
        )?;
        Ok(ObserveConfig {
            enabled,
            cpus,
            max_tasks,
            max_names,
            buffer_size_kb,
        })
    }

    /// The CPUs to observe on `host`, given the CPUs that have a sampler.
    /// Tracing is system-wide: a CPU outside this process's cpuset or
    /// affinity can be observed, only not sampled.
    pub fn cpu_list(&self, host: &HostInfo, measured: &[usize]) -> Vec<usize> {
        let online = host
            .online_cpus
            .clone()
            .unwrap_or_else(|| host.usable_cpus.clone());
        match &self.cpus {
            ObserveCpus::Unmeasured => online
                .into_iter()
                .filter(|c| !measured.contains(c))
                .collect(),
            ObserveCpus::All => online,
            ObserveCpus::List(cpus) => cpus.clone(),
        }
    }
}

/// `[observe]` as the registry lists it.
pub(super) static SECTION: SectionSpec = SectionSpec {
    name: "observe",
    read: |r| Ok(Box::new(ObserveConfig::read(r)?)),
};

impl Section for ObserveConfig {
    fn check_against(
        &self,
        host: &HostInfo,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        let (ObserveCpus::List(cpus), Some(online)) = (&self.cpus, &host.online_cpus) else {
            return Ok(());
        };
        if let Some(bad) = cpus.iter().find(|cpu| !online.contains(cpu)) {
            return Err(key_error(
                effective,
                "observe.cpus",
                format!(
                    "CPU {bad} is offline or absent; online CPUs are {}",
                    format_cpu_list(online)
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::registry::load_for_tests as load;

    #[test]
    fn observe_values_are_checked_and_named() {
        for (toml, key, says) in [
            (
                "cpus = \"two\"",
                "observe.cpus",
                "\"unmeasured\" or \"all\"",
            ),
            (
                "cpus = \"3-1\"",
                "observe.cpus",
                "\"unmeasured\" or \"all\"",
            ),
            ("max_tasks = 0", "observe.max_tasks", "between 1 and 4096"),
            (
                "max_names = 5000",
                "observe.max_names",
                "between 1 and 4096",
            ),
            (
                "buffer_size_kb = 8",
                "observe.buffer_size_kb",
                "between 64 and",
            ),
            ("enabled = \"yes\"", "observe.enabled", "true or false"),
            ("tasks = 3", "observe.tasks", "unknown key"),
        ] {
            let (config, _file) = load(Some(&format!("[observe]\n{toml}\n")), &[], &[]);
            let err = config.unwrap_err();
            assert_eq!(err.key, key, "{toml}: {err}");
            assert!(err.reason.contains(says), "{toml}: {err}");
        }
        let (config, _file) = load(
            Some("[observe]\nenabled = true\ncpus = \"2-3\"\n"),
            &[],
            &[],
        );
        let config = config.unwrap();
        assert_eq!(
            config.section::<ObserveConfig>().cpus,
            ObserveCpus::List(vec![2, 3])
        );
        // Listed CPUs must be online; outside the affinity mask is fine.
        let host = crate::host::HostInfo {
            usable_cpus: vec![0],
            online_cpus: Some(vec![0, 1, 2]),
            ..crate::host::HostInfo::detect()
        };
        // The section's own check (the whole check_against would first refuse
        // the sampler's priority when the tests run without privileges).
        let err = config
            .section::<ObserveConfig>()
            .check_against(&host, &config.effective)
            .unwrap_err();
        assert_eq!(err.key, "observe.cpus");
        assert!(err.reason.contains("CPU 3 is offline"), "{err}");
        assert_eq!(
            config.section::<ObserveConfig>().cpu_list(&host, &[0]),
            vec![2, 3]
        );
        let mut unmeasured = config.section::<ObserveConfig>().clone();
        unmeasured.cpus = ObserveCpus::Unmeasured;
        assert_eq!(unmeasured.cpu_list(&host, &[0]), vec![1, 2]);
    }
}
