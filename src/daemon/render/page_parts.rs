//! Parts of the status page that need nothing of its snapshot: the gaps
//! in the measurement, the record's line, durations for people.

use std::fmt::Write as _;

use crate::calendar::format_rfc3339_ms;
use crate::daemon::state::GapSeen;
use crate::plot::capture::escape;
use crate::record::GapReason;
use crate::units::{NS_PER_SEC, format_duration_ns};

/// One stretch without samples, for people.
pub(super) fn gap_line(g: &GapSeen, now_unix_ns: u64) -> String {
    let from = format_rfc3339_ms(g.start_unix_ns)[..19].replace('T', " ");
    let how_long = human_duration(g.end_unix_ns.unwrap_or(now_unix_ns) - g.start_unix_ns);
    let what = match g.reason {
        GapReason::Stalled => "its sampler did not run",
        GapReason::Offline => "offline",
    };
    let held = g
        .held_by
        .as_ref()
        .map_or(String::new(), |h| format!(", held by {h}"));
    match g.end_unix_ns {
        None => format!(
            "CPU {}: {what} since {from} UTC ({how_long} so far{held})",
            g.cpu
        ),
        Some(_) => format!("CPU {}: {what} for {how_long} from {from} UTC{held}", g.cpu),
    }
}

/// The "Gaps" list: stretches without samples, the ones going on marked;
/// nothing when there were none.
pub(super) fn render_gaps(html: &mut String, gaps: &[(String, bool)]) {
    if gaps.is_empty() {
        return;
    }
    html.push_str("<h2>Gaps in the measurement</h2>\n<ul id=\"gaps\">\n");
    for (line, open) in gaps {
        let class = if *open { " class=\"bad\"" } else { "" };
        let _ = writeln!(html, "<li{class}>{}</li>", escape(line));
    }
    html.push_str("</ul>\n");
}

/// The "Record" line: where the on-disk record goes and how it goes
/// (files, bytes, the last interval written, errors), beside forensics.
pub(super) fn render_record(html: &mut String, record: &crate::record::Status) {
    html.push_str("<h2>Record</h2>\n");
    if !record.enabled {
        html.push_str(
            "<p id=\"record\" class=\"sub\">The record is off: no state directory, or \
             <code>record.enabled = false</code>.</p>\n",
        );
        return;
    }
    let last = record
        .last_written_ns
        .map_or_else(|| "none yet".to_string(), format_rfc3339_ms);
    let _ = write!(
        html,
        "<p id=\"record\" class=\"sub\">{dir}, every {every}: {files} files, {kib} KiB; \
         last interval written {last}; {written} written, {dropped} dropped, \
         {errors} write errors, {backlog} waiting",
        dir = escape(&record.dir),
        every = format_duration_ns(record.interval_ns),
        files = record.files,
        kib = record.bytes.div_ceil(1024),
        written = record.intervals_written,
        dropped = record.intervals_dropped,
        errors = record.write_errors,
        backlog = record.backlog,
    );
    if let Some(error) = &record.error {
        let _ = write!(html, ". <strong>Failing: {}</strong>", escape(error));
    }
    html.push_str(".</p>\n");
}

/// A duration as the page shows an uptime: `3 min 12 s`.
pub(super) fn human_duration(ns: u64) -> String {
    let s = ns / NS_PER_SEC;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}
