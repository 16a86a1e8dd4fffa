//! Parts of the status page that need nothing of its snapshot: the
//! budget's line, the gaps in the measurement, the record's line,
//! durations and microseconds for people, and an error as a page.

use std::fmt::Write as _;

use crate::calendar::format_rfc3339_ms;
use crate::daemon::state::GapSeen;
use crate::markup::{escape, page_foot, page_head};
use crate::record::GapReason;
use crate::units::{NS_PER_SEC, format_duration_ns};

/// The line the page leads with: whether the host's latency budget
/// (`measure.spike_threshold`) held, from the wake-ups over it in the
/// window and since start (each CPU's in the table). Red while any
/// wake-up in the window went over it; amber when the window is clean but
/// some earlier one did; green when none ever did.
pub(super) fn render_budget(
    html: &mut String,
    budget_ns: u64,
    window_ns: u64,
    over_window: u64,
    over_total: u64,
) {
    let budget = format_duration_ns(budget_ns);
    let window = format_duration_ns(window_ns);
    let wake_ups = |n: u64| if n == 1 { "wake-up" } else { "wake-ups" };
    let verdict = if over_window > 0 {
        format!(
            "<span class=\"bad\">exceeded</span>: {over_window} {} over {budget} in the \
             last {window}, {over_total} since start",
            wake_ups(over_window)
        )
    } else if over_total > 0 {
        format!(
            "<span class=\"warn\">held for the last {window}</span>: none over {budget} \
             there, {over_total} {} since start",
            wake_ups(over_total)
        )
    } else {
        format!("<span class=\"ok\">held</span>: no wake-up over {budget} since start")
    };
    let _ = writeln!(
        html,
        "<p id=\"budget\">Latency budget (measure.spike_threshold): {verdict}.</p>"
    );
}

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
/// (files, bytes, the last interval written, errors).
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

/// An error as a page: what was wrong and what is accepted.
pub fn error_page(status: &str, message: &str) -> String {
    let mut html = String::with_capacity(2 * 1024);
    page_head(&mut html, &format!("{status} — latencyd"));
    let _ = writeln!(
        html,
        "<h1>{}</h1>\n<p id=\"error\">{}</p>",
        escape(status),
        escape(message)
    );
    page_foot(&mut html);
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_page_escapes_what_it_says() {
        let html = error_page("400 <Bad>", "'<script>'");
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<Bad>"), "{html}");
        assert!(html.contains("&lt;Bad&gt;") && html.contains("&#39;&lt;script&gt;&#39;"));
    }

    fn budget(over_window: u64, over_total: u64) -> String {
        let mut html = String::new();
        render_budget(&mut html, 50_000, 60 * NS_PER_SEC, over_window, over_total);
        html
    }

    #[test]
    fn the_budget_line_is_red_while_the_window_is_over_amber_after_and_green_if_never() {
        assert_eq!(
            budget(0, 0),
            "<p id=\"budget\">Latency budget (measure.spike_threshold): \
             <span class=\"ok\">held</span>: no wake-up over 50us since start.</p>\n"
        );
        assert_eq!(
            budget(0, 1),
            "<p id=\"budget\">Latency budget (measure.spike_threshold): \
             <span class=\"warn\">held for the last 1m</span>: none over 50us there, \
             1 wake-up since start.</p>\n"
        );
        assert_eq!(
            budget(3, 7),
            "<p id=\"budget\">Latency budget (measure.spike_threshold): \
             <span class=\"bad\">exceeded</span>: 3 wake-ups over 50us in the last 1m, \
             7 since start.</p>\n"
        );
    }
}
