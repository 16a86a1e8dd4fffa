//! Renderers for `measure`: cyclictest's summary lines, its `-h`
//! histogram block and its `--json` file, from a finished run's snapshot.
//!
//! They are pure functions (snapshot in, text out) so that their output
//! can be checked byte for byte against files under `tests/data/`. The
//! formats copy cyclictest 2.x closely enough that scripts written for
//! cyclictest's output parse ours unchanged; where we add information it
//! goes into new JSON fields or `#` comment lines.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::cpulist::format_cpu_list;
use crate::host::HostInfo;
use crate::stats::{LatencyStats, REPORTED_QUANTILES};
use crate::sys::Policy;
use crate::units::NS_PER_US;

/// One sampler's results.
#[derive(Debug, Clone)]
pub struct ThreadReport {
    pub cpu: usize,
    pub numa_node: i32,
    pub tid: i32,
    pub priority: i32,
    pub interval_ns: u64,
    pub realtime: bool,
    pub stats: LatencyStats,
}

/// A whole run's results and what the JSON file says about the host.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub cmdline: String,
    pub start_time: SystemTime,
    pub end_time: SystemTime,
    pub return_code: i32,
    pub host: HostInfo,
    /// The value `/dev/cpu_dma_latency` was held at, if it was.
    pub pm_qos_us: Option<i32>,
    pub policy: Policy,
    /// Report in nanoseconds (cyclictest's `-N`) instead of microseconds.
    pub nsecs: bool,
    /// Add the all-threads column to the `-h` block (cyclictest's `-H`).
    pub histofall: bool,
    pub threads: Vec<ThreadReport>,
}

impl RunReport {
    fn unit_ns(&self) -> u64 {
        if self.nsecs { 1 } else { NS_PER_US }
    }

    /// Every sampler ran with its real-time policy.
    pub fn realtime(&self) -> bool {
        self.threads.iter().all(|t| t.realtime)
    }
}

/// cyclictest's per-thread line, e.g.
/// `T: 0 ( 2012) P:80 I:1000 C:    300 Min:      3 Act:    6 Avg:    5 Max:      35`.
pub fn summary_line(report: &RunReport, thread_idx: usize) -> String {
    let thread = &report.threads[thread_idx];
    format_summary_line(
        thread_idx,
        thread.tid,
        thread.priority,
        thread.interval_ns,
        &thread.stats,
        report.nsecs,
    )
}

/// The summary line from its parts, for live display without a report.
pub fn format_summary_line(
    thread_idx: usize,
    tid: i32,
    priority: i32,
    interval_ns: u64,
    stats: &LatencyStats,
    nsecs: bool,
) -> String {
    let unit = if nsecs { 1 } else { NS_PER_US };
    let avg = if stats.count == 0 {
        0
    } else {
        (stats.sum_ns / u128::from(stats.count)) as u64 / unit
    };
    // cyclictest widens Act and Avg in nanosecond mode.
    let width = if nsecs { 8 } else { 5 };
    format!(
        "T:{:2} ({:5}) P:{:2} I:{} C:{:7} Min:{:7} Act:{:width$} Avg:{:width$} Max:{:8}",
        thread_idx,
        tid,
        priority,
        interval_ns / NS_PER_US,
        stats.count,
        stats.min_ns() / unit,
        stats.last_ns / unit,
        avg,
        stats.max_ns / unit,
    )
}

/// All summary lines, one per thread, each ending in a newline.
pub fn summary_lines(report: &RunReport) -> String {
    (0..report.threads.len())
        .map(|i| summary_line(report, i) + "\n")
        .collect()
}

