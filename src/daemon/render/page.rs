//! What people look at: the status page (`/`) with the host, the
//! samplers' real-time state, a per-CPU table and the latency plots (the
//! samplers', and timerlat's while it has periods; their data in `plots`).
//!
//! Both are built in two steps: a snapshot of plain data taken under the
//! state's lock ([`Snapshot::take`]), then the drawing and the HTML, done
//! after the lock is released so that a slow render never holds up the
//! collector. The page is self-contained (inline CSS, the SVG inline, no
//! script, no external asset) and refreshes itself with a `<meta>` tag.

use std::fmt::Write as _;

pub use super::page_cpus::CpuRow;
use super::page_cpus::render_cpus;
pub use super::page_parts::error_page;
use super::page_parts::{gap_line, human_duration, render_budget, render_gaps, render_record};
use crate::markup::STYLE;

use super::plots;
use crate::daemon::state::MonitorState;
use crate::plot::{PlotData, Source};
use crate::stats::P99;
use crate::units::format_duration_ns;

/// How often the page reloads itself, in seconds.
pub const REFRESH_SECONDS: u32 = 5;

/// Everything the plot and the page show, copied out of the state.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub nodename: String,
    pub kernel: String,
    pub kernel_version: String,
    pub preempt_rt: bool,
    pub uptime_ns: u64,
    pub healthy: bool,
    pub non_rt_reasons: Vec<String>,
    /// Online CPUs without a sampler, with why.
    pub unmeasured: Vec<(usize, crate::sampling::Unmeasured)>,
    /// What the registered instruments say of the CPUs without a sampler
    /// they watch (the observer: a line per CPU, or why it does not run),
    /// as text.
    pub cpu_notes: Vec<String>,
    /// The registered instruments' lists (timerlat's, per CPU), by
    /// instrument, those with none left out.
    pub lists: Vec<(&'static str, Vec<String>)>,
    pub interval_ns: u64,
    pub max_window_ns: u64,
    /// The latency budget (`measure.spike_threshold`).
    pub budget_ns: u64,
    /// The span the plot covers: `None` for the lifetime.
    pub plot_window_ns: Option<u64>,
    pub rows: Vec<CpuRow>,
    pub plot: PlotData,
    /// The registered instruments' plots (timerlat's: every CPU and
    /// context), those with series, each with its source.
    pub instrument_plots: Vec<(Source, PlotData)>,
    /// The registered instruments' sections (HTML), after the gaps and
    /// after the record.
    pub sections: Vec<String>,
    pub sections_after_record: Vec<String>,
    /// The on-disk record: whether it is written, where, and how it goes.
    pub record: crate::record::Status,
    /// The registered instruments' lines, by instrument.
    pub lines: Vec<(&'static str, crate::instruments::shape::PageLine)>,
    /// The latest stretches without samples, one line each, and whether
    /// each is still going on.
    pub gaps: Vec<(String, bool)>,
}

impl Snapshot {
    /// Copies what is needed from the state; `window_ns` chooses the
    /// plot's histograms (lifetime when `None`).
    pub fn take(s: &MonitorState, clock: super::clock::Now, window_ns: Option<u64>) -> Snapshot {
        let now_ns = clock.monotonic_ns;
        let health = s.health(now_ns);
        let (plot, plot_window_ns) = plots::live(s, now_ns, window_ns, &Source::Samplers);
        let instrument_plots = (s.parts.iter())
            .filter(|(_, part)| !part.plot_lines().is_empty())
            .filter_map(|(name, _)| Source::parse(Some(name), None).ok())
            .map(|source| {
                let data = plots::live(s, now_ns, window_ns, &source).0;
                (source, data)
            })
            .collect();
        Snapshot {
            nodename: s.host.uname.nodename.clone(),
            kernel: s.host.uname.release.clone(),
            kernel_version: s.host.uname.version.clone(),
            preempt_rt: s.host.preempt_rt,
            uptime_ns: now_ns.saturating_sub(s.started_ns),
            healthy: health.healthy,
            non_rt_reasons: s.non_rt_reasons.clone(),
            unmeasured: s.unmeasured.clone(),
            cpu_notes: (s.parts.iter())
                .flat_map(|(_, part)| part.cpu_notes(now_ns))
                .collect(),
            lists: (s.parts.iter())
                .map(|(name, part)| (name, part.page_list(now_ns)))
                .filter(|(_, list)| !list.is_empty())
                .collect(),
            interval_ns: s.config.measure.interval_ns,
            max_window_ns: s.config.export.max_window_ns,
            budget_ns: s.config.measure.spike_threshold_ns,
            sections: (s.parts.iter())
                .filter_map(|(_, part)| part.page_section(clock))
                .collect(),
            sections_after_record: (s.parts.iter())
                .filter_map(|(_, part)| part.page_section_after_record(clock))
                .collect(),
            record: s.record.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            plot_window_ns,
            lines: (s.parts.iter())
                .filter_map(|(name, part)| Some((name, part.page_line()?)))
                .collect(),
            gaps: s
                .gaps
                .seen
                .iter()
                .map(|g| (gap_line(g, clock.unix_ns), g.end_unix_ns.is_none()))
                .collect(),
            rows: s
                .cpus
                .iter()
                .map(|v| CpuRow {
                    cpu: v.cpu,
                    sampler: v.sampler.clone(),
                    stale: health.stale.iter().any(|(cpu, _)| *cpu == v.cpu),
                    count: v.lifetime.count,
                    min_ns: v.lifetime.min_ns(),
                    avg_ns: v.lifetime.avg_ns(),
                    p99_ns: v.lifetime.quantile_ns(P99),
                    max_ns: v.lifetime.max_ns,
                    window_max_ns: v.window.max(now_ns),
                    missed: v.lifetime.missed,
                    over_window: v.over_budget.sum(now_ns),
                    over_total: v.lifetime.spikes,
                })
                .collect(),
            plot,
            instrument_plots,
        }
    }
}

pub use crate::markup::escape;

/// The page's head, title, kernel line, health and load window.
fn render_head(html: &mut String, snap: &Snapshot) {
    let host = escape(&snap.nodename);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>latencyd — {host}</title><style>{STYLE}</style></head><body>\n"
    );
    let _ = write!(
        html,
        "<h1>latencyd on {host}</h1>\n<p class=\"sub\" id=\"kernel\">Linux {} {}{} · up {} · \
         every {} · window max over {}</p>\n",
        escape(&snap.kernel),
        escape(&snap.kernel_version),
        if snap.preempt_rt { " (PREEMPT_RT)" } else { "" },
        human_duration(snap.uptime_ns),
        format_duration_ns(snap.interval_ns),
        format_duration_ns(snap.max_window_ns),
    );
    render_budget(
        html,
        snap.budget_ns,
        snap.max_window_ns,
        snap.rows.iter().map(|r| r.over_window).sum(),
        snap.rows.iter().map(|r| r.over_total).sum(),
    );
    let _ = writeln!(
        html,
        "<p id=\"health\">Health: {}. Real-time: {}.</p>",
        if snap.healthy {
            "<span class=\"ok\">ok</span>"
        } else {
            "<span class=\"bad\">UNHEALTHY</span> (a sampler is dead or stalled)"
        },
        if snap.non_rt_reasons.is_empty() {
            "<span class=\"ok\">yes</span>".to_string()
        } else {
            let reasons: Vec<String> = snap.non_rt_reasons.iter().map(|r| escape(r)).collect();
            format!("<span class=\"bad\">no</span> — {}", reasons.join("; "))
        },
    );
    for (id, line) in &snap.lines {
        let running = line.running.map_or_else(String::new, |running| {
            format!("<span class=\"bad\">{running}</span>: ")
        });
        let _ = writeln!(html, "<p id=\"{id}\">{running}{}</p>", escape(&line.text));
    }
}

