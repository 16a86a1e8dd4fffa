//! `latencyd report`: the record's files over a range, summarized per CPU
//! the way cyclictest ends a run — its `T:` lines (the same columns, so
//! scripts that read cyclictest's summary read this), then comment lines
//! with what the record adds — or as JSON in cyclictest's `--json` layout
//! (`thread.N` with `cycles`, `min`, `avg`, `max` and a 1 µs `histogram`,
//! which `latencyd plot` draws) with the range and what was skipped.
//!
//! The record's histograms keep 2 significant digits: quantiles and the
//! histogram are within 1/128 of the true values; count, min, avg, max,
//! missed and spikes are exact.
//!
//! `text` and `json` render a summary; `epochs` splits the record where
//! the host's fingerprint changes (`--by-fingerprint`) and sets two
//! ranges side by side (`--compare`).

pub mod epochs;
mod json;
mod text;

pub use json::json;
pub use text::text;

use std::process::ExitCode;

use crate::cli::ReportArgs;
use crate::record::reader;

pub fn main(args: &ReportArgs) -> ExitCode {
    match run(args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("latencyd report: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &ReportArgs) -> Result<String, String> {
    let files = reader::expand_inputs(&args.inputs)?;
    let now = crate::units::unix_now_ns();
    let (range, cpus) = reader::selection(&args.range, now)?;
    if args.by_fingerprint {
        let (parts, report) = epochs::by_fingerprint(&files, range, cpus.as_deref())?;
        if parts.is_empty() {
            return Err(format!(
                "the record has no interval in this range ({} file(s) read)",
                report.files
            ));
        }
        if let Some(warning) = report.warning() {
            eprintln!("latencyd report: warning: {warning}");
        }
        return Ok(if args.json {
            epochs::epochs_json(&parts, &report)
        } else {
            epochs::epochs_text(&parts, &report)
        });
    }
    if let Some(ranges) = &args.compare {
        return compare(args, &files, ranges, range, cpus.as_deref(), now);
    }
    if args.plot.is_some() && !args.by_load {
        return Err(
            "--plot draws --compare's or --by-load's two distributions: add one of \
                    them"
                .to_string(),
        );
    }
    if args.by_load {
        let (idle, loaded, profiles, report) = epochs::by_load(&files, range, cpus.as_deref())?;
        if let Some(warning) = report.warning() {
            eprintln!("latencyd report: warning: {warning}");
        }
        for (part, what) in [(&idle, "idle"), (&loaded, "under load")] {
            if part.summary.cpus.is_empty() {
                return Err(format!(
                    "the record has no interval measured {what} in this range ({} file(s) \
                     read); --by-load needs both (a [load] window, or measure --load --log)",
                    report.files
                ));
            }
        }
        let loaded_label = format!("under load {profiles}");
        let labels = ["idle", loaded_label.as_str()];
        if let Some(path) = &args.plot {
            let mut plot = epochs::compare_plot(&idle, &loaded, labels);
            plot.title = "Latency: idle against under load".to_string();
            crate::plot::write(&plot, path)
                .map_err(|e| format!("--plot {}: {e}", path.display()))?;
        }
        return Ok(if args.json {
            epochs::compare_json(&idle, &loaded, labels)
        } else {
            epochs::compare_text(&idle, &loaded, labels)
        });
    }
    let (summary, report) = crate::record::summarize(&files, range, cpus.as_deref())?;
    if let Some(warning) = report.warning() {
        eprintln!("latencyd report: warning: {warning}");
    }
    if summary.cpus.is_empty() {
        return Err(format!(
            "the record has no interval in this range ({} file(s) read)",
            report.files
        ));
    }
    Ok(if args.json {
        json(&summary, &report, args.nsecs)
    } else {
        text(&summary, &report, args.nsecs)
    })
}

/// `--compare A B`: each range within `--from`/`--to`, read alone.
fn compare(
    args: &ReportArgs,
    files: &[std::path::PathBuf],
    ranges: &[String],
    outer: reader::Range,
    cpus: Option<&[usize]>,
    now: u64,
) -> Result<String, String> {
    let mut parts = Vec::new();
    for (name, text) in ["A", "B"].iter().zip(ranges) {
        let range = compare_range(text, now).map_err(|e| format!("--compare {name}: {e}"))?;
        let range = reader::Range {
            from_ns: range.from_ns.max(outer.from_ns),
            to_ns: range.to_ns.min(outer.to_ns),
        };
        let (part, report) = epochs::range_part(files, range, cpus)?;
        if let Some(warning) = report.warning() {
            eprintln!("latencyd report: warning: {warning}");
        }
        if part.summary.cpus.is_empty() {
            return Err(format!(
                "--compare {name} ({text}): the record has no interval in this range ({} file(s) \
                 read)",
                report.files
            ));
        }
        parts.push(part);
    }
    let labels = [ranges[0].as_str(), ranges[1].as_str()];
    if let Some(path) = &args.plot {
        crate::plot::write(&epochs::compare_plot(&parts[0], &parts[1], labels), path)
            .map_err(|e| format!("--plot {}: {e}", path.display()))?;
    }
    Ok(if args.json {
        epochs::compare_json(&parts[0], &parts[1], labels)
    } else {
        epochs::compare_text(&parts[0], &parts[1], labels)
    })
}

/// `FROM..TO`, either side empty for an open end.
fn compare_range(text: &str, now: u64) -> Result<reader::Range, String> {
    let Some((from, to)) = text.split_once("..") else {
        return Err(format!(
            "'{text}' is not a range: write FROM..TO (e.g. 2026-11-01T00:00:00Z..2026-11-08T00:00:00Z, \
             -14d..-7d, or -7d.. for up to now)"
        ));
    };
    let side = |t: &str, open: u64| {
        if t.is_empty() {
            Ok(open)
        } else {
            crate::calendar::parse_time_ns(t, now).map_err(|e| format!("'{t}': {e}"))
        }
    };
    let range = reader::Range {
        from_ns: side(from, 0)?,
        to_ns: side(to, u64::MAX)?,
    };
    if range.from_ns >= range.to_ns {
        return Err(format!("'{text}': FROM must be before TO"));
    }
    Ok(range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{HwnoiseLine, HwnoiseOutcome, ReadReport, Summary};

    #[test]
    fn hwnoise_windows_and_the_intervals_left_out_are_said() {
        let report = ReadReport {
            hwnoise: vec![HwnoiseLine {
                start_ns: 1_795_315_538_000_000_000,
                end_ns: 1_795_316_138_000_000_000,
                cpus: vec![1],
                threshold_us: 10,
                width_us: 500_000,
                window_us: 1_000_000,
                outcome: HwnoiseOutcome::Ran {
                    samples: 1,
                    gaps: 1,
                    max_us: 12,
                    nmis: 0,
                    smis: None,
                },
            }],
            hwnoise_entries: 3,
            timerlat: [((0, "thread".to_string()), thread_stats())].into(),
            ..ReadReport::default()
        };
        let summary = Summary::default();
        let out = text(&summary, &report, false);
        assert!(
            out.contains("# Hwnoise: 2026-11-22T02:45:38.000Z to "),
            "{out}"
        );
        assert!(
            out.contains("1 sample(s) over 10 us, largest gap 12 us"),
            "{out}"
        );
        assert!(
            out.contains("# Hwnoise: 3 CPU interval(s) measured while"),
            "{out}"
        );
        let doc: serde_json::Value = serde_json::from_str(&json(&summary, &report, false)).unwrap();
        let l = &doc["latencyd"];
        assert_eq!(l["hwnoise_intervals_left_out"], 3);
        assert_eq!(l["hwnoise"][0]["max_gap_us"], 12);
        assert_eq!(l["hwnoise"][0]["outcome"], "ran");
        assert!(
            out.contains("# timerlat CPU 0 thread: count 2 min 5 avg 53 p99 101 max 101 (us)"),
            "{out}"
        );
        assert_eq!(l["timerlat"]["0"]["thread"]["max"], 101);
    }

    fn thread_stats() -> crate::stats::LatencyStats {
        let mut s = crate::stats::LatencyStats::new(100_000, None);
        s.record(5_000, 0);
        s.record(101_000, 1);
        s
    }
}