/// cyclictest's `-h`/`-H` block: a row per bin with a column per thread,
/// then the `# Total:`, `# Min/Avg/Max Latencies:`, `# Histogram
/// Overflows:` and overflow sample-number footers. Empty if the run kept
/// no linear histogram.
pub fn histogram_block(report: &RunReport) -> String {
    let linears: Vec<_> = report
        .threads
        .iter()
        .filter_map(|t| t.stats.linear())
        .collect();
    if linears.is_empty() || linears.len() != report.threads.len() {
        return String::new();
    }
    let unit = report.unit_ns();
    let all_column = report.histofall && report.threads.len() > 1;
    let n_bins = linears[0].bins().len();
    let mut out = String::from("# Histogram\n");
    let mut totals = vec![0u64; linears.len()];
    let mut grand_total = 0u64;
    for bin in 0..n_bins {
        let _ = write!(out, "{bin:06} ");
        let mut row_total = 0;
        for (j, linear) in linears.iter().enumerate() {
            let count = linear.bins()[bin];
            let _ = write!(out, "{count:06}");
            if j + 1 < linears.len() {
                out.push('\t');
            }
            totals[j] += count;
            row_total += count;
        }
        if all_column {
            let _ = write!(out, "\t{row_total:06}");
            grand_total += row_total;
        }
        out.push('\n');
    }
    let footer = |out: &mut String, label: &str, values: &[u64], all: Option<u64>, width: usize| {
        out.push_str(label);
        for v in values {
            let _ = write!(out, " {v:0width$}");
        }
        if let Some(all) = all {
            let _ = write!(out, " {all:0width$}");
        }
        out.push('\n');
    };
    footer(
        &mut out,
        "# Total:",
        &totals,
        all_column.then_some(grand_total),
        9,
    );
    let mins: Vec<u64> = report
        .threads
        .iter()
        .map(|t| t.stats.min_ns() / unit)
        .collect();
    footer(&mut out, "# Min Latencies:", &mins, None, 5);
    let avgs: Vec<u64> = report
        .threads
        .iter()
        .map(|t| t.stats.avg_ns() as u64 / unit)
        .collect();
    footer(&mut out, "# Avg Latencies:", &avgs, None, 5);
    let maxes: Vec<u64> = report
        .threads
        .iter()
        .map(|t| t.stats.max_ns / unit)
        .collect();
    let max_of_all = maxes.iter().copied().max().unwrap_or(0);
    footer(
        &mut out,
        "# Max Latencies:",
        &maxes,
        all_column.then_some(max_of_all),
        5,
    );
    let overflows: Vec<u64> = linears.iter().map(|l| l.overflows()).collect();
    let all_overflows = overflows.iter().sum();
    footer(
        &mut out,
        "# Histogram Overflows:",
        &overflows,
        all_column.then_some(all_overflows),
        5,
    );
    out.push_str("# Histogram Overflow at cycle number:\n");
    for (i, linear) in linears.iter().enumerate() {
        let _ = write!(out, "# Thread {i}:");
        for sample in linear.overflow_samples() {
            let _ = write!(out, " {sample:05}");
        }
        let kept = linear.overflow_samples().len() as u64;
        if kept < linear.overflows() {
            let _ = write!(out, " # {:05} others", linear.overflows() - kept);
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

/// The `--json` document: cyclictest's schema (including its `cmdline:`
/// and `rt_test_version:` keys, colon and all, since scripts look them up
/// by those names) plus latencyd's own fields.
#[derive(Serialize)]
struct JsonRun<'a> {
    file_version: u32,
    #[serde(rename = "cmdline:")]
    cmdline_cyclictest: &'a str,
    cmdline: &'a str,
    #[serde(rename = "rt_test_version:")]
    version_cyclictest: String,
    start_time: String,
    end_time: String,
    return_code: i32,
    sysinfo: JsonSysinfo<'a>,
    num_threads: usize,
    resolution_in_ns: u8,
    thread: BTreeMap<usize, JsonThread>,
    latencyd: JsonLatencyd,
}

#[derive(Serialize)]
struct JsonSysinfo<'a> {
    sysname: &'a str,
    nodename: &'a str,
    release: &'a str,
    version: &'a str,
    machine: &'a str,
    realtime: u8,
}

#[derive(Serialize)]
struct JsonThread {
    histogram: BTreeMap<usize, u64>,
    cycles: u64,
    min: u64,
    max: u64,
    avg: f64,
    cpu: usize,
    node: i32,
    missed: u64,
    overflows: u64,
    spikes: u64,
    #[serde(flatten)]
    quantiles: BTreeMap<&'static str, u64>,
    tid: i32,
    priority: i32,
    realtime: bool,
}

#[derive(Serialize)]
struct JsonLatencyd {
    version: &'static str,
    realtime: bool,
    policy: &'static str,
    unit: &'static str,
    interval_ns: u64,
    spike_threshold_ns: u64,
    pm_qos_us: Option<i32>,
    host: HostFacts,
}

/// What decides whether the numbers can be trusted, as detected at start;
/// the same object in `measure --json` and the daemon's `/api/v1/status`.
#[derive(Serialize)]
pub(crate) struct HostFacts {
    preempt_rt: bool,
    usable_cpus: String,
    cap_sys_nice: bool,
    cap_ipc_lock: bool,
    rtprio_limit: Option<u64>,
    memlock_limit_bytes: Option<u64>,
    sched_rt_runtime_us: Option<i64>,
    clock_resolution_ns: Option<u64>,
}

impl HostFacts {
    pub(crate) fn of(host: &HostInfo) -> HostFacts {
        HostFacts {
            preempt_rt: host.preempt_rt,
            usable_cpus: format_cpu_list(&host.usable_cpus),
            cap_sys_nice: host.cap_sys_nice,
            cap_ipc_lock: host.cap_ipc_lock,
            rtprio_limit: host.rtprio_limit,
            memlock_limit_bytes: host.memlock_limit,
            sched_rt_runtime_us: host.sched_rt_runtime_us,
            clock_resolution_ns: host.clock_resolution_ns,
        }
    }
}

/// The `--json` file's text (pretty-printed, ending in a newline). Always
/// valid JSON: a thread without samples reports zeroes where cyclictest
/// would write `-nan`.
pub fn json_document(report: &RunReport) -> String {
    let unit = report.unit_ns();
    let threads = report
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let s = &t.stats;
            let (histogram, overflows) = match s.linear() {
                Some(linear) => (
                    linear
                        .bins()
                        .iter()
                        .enumerate()
                        .filter(|(_, count)| **count > 0)
                        .map(|(bin, count)| (bin, *count))
                        .collect(),
                    linear.overflows(),
                ),
                None => (BTreeMap::new(), s.hdr_overflows),
            };
            let quantiles = REPORTED_QUANTILES
                .iter()
                .map(|&(ppm, name)| (name, s.quantile_ns(ppm) / unit))
                .collect();
            let avg = (s.avg_ns() / unit as f64 * 100.0).round() / 100.0;
            let thread = JsonThread {
                histogram,
                cycles: s.count,
                min: s.min_ns() / unit,
                max: s.max_ns / unit,
                avg,
                cpu: t.cpu,
                node: t.numa_node,
                missed: s.missed,
                overflows,
                spikes: s.spikes,
                quantiles,
                tid: t.tid,
                priority: t.priority,
                realtime: t.realtime,
            };
            (i, thread)
        })
        .collect();
    let first = report.threads.first();
    let host = &report.host;
    let doc = JsonRun {
        file_version: 1,
        cmdline_cyclictest: &report.cmdline,
        cmdline: &report.cmdline,
        version_cyclictest: format!("latencyd {}", env!("CARGO_PKG_VERSION")),
        start_time: format_rfc2822_utc(report.start_time),
        end_time: format_rfc2822_utc(report.end_time),
        return_code: report.return_code,
        sysinfo: JsonSysinfo {
            sysname: &host.uname.sysname,
            nodename: &host.uname.nodename,
            release: &host.uname.release,
            version: &host.uname.version,
            machine: &host.uname.machine,
            realtime: host.realtime_flag(),
        },
        num_threads: report.threads.len(),
        resolution_in_ns: u8::from(report.nsecs),
        thread: threads,
        latencyd: JsonLatencyd {
            version: env!("CARGO_PKG_VERSION"),
            realtime: report.realtime(),
            policy: report.policy.name(),
            unit: if report.nsecs { "ns" } else { "us" },
            interval_ns: first.map_or(0, |t| t.interval_ns),
            spike_threshold_ns: first.map_or(0, |t| t.stats.spike_threshold_ns()),
            pm_qos_us: report.pm_qos_us,
            host: HostFacts::of(host),
        },
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("the JSON DTOs always serialize");
    text.push('\n');
    text
}

/// Formats a time as cyclictest's JSON does (`Sun, 22 Nov 2026 02:45:38
/// +0000`), always in UTC so that files from a fleet compare directly.
pub fn format_rfc2822_utc(time: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let (year, month, day) = civil_from_days(days);
    let rem = secs % 86_400;
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} +0000",
        DAYS[(days % 7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// Converts days since 1970-01-01 to a (year, month, day) date in the
/// proleptic Gregorian calendar (Howard Hinnant's civil_from_days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_format_like_cyclictest() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_315_538);
        assert_eq!(format_rfc2822_utc(t), "Sun, 22 Nov 2026 02:45:38 +0000");
        assert_eq!(
            format_rfc2822_utc(UNIX_EPOCH),
            "Thu, 01 Jan 1970 00:00:00 +0000"
        );
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(format_rfc2822_utc(leap), "Tue, 29 Feb 2000 00:00:00 +0000");
    }
}
