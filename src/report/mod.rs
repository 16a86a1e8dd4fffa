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
//! `epochs`: the record split where the host's fingerprint changes
//! (`--by-fingerprint`), and two ranges side by side (`--compare`).

pub mod epochs;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;

use serde::Serialize;

use crate::calendar::format_rfc3339_ms;
use crate::cli::ReportArgs;
use crate::measure::text::format_summary_line;
use crate::record::{Context, ReadReport, Summary, reader};
use crate::stats::{REPORTED_QUANTILES, for_each_bin_us};
use crate::units::NS_PER_US;

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
    let (summary, report) = reader::summarize(&files, range, cpus.as_deref())?;
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

/// The summary as text.
pub fn text(summary: &Summary, report: &ReadReport, nsecs: bool) -> String {
    let unit = if nsecs { 1 } else { NS_PER_US };
    let unit_name = if nsecs { "ns" } else { "us" };
    let context = report.context.clone().unwrap_or_default();
    let (from, to) = summary.span_ns.unwrap_or((0, 0));
    let mut out = format!(
        "# latencyd record: {} to {}, {} interval(s) from {} file(s)\n",
        format_rfc3339_ms(from),
        format_rfc3339_ms(to),
        report.entries,
        report.files
    );
    if !context.host.is_empty() {
        let _ = writeln!(
            out,
            "# {} Linux {}{}, {} priority {}",
            context.host,
            context.kernel,
            if context.preempt_rt {
                " PREEMPT_RT"
            } else {
                ""
            },
            context.policy,
            context.priority
        );
    }
    for (i, (_, stats)) in summary.cpus.iter().enumerate() {
        out.push_str(&format_summary_line(
            i,
            0,
            context.priority,
            context.interval_ns,
            stats,
            nsecs,
        ));
        out.push('\n');
    }
    let names: Vec<&str> = REPORTED_QUANTILES.iter().map(|(_, n)| *n).collect();
    let _ = writeln!(
        out,
        "# CPU, then {} ({unit_name}), missed periods, spikes:",
        names.join(" ")
    );
    for (cpu, stats) in &summary.cpus {
        let q: Vec<String> = REPORTED_QUANTILES
            .iter()
            .map(|(ppm, _)| (stats.quantile_ns(*ppm) / unit).to_string())
            .collect();
        let _ = writeln!(
            out,
            "# {cpu}: {} {} {}",
            q.join(" "),
            stats.missed,
            stats.spikes
        );
    }
    for ((cpu, context), s) in &report.timerlat {
        let _ = writeln!(
            out,
            "# timerlat CPU {cpu} {context}: count {} min {} avg {:.0} p99 {} max {} ({unit_name})",
            s.count,
            s.min_ns() / unit,
            s.avg_ns() / unit as f64,
            s.quantile_ns(990_000) / unit,
            s.max_ns / unit
        );
    }
    for gap in &report.gaps {
        let _ = writeln!(out, "# Gap: {}", gap.describe());
    }
    if report.gaps_left_out > 0 {
        let _ = writeln!(out, "# Gap: {} more not listed", report.gaps_left_out);
    }
    for window in &report.hwnoise {
        let _ = writeln!(out, "# Hwnoise: {}", window.describe());
    }
    if report.hwnoise_entries > 0 {
        let _ = writeln!(
            out,
            "# Hwnoise: {} CPU interval(s) measured while a window spun the CPU are left out \
             of the figures above",
            report.hwnoise_entries
        );
    }
    if let Some(warning) = report.warning() {
        let _ = writeln!(out, "# Skipped: {warning}");
    }
    out
}

#[derive(Serialize)]
struct JsonReport {
    file_version: u32,
    from: String,
    to: String,
    intervals: u64,
    files: usize,
    skipped_lines: u64,
    torn_files: usize,
    warning: Option<String>,
    sysinfo: JsonSysinfo,
    num_threads: usize,
    resolution_in_ns: u8,
    thread: BTreeMap<usize, JsonThread>,
    latencyd: JsonLatencyd,
}

#[derive(Serialize)]
struct JsonSysinfo {
    nodename: String,
    release: String,
    realtime: u8,
}

#[derive(Serialize)]
struct JsonThread {
    /// 1 µs bins (1 ns with -N is not kept: the record's precision).
    histogram: BTreeMap<u64, u64>,
    cycles: u64,
    min: u64,
    max: u64,
    avg: f64,
    cpu: usize,
    missed: u64,
    overflows: u64,
    spikes: u64,
    quantiles: BTreeMap<&'static str, u64>,
}

#[derive(Serialize)]
struct JsonLatencyd {
    version: &'static str,
    source: &'static str,
    interval_ns: u64,
    policy: String,
    priority: i32,
    unit: &'static str,
    /// Stretches without samples the record names, oldest first.
    gaps: Vec<JsonGap>,
    /// The `[hwnoise]` windows in the range, oldest first.
    hwnoise: Vec<JsonHwnoise>,
    /// CPU intervals measured while a window spun the CPU: not in the
    /// figures.
    hwnoise_intervals_left_out: u64,
    /// The kernel's timerlat (`[timerlat]`), by CPU then context, in the
    /// report's unit.
    timerlat: BTreeMap<usize, BTreeMap<String, JsonTimerlat>>,
}

