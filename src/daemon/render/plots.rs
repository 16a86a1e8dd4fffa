//! The latency plots' data (`/plot.svg`, the status page): the samplers'
//! histograms or timerlat's (`?source=timerlat`), since start or over a
//! trailing window (taken under the state's lock), or over a range of the
//! record.

use std::collections::BTreeMap;

use crate::calendar::format_rfc3339_ms;
use crate::daemon::state::MonitorState;
use crate::plot::{self, CpuSeries, PlotData, Source};
use crate::units::format_duration_ns;

/// The plot of `source` since start (`window_ns` `None`) or over the
/// trailing window, and the span that window covers (whole slots).
pub fn live(
    s: &MonitorState,
    now_ns: u64,
    window_ns: Option<u64>,
    source: &Source,
) -> (PlotData, Option<u64>) {
    let mut covered = None;
    let mut series_of =
        |label: String,
         lifetime: &crate::stats::LatencyStats,
         recent: &crate::daemon::state::WindowHistogram,
         window: &crate::daemon::state::WindowMax| match window_ns {
            None => plot::series_from_stats(label, lifetime),
            Some(asked) => {
                let (bins, span) = recent.bins_within(now_ns, asked);
                covered = Some(span);
                window_series(label, bins, window.max_within(now_ns, span))
            }
        };
    let series: Vec<CpuSeries> = match source {
        Source::Samplers => (s.cpus.iter())
            .map(|v| series_of(format!("CPU {}", v.cpu), &v.lifetime, &v.recent, &v.window))
            .collect(),
        // A registered instrument's: the source's name is its name.
        _ => (s.parts.get(source.name()).map(|part| part.plot_lines()))
            .unwrap_or_default()
            .into_iter()
            .filter(|line| source.wants(line.line))
            .map(|line| {
                let label = plot::source::label(line.cpu, line.line);
                series_of(label, line.lifetime, line.recent, line.window)
            })
            .collect(),
    };
    let title = match covered.or(window_ns) {
        None => format!("{} since start", source.title()),
        Some(ns) => format!("{}, last {}", source.title(), format_duration_ns(ns)),
    };
    let data = PlotData {
        title,
        subtitle: subtitle(s),
        series,
    };
    (data, covered.or(window_ns))
}

/// The plot of `source` over a range of the record, as read.
pub fn from_record(
    s: &MonitorState,
    range: crate::record::Range,
    summary: &crate::record::Summary,
    report: &crate::record::ReadReport,
    source: &Source,
) -> PlotData {
    let series = match source {
        Source::Samplers => (summary.cpus.iter())
            .map(|(cpu, stats)| plot::series_from_stats(format!("CPU {cpu}"), stats))
            .collect(),
        _ => source.timerlat_series(report.lines_of(source.name())),
    };
    PlotData {
        title: format!(
            "{} from {} to {}",
            source.title(),
            format_rfc3339_ms(range.from_ns.max(summary.span_ns.map_or(0, |s| s.0))),
            format_rfc3339_ms(range.to_ns.min(summary.span_ns.map_or(u64::MAX, |s| s.1)))
        ),
        subtitle: subtitle(s),
        series,
    }
}

fn subtitle(s: &MonitorState) -> String {
    plot::subtitle(
        Some(&s.host.uname.nodename),
        Some(&s.host.uname.release),
        s.host.preempt_rt,
    )
}

/// A series over a window: its 1 µs bins and the window's exact maximum
/// (0 when the window holds no sample).
fn window_series(label: String, bins: BTreeMap<u64, u64>, max_ns: Option<u64>) -> CpuSeries {
    CpuSeries {
        label,
        bins_us: bins.into_iter().collect(),
        max_us: max_ns.unwrap_or(0) as f64 / 1_000.0,
    }
}
