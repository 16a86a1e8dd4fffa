//! The report as text: cyclictest's `T:` lines per CPU (the same columns),
//! then comment lines with what the record adds.

use std::fmt::Write as _;

use crate::calendar::format_rfc3339_ms;
use crate::measure::text::format_summary_line;
use crate::record::{ReadReport, Summary};
use crate::stats::REPORTED_QUANTILES;
use crate::units::NS_PER_US;

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