/// The status page; `plot_svg` is the rendered plot, or why it could not
/// be drawn, and `instrument_svgs` the instruments' plots', in the order
/// of `snap.instrument_plots`.
pub fn render_page(
    snap: &Snapshot,
    plot_svg: Result<&str, &str>,
    instrument_svgs: &[Result<&str, &str>],
) -> String {
    let mut html = String::with_capacity(16 * 1024);
    render_head(&mut html, snap);
    render_cpus(&mut html, &snap.rows);
    render_unmeasured(&mut html, snap);
    render_lists(&mut html, snap);
    render_gaps(&mut html, &snap.gaps);
    for section in &snap.sections {
        html.push_str(section);
    }
    render_record(&mut html, &snap.record);
    for section in &snap.sections_after_record {
        html.push_str(section);
    }
    let scope = match snap.plot_window_ns {
        None => "since start".to_string(),
        Some(ns) => format!("over the last {}", format_duration_ns(ns)),
    };
    let _ = writeln!(
        html,
        "<div class=\"plot\" id=\"plot\"><p>Histogram {scope} (<a href=\"/\">since start</a> · \
         <a href=\"/?window={w}\">last {w}</a>)</p>",
        w = format_duration_ns(snap.max_window_ns),
    );
    push_plot(&mut html, plot_svg);
    for ((source, _), svg) in snap.instrument_plots.iter().zip(instrument_svgs) {
        let _ = writeln!(
            html,
            "</div>\n<div class=\"plot\" id=\"{name}-plot\"><p>{} (<a \
             href=\"/plot.svg?source={name}\">alone</a>)</p>",
            source.caption(&scope),
            name = source.name(),
        );
        push_plot(&mut html, *svg);
    }
    let _ = write!(
        html,
        "</div>\n<footer>latencyd {} · refreshes every {REFRESH_SECONDS} s · \
         <a href=\"/metrics\">/metrics</a> · <a href=\"/api/v1/status\">/api/v1/status</a> · \
         <a href=\"/api/v1/latency\">/api/v1/latency</a> · <a href=\"/plot.svg\">/plot.svg</a>\
         </footer>\n</body></html>\n",
        env!("CARGO_PKG_VERSION")
    );
    html
}

