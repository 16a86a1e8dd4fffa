//! `[timerlat]`: the kernel's timerlat tracer beside the samplers (off by
//! default): each wake-up of each measured CPU split into the timer's
//! IRQ, the woken thread and its return to user space.

use std::collections::BTreeMap;

use crate::config::{
    ConfigError, Effective, Section, SectionReader, SectionSpec, as_bool, as_duration_ns,
    as_integer, as_ring_buffer_kb, as_string, key_error, quoted,
};
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::host::HostInfo;
use crate::units::{NS_PER_SEC, NS_PER_US, format_duration_ns};

/// Which CPUs timerlat runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerlatCpus {
    /// The CPUs that have a sampler.
    Measured,
    List(Vec<usize>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerlatConfig {
    pub enabled: bool,
    pub cpus: TimerlatCpus,
    pub period_us: u64,
    pub priority: i32,
    pub user_threads: bool,
    pub buffer_size_kb: u64,
}

impl TimerlatConfig {
    fn read(r: &mut SectionReader<'_>) -> Result<TimerlatConfig, ConfigError> {
        r.only(&[
            "enabled",
            "cpus",
            "period",
            "priority",
            "user_threads",
            "buffer_size_kb",
        ])?;
        let enabled = r.read("enabled", || false, as_bool, |b| b.to_string())?;
        let cpus = r.read(
            "cpus",
            || TimerlatCpus::Measured,
            |v| {
                let text = as_string(v)?;
                match text.trim() {
                    "measured" => Ok(TimerlatCpus::Measured),
                    list => parse_cpu_list(list)
                        .map(TimerlatCpus::List)
                        .map_err(|e| format!("{e} (or write \"measured\")")),
                }
            },
            |cpus| match cpus {
                TimerlatCpus::Measured => quoted("measured"),
                TimerlatCpus::List(list) => quoted(&format_cpu_list(list)),
            },
        )?;
        let period_us = r.read(
            "period",
            || 1000,
            |v| {
                let ns = as_duration_ns(v)?;
                if !(100 * NS_PER_US..=NS_PER_SEC).contains(&ns) || ns % NS_PER_US != 0 {
                    return Err(
                        "must be whole microseconds from 100us to 1s (the kernel's bounds)"
                            .to_string(),
                    );
                }
                Ok(ns / NS_PER_US)
            },
            |us| quoted(&format_duration_ns(us * NS_PER_US)),
        )?;
        let priority = r.read(
            "priority",
            || 95,
            |v| {
                let n = as_integer(v)?;
                if !(1..=99).contains(&n) {
                    return Err("must be a SCHED_FIFO priority, 1 to 99".to_string());
                }
                Ok(n as i32)
            },
            |n| n.to_string(),
        )?;
        let user_threads = r.read("user_threads", || true, as_bool, |b| b.to_string())?;
        let buffer_size_kb = r.read(
            "buffer_size_kb",
            || 1024,
            as_ring_buffer_kb,
            |n| n.to_string(),
        )?;
        Ok(TimerlatConfig {
            enabled,
            cpus,
            period_us,
            priority,
            user_threads,
            buffer_size_kb,
        })
    }

    /// The CPUs to run timerlat on, given the CPUs that have a sampler.
    pub fn cpu_list(&self, measured: &[usize]) -> Vec<usize> {
        match &self.cpus {
            TimerlatCpus::Measured => measured.to_vec(),
            TimerlatCpus::List(cpus) => cpus.clone(),
        }
    }
}

/// `[timerlat]` as the registry lists it.
pub(super) static SECTION: SectionSpec = SectionSpec {
    name: "timerlat",
    read: |r| Ok(Box::new(TimerlatConfig::read(r)?)),
};

impl Section for TimerlatConfig {
    /// A listed CPU must be online.
    fn check_against(
        &self,
        host: &HostInfo,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        let (TimerlatCpus::List(cpus), Some(online)) = (&self.cpus, &host.online_cpus) else {
            return Ok(());
        };
        match cpus.iter().find(|cpu| !online.contains(cpu)) {
            Some(bad) => Err(key_error(
                effective,
                "timerlat.cpus",
                format!(
                    "CPU {bad} is offline or absent; online CPUs are {}",
                    format_cpu_list(online)
                ),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timerlat_settings_outside_the_kernels_bounds_are_refused_by_key() {
        for (toml, says) in [
            ("[timerlat]\nperiod = \"50us\"\n", "timerlat.period"),
            ("[timerlat]\npriority = 0\n", "timerlat.priority"),
            ("[timerlat]\ncpus = \"x\"\n", "timerlat.cpus"),
        ] {
            let err = crate::instruments::registry::load_for_tests(Some(toml), &[], &[])
                .0
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{toml}: {err}");
        }
    }

    #[test]
    fn a_timerlat_cpu_that_is_not_online_is_refused_by_key() {
        let (config, _file) = crate::instruments::registry::load_for_tests(
            Some("[timerlat]\nenabled = true\ncpus = \"1,3\"\n"),
            &[],
            &[],
        );
        let config = config.unwrap();
        let host = crate::host::HostInfo {
            usable_cpus: vec![0],
            online_cpus: Some(vec![0, 1, 2]),
            ..crate::host::HostInfo::detect()
        };
        let err = (config.section::<super::TimerlatConfig>())
            .check_against(&host, &config.effective)
            .unwrap_err();
        assert_eq!(err.key, "timerlat.cpus");
        assert!(err.reason.contains("CPU 3 is offline"), "{err}");
        assert_eq!(
            config.section::<super::TimerlatConfig>().cpu_list(&[0]),
            vec![1, 3]
        );
        let measured = TimerlatConfig {
            cpus: TimerlatCpus::Measured,
            ..config.section::<TimerlatConfig>().clone()
        };
        assert_eq!(measured.cpu_list(&[0, 2]), vec![0, 2]);
    }
}
