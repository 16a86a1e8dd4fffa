//! The report as JSON in cyclictest's `--json` layout (`thread.N` with
//! `cycles`, `min`, `avg`, `max` and a 1 µs `histogram`), with the range,
//! timerlat's contexts, the hwnoise windows, the gaps and what was
//! skipped under `latencyd`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::calendar::format_rfc3339_ms;
use crate::record::{Context, ReadReport, Summary};
use crate::stats::{REPORTED_QUANTILES, for_each_bin_us};
use crate::units::NS_PER_US;

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
