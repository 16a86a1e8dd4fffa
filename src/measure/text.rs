//! cyclictest's text: the summary line per thread and the `-h`/`-H`
//! histogram block with its footers. Pure functions from a `RunReport`,
//! checked byte for byte against `tests/data/expected/`.

use std::fmt::Write as _;

use super::report::RunReport;
use crate::stats::{LatencyStats, LinearHistogram};
use crate::units::NS_PER_US;

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
    let mut out = String::from("# Histogram\n");
    let (totals, grand_total) = histogram_rows(&mut out, &linears, all_column);
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
    overflow_cycles(&mut out, &linears);
    let smis: Vec<u64> = report.threads.iter().filter_map(|t| t.smi_count).collect();
    if smis.len() == report.threads.len() {
        footer(&mut out, "# SMIs:", &smis, None, 5);
    }
    out.push('\n');
    out
}

/// One row per bin, a column per thread (and the all-threads column):
/// each column's total and the grand total.
fn histogram_rows(
    out: &mut String,
    linears: &[&LinearHistogram],
    all_column: bool,
) -> (Vec<u64>, u64) {
    let mut totals = vec![0u64; linears.len()];
    let mut grand_total = 0u64;
    for bin in 0..linears[0].bins().len() {
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
    (totals, grand_total)
}

/// The cycles whose sample fell past the histogram, per thread.
fn overflow_cycles(out: &mut String, linears: &[&LinearHistogram]) {
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
}
