//! `[hwnoise]`: windows of the kernel's hwlat tracer, scheduled as
//! `[load]`'s are (off by default: a window spins its CPUs with
//! interrupts off, for lab and canary hosts).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{Config, Section, SectionSpec, read_schedule, show_duration as show};
use crate::config::{
    ConfigError, Effective, SectionReader, as_bool, as_cpu_selection, as_duration_ns, key_error,
    quoted,
};
use crate::host::HostInfo;
use crate::load::Schedule;
use crate::sampling::CpuSelection;
use crate::units::{NS_PER_US, format_duration_ns};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwnoiseConfig {
    pub enabled: bool,
    pub cpus: CpuSelection,
    pub schedule: Schedule,
    /// Gaps over this are counted, µs.
    pub threshold_us: u64,
    /// The CPU spins with interrupts off for `width_us` of every `window_us`.
    pub width_us: u64,
    pub window_us: u64,
}

/// A duration in whole microseconds, at least 1 µs.
fn as_micros(value: &config::Value) -> Result<u64, String> {
    let ns = as_duration_ns(value)?;
    if ns == 0 || ns % NS_PER_US != 0 {
        return Err("must be whole microseconds, at least 1us (the kernel's unit)".to_string());
    }
    Ok(ns / NS_PER_US)
}

fn show_micros(us: &u64) -> String {
    quoted(&format_duration_ns(us * NS_PER_US))
}

impl HwnoiseConfig {
    fn read(r: &mut SectionReader<'_>) -> Result<HwnoiseConfig, ConfigError> {
        r.only(&[
            "enabled",
            "cpus",
            "every",
            "at",
            "duration",
            "threshold",
            "width",
            "window",
        ])?;
        let enabled = r.read("enabled", || false, as_bool, |b| b.to_string())?;
        let cpus = r.read(
            "cpus",
            || CpuSelection::All,
            as_cpu_selection,
            |c| quoted(&c.to_string()),
        )?;
        let schedule = read_schedule(
            r,
            "hwnoise",
            [86_400, 3 * 3600, 600].map(Duration::from_secs),
        )?;
        let threshold_us = r.read("threshold", || 10, as_micros, show_micros)?;
        let width_us = r.read("width", || 500_000, as_micros, show_micros)?;
        let window_us = r.read("window", || 1_000_000, as_micros, show_micros)?;
        let error = |key: &str, reason: String| ConfigError {
            source: "the configuration".to_string(),
            key: key.to_string(),
            value: None,
            reason,
        };
        if width_us >= window_us {
            return Err(error(
                "hwnoise.width",
                format!(
                    "the width ({}) must be less than the window ({}): hwlat spins for \
                     width out of every window",
                    format_duration_ns(width_us * NS_PER_US),
                    format_duration_ns(window_us * NS_PER_US)
                ),
            ));
        }
        let duration = schedule.duration;
        if duration < Duration::from_micros(window_us) {
            return Err(error(
                "hwnoise.duration",
                format!(
                    "a window of {} holds no hwlat window of {}: lengthen hwnoise.duration \
                     or shorten hwnoise.window",
                    show(duration),
                    format_duration_ns(window_us * NS_PER_US)
                ),
            ));
        }
        Ok(HwnoiseConfig {
            enabled,
            cpus,
            schedule,
            threshold_us,
            width_us,
            window_us,
        })
    }

    /// A spun CPU's sampler waits up to `width` and an interval for its
    /// next wake-up: under `measure.stall_threshold`, or every window
    /// would count a stall (a gap filed, `/healthz` failing).
    fn check_beside(
        &self,
        measure: &crate::config::MeasureConfig,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        let held_ns = self.width_us * NS_PER_US + measure.interval_ns;
        if !self.enabled || held_ns < measure.stall_threshold_ns {
            return Ok(());
        }
        Err(key_error(
            effective,
            "hwnoise.width",
            format!(
                "a window holds a CPU's sampler for the width and an interval ({}), not under \
                 measure.stall_threshold ({}): every window would count as a stall; lower \
                 hwnoise.width or raise measure.stall_threshold",
                format_duration_ns(held_ns),
                format_duration_ns(measure.stall_threshold_ns)
            ),
        ))
    }
}