#[derive(Serialize)]
struct JsonTimerlat {
    count: u64,
    min: u64,
    avg: f64,
    p99: u64,
    max: u64,
}

#[derive(Serialize)]
struct JsonHwnoise {
    start: String,
    end: String,
    cpus: String,
    threshold_us: u64,
    width_us: u64,
    window_us: u64,
    /// `ran` or `skipped`.
    outcome: &'static str,
    /// Why it was skipped: `busy`, `unavailable` or `failed`.
    reason: Option<String>,
    samples: u64,
    max_gap_us: u64,
    nmis: u64,
    smis: Option<u64>,
}

fn json_timerlat(
    report: &ReadReport,
    unit: u64,
) -> BTreeMap<usize, BTreeMap<String, JsonTimerlat>> {
    let mut out: BTreeMap<usize, BTreeMap<String, JsonTimerlat>> = BTreeMap::new();
    for ((cpu, context), s) in &report.timerlat {
        let figures = JsonTimerlat {
            count: s.count,
            min: s.min_ns() / unit,
            avg: (s.avg_ns() / unit as f64 * 100.0).round() / 100.0,
            p99: s.quantile_ns(990_000) / unit,
            max: s.max_ns / unit,
        };
        out.entry(*cpu)
            .or_default()
            .insert(context.clone(), figures);
    }
    out
}

impl JsonHwnoise {
    fn of(w: &crate::record::HwnoiseLine) -> JsonHwnoise {
        use crate::record::HwnoiseOutcome;
        let (outcome, reason, samples, max_gap_us, nmis, smis) = match &w.outcome {
            HwnoiseOutcome::Ran {
                samples,
                max_us,
                nmis,
                smis,
                ..
            } => ("ran", None, *samples, *max_us, *nmis, *smis),
            HwnoiseOutcome::Skipped(reason) => ("skipped", Some(reason.clone()), 0, 0, 0, None),
        };
        JsonHwnoise {
            start: format_rfc3339_ms(w.start_ns),
            end: format_rfc3339_ms(w.end_ns),
            cpus: crate::cpulist::format_cpu_list(&w.cpus),
            threshold_us: w.threshold_us,
            width_us: w.width_us,
            window_us: w.window_us,
            outcome,
            reason,
            samples,
            max_gap_us,
            nmis,
            smis,
        }
    }
}

#[derive(Serialize)]
struct JsonGap {
    cpu: usize,
    /// `stalled` or `offline`.
    reason: &'static str,
    start: String,
    end: String,
    duration_ns: u64,
}

/// The summary as JSON (pretty, ending in a newline).
pub fn json(summary: &Summary, report: &ReadReport, nsecs: bool) -> String {
    let unit = if nsecs { 1 } else { NS_PER_US };
    let context: Context = report.context.clone().unwrap_or_default();
    let (from, to) = summary.span_ns.unwrap_or((0, 0));
    let thread = summary
        .cpus
        .iter()
        .enumerate()
        .map(|(i, (cpu, s))| {
            let mut histogram = BTreeMap::new();
            for_each_bin_us(s, |us, count| {
                let key = if nsecs { us * NS_PER_US } else { us };
                *histogram.entry(key).or_insert(0) += count;
            });
            let thread = JsonThread {
                histogram,
                cycles: s.count,
                min: s.min_ns() / unit,
                max: s.max_ns / unit,
                avg: (s.avg_ns() / unit as f64 * 100.0).round() / 100.0,
                cpu: *cpu,
                missed: s.missed,
                overflows: s.hdr_overflows,
                spikes: s.spikes,
                quantiles: REPORTED_QUANTILES
                    .iter()
                    .map(|&(ppm, name)| (name, s.quantile_ns(ppm) / unit))
                    .collect(),
            };
            (i, thread)
        })
        .collect();
    let doc = JsonReport {
        file_version: 1,
        from: format_rfc3339_ms(from),
        to: format_rfc3339_ms(to),
        intervals: report.entries,
        files: report.files,
        skipped_lines: report.corrupt,
        torn_files: report.torn.len(),
        warning: report.warning(),
        sysinfo: JsonSysinfo {
            nodename: context.host.clone(),
            release: context.kernel.clone(),
            realtime: u8::from(context.preempt_rt),
        },
        num_threads: summary.cpus.len(),
        resolution_in_ns: u8::from(nsecs),
        thread,
        latencyd: JsonLatencyd {
            version: env!("CARGO_PKG_VERSION"),
            source: "record",
            interval_ns: context.interval_ns,
            policy: context.policy,
            priority: context.priority,
            unit: if nsecs { "ns" } else { "us" },
            gaps: report
                .gaps
                .iter()
                .map(|g| JsonGap {
                    cpu: g.cpu,
                    reason: g.reason.name(),
                    start: format_rfc3339_ms(g.start_ns),
                    end: format_rfc3339_ms(g.end_ns),
                    duration_ns: g.end_ns - g.start_ns,
                })
                .collect(),
            hwnoise: report.hwnoise.iter().map(JsonHwnoise::of).collect(),
            hwnoise_intervals_left_out: report.hwnoise_entries,
            timerlat: json_timerlat(report, unit),
        },
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("the JSON DTOs always serialize");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{HwnoiseLine, HwnoiseOutcome};

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
