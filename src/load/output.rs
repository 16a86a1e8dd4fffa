//! What the generators print: hackbench's time per run, stress-ng's
//! metrics YAML, and the last lines of a failed one's output.

use std::path::Path;
use std::process::ExitStatus;

/// The most of a generator's output (its end) or metrics file read:
/// hackbench and stress-ng write a few KiB.
const MAX_OUTPUT_READ_BYTES: u64 = 1 << 20;

/// A finished run's output file: its end, where the summary and the last
/// words are, whatever it wrote before them (empty when unreadable).
pub(super) fn read_output(path: &Path) -> String {
    crate::files::read_tail(path, MAX_OUTPUT_READ_BYTES).unwrap_or_default()
}

/// The metrics a stress-ng run wrote to `yaml`, read within the bound and
/// removed; or why there are none.
pub(super) fn read_stress_ng_metrics(yaml: &Path) -> Result<Vec<(String, f64, f64)>, String> {
    let links = crate::files::Links::Refuse;
    let metrics = crate::files::read_text_bounded(yaml, links, MAX_OUTPUT_READ_BYTES)
        .map_err(|e| format!("it wrote no metrics ({e})"))
        .and_then(|text| {
            stress_ng_metrics(&text).map_err(|e| format!("its metrics could not be read: {e}"))
        });
    let _ = std::fs::remove_file(yaml);
    metrics
}

pub(super) fn exit_text(status: ExitStatus, output: &str) -> String {
    let tail: Vec<&str> = output
        .lines()
        .filter(|l| !l.trim().is_empty())
        .rev()
        .take(3)
        .collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    if tail.is_empty() {
        format!("{status}")
    } else {
        format!("{status} ({})", tail.join(" / "))
    }
}

/// hackbench's `Time: 2.479` line.
pub(super) fn hackbench_time(output: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|line| line.trim().strip_prefix("Time:"))
        .and_then(|t| t.trim().parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t > 0.0)
}

/// stress-ng's `--yaml` metrics: (stressor, bogo-ops, wall-clock seconds).
pub(super) fn stress_ng_metrics(text: &str) -> Result<Vec<(String, f64, f64)>, String> {
    #[derive(serde::Deserialize)]
    struct Doc {
        #[serde(default)]
        metrics: Vec<Metric>,
    }
    #[derive(serde::Deserialize)]
    struct Metric {
        stressor: String,
        #[serde(rename = "bogo-ops")]
        bogo_ops: f64,
        #[serde(rename = "wall-clock-time")]
        wall_clock_time: f64,
    }
    let doc: Doc = serde_yaml_ng::from_str(text).map_err(|err| err.to_string())?;
    Ok(doc
        .metrics
        .into_iter()
        .map(|m| (m.stressor, m.bogo_ops, m.wall_clock_time))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hackbench_time_is_read_from_its_last_line() {
        let out = "Running in process mode with 6 groups using 40 file descriptors each \
                   (== 240 tasks)\nEach sender will pass 1000 messages of 1000 bytes\nTime: 2.479\n";
        assert_eq!(hackbench_time(out), Some(2.479));
        assert_eq!(hackbench_time("Time: nan\n"), None);
        assert_eq!(hackbench_time("fork() failed\n"), None);
    }

    #[test]
    fn stress_ng_yaml_metrics_are_read_per_stressor() {
        // The layout stress-ng 0.15 writes with --yaml (abridged).
        let yaml = "---\nsystem-info:\n      stress-ng-version: 0.15.06\n      \
                    time-hh-mm-ss: 03:10:41\n      version: '#1 SMP PREEMPT_DYNAMIC @0'\n\n\
                    metrics:\n    - stressor: cpu\n      bogo-ops: 6373\n      \
                    bogo-ops-per-second-real-time: 2123.654782\n      wall-clock-time: 3.000959\n\n    \
                    - stressor: vm\n      bogo-ops: 54516\n      wall-clock-time: 3.023671\n...\n";
        let metrics = stress_ng_metrics(yaml).unwrap();
        assert_eq!(metrics.len(), 2);
        assert_eq!(metrics[0].0, "cpu");
        let rate = metrics[0].1 / metrics[0].2;
        assert!((rate - 2123.65).abs() < 0.01, "{rate}");
        assert!(stress_ng_metrics("metrics: 3\n").is_err());
    }
}