/// `[hwnoise]` as the registry lists it.
pub(super) static SECTION: SectionSpec = SectionSpec {
    name: "hwnoise",
    read: |r| Ok(Box::new(HwnoiseConfig::read(r)?)),
};

impl Section for HwnoiseConfig {
    fn check_with(&self, config: &Config) -> Result<(), ConfigError> {
        self.check_beside(&config.measure, &config.effective)
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
        self.cpus
            .resolve(host)
            .map(|_| ())
            .map_err(|e| key_error(effective, "hwnoise.cpus", e))
    }
}

#[cfg(test)]
mod tests {
    use crate::instruments::registry::load_for_tests as load;

    #[test]
    fn a_width_a_stall_long_is_refused_naming_both_keys() {
        let err = load(
            Some(
                "[measure]\nstall_threshold = \"1s\"\n[hwnoise]\nenabled = true\nwidth = \
                 \"999ms\"\nwindow = \"2s\"\n",
            ),
            &[],
            &[],
        )
        .0
        .unwrap_err();
        assert_eq!(err.key, "hwnoise.width");
        assert!(err.reason.contains("(1s)"), "{}", err.reason);
        assert!(
            err.reason.contains("raise measure.stall_threshold"),
            "{}",
            err.reason
        );
        // Off, or under it with the interval: accepted.
        for text in [
            "[measure]\nstall_threshold = \"1s\"\n[hwnoise]\nwidth = \"999ms\"\nwindow = \"2s\"\n",
            "[measure]\nstall_threshold = \"1s\"\n[hwnoise]\nenabled = true\nwidth = \"998ms\"\nwindow = \"2s\"\n",
        ] {
            assert!(load(Some(text), &[], &[]).0.is_ok(), "{text}");
        }
    }

    #[test]
    fn hwnoise_windows_are_off_by_default_with_hwlatdetects_knobs() {
        let config = load(None, &[], &[]).0.unwrap();
        let h = config.section::<super::HwnoiseConfig>();
        assert!(!h.enabled);
        assert_eq!(
            (h.threshold_us, h.width_us, h.window_us),
            (10, 500_000, 1_000_000)
        );
        assert_eq!(h.schedule.duration.as_secs(), 600);
        assert_eq!(h.schedule.at.as_secs(), 3 * 3600);
        let config = load(
            Some(
                "[hwnoise]\nenabled = true\nevery = \"10s\"\nat = \"0s\"\nduration = \"5s\"\n\
                 threshold = \"20us\"\nwidth = \"100ms\"\nwindow = \"200ms\"\ncpus = \"0\"\n",
            ),
            &[],
            &[],
        )
        .0
        .unwrap();
        let h = config.section::<super::HwnoiseConfig>();
        assert!(h.enabled);
        assert_eq!(
            (h.threshold_us, h.width_us, h.window_us),
            (20, 100_000, 200_000)
        );
        assert_eq!(h.schedule.every.as_secs(), 10);
    }

    #[test]
    fn bad_hwnoise_settings_name_the_key_and_what_is_accepted() {
        for (text, key, says) in [
            ("width = \"1s\"\n", "hwnoise.width", "less than the window"),
            (
                "threshold = \"1500ns\"\n",
                "hwnoise.threshold",
                "whole microseconds",
            ),
            (
                "duration = \"500ms\"\n",
                "hwnoise.duration",
                "holds no hwlat window",
            ),
            (
                "every = \"1h\"\nduration = \"2h\"\n",
                "hwnoise",
                "hwnoise.duration",
            ),
        ] {
            let err = load(Some(&format!("[hwnoise]\n{text}")), &[], &[])
                .0
                .unwrap_err();
            assert_eq!(err.key, key, "{text}: {err}");
            assert!(err.to_string().contains(says), "{text}: {err}");
        }
    }
}