/// A plot drawn inline, or why it could not be drawn.
fn push_plot(html: &mut String, svg: Result<&str, &str>) {
    match svg {
        Ok(svg) => html.push_str(strip_xml_declaration(svg)),
        Err(why) => {
            let _ = write!(html, "<p class=\"bad\">No plot: {}</p>", escape(why));
        }
    }
}

/// The registered instruments' lists (what timerlat saw on the measured
/// CPUs, or why it does not run), each under its instrument's name.
fn render_lists(html: &mut String, snap: &Snapshot) {
    for (name, list) in &snap.lists {
        let _ = writeln!(html, "<ul id=\"{name}\" class=\"sub\">");
        for line in list {
            let _ = writeln!(html, "<li>{}</li>", escape(line));
        }
        html.push_str("</ul>\n");
    }
}

/// Online CPUs without a sampler, grouped by reason, so that a CPU left
/// out is never mistaken for one that is quiet. Left out by the
/// configuration is said plainly; by the system, as a problem. Before
/// them, what the instruments that watch CPUs without a sampler see there.
fn render_unmeasured(html: &mut String, snap: &Snapshot) {
    if snap.unmeasured.is_empty() && snap.cpu_notes.is_empty() {
        return;
    }
    let mut reasons: Vec<crate::sampling::Unmeasured> =
        snap.unmeasured.iter().map(|&(_, r)| r).collect();
    reasons.sort();
    reasons.dedup();
    let class = if reasons.is_empty() || reasons == [crate::sampling::Unmeasured::Config] {
        "sub"
    } else {
        "bad"
    };
    let _ = writeln!(html, "<ul id=\"unmeasured\" class=\"{class}\">");
    for line in &snap.cpu_notes {
        let _ = writeln!(html, "<li class=\"sub\">{}</li>", escape(line));
    }
    for reason in reasons {
        let cpus: Vec<usize> = snap
            .unmeasured
            .iter()
            .filter(|&&(_, r)| r == reason)
            .map(|&(c, _)| c)
            .collect();
        let _ = writeln!(
            html,
            "<li>Not measured: CPU {} — {}</li>",
            crate::cpulist::format_cpu_list(&cpus),
            escape(reason.explain()),
        );
    }
    html.push_str("</ul>\n");
}

/// An SVG document's root element, fit to go inline in HTML.
fn strip_xml_declaration(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(start) => &svg[start..],
        None => svg,
    }
}
