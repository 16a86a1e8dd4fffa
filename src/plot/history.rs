//! Plots of the on-disk record: the OSADL-style histogram over a range,
//! and, as OSADL's long-term plots show, the maximum (and p99.9) of each
//! interval over time.
//!
//! Both read the record streaming. The over-time series keep at most
//! `MAX_POINTS` points per CPU however long the range: when a series
//! fills, neighbouring points merge in pairs (the larger maximum and the
//! larger p99.9 stay), so a year of 5-minute intervals draws in bounded
//! memory and never hides a spike.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{CpuSeries, PlotData, PlotError, Source, input, series_from_stats, subtitle};
use crate::calendar::format_rfc3339_ms;
use crate::record::{Context, Range, ReadReport, reader};
use crate::stats::P999;

/// Points kept per CPU in an over-time plot.
pub const MAX_POINTS: usize = 2_000;

/// One CPU's maxima over time.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    pub label: String,
    /// (start, unix seconds; maximum µs; p99.9 µs), in time order.
    pub points: Vec<(f64, f64, f64)>,
}

/// A stretch the record says had no samples on a CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeGap {
    /// The series it belongs to (`CPU 1`).
    pub label: String,
    /// Unix seconds.
    pub start_s: f64,
    pub end_s: f64,
    /// `stalled` or `offline`.
    pub reason: &'static str,
}

/// A plot of maxima over time.
#[derive(Debug, Clone, PartialEq)]
pub struct TimePlot {
    pub title: String,
    pub subtitle: String,
    pub series: Vec<TimeSeries>,
    /// Stretches without samples: each series' line is cut there and the
    /// stretch shaded.
    pub gaps: Vec<TimeGap>,
}

fn context_subtitle(context: Option<&Context>) -> String {
    context.map_or_else(String::new, |c| {
        subtitle(Some(&c.host), Some(&c.kernel), c.preempt_rt)
    })
}

fn range_title(what: &str, span: Option<(u64, u64)>) -> String {
    match span {
        Some((from, to)) => format!(
            "{what}, {} to {} UTC",
            format_rfc3339_ms(from)[..19].replace('T', " "),
            format_rfc3339_ms(to)[..19].replace('T', " ")
        ),
        None => what.to_string(),
    }
}

fn nothing(report: &ReadReport, source: &Source) -> PlotError {
    match source {
        Source::Samplers => input(format!(
            "the record has no interval in this range ({} file(s) read)",
            report.files
        )),
        Source::Timerlat(_) => input(format!(
            "the record has no timerlat interval of these CPUs and contexts in this range ({} \
             file(s) read); [timerlat] enabled = true files them",
            report.files
        )),
    }
}

/// The histogram of `cpus` (all when `None`) over `range`: the samplers'
/// one line per CPU, or timerlat's one per CPU and context.
pub fn histogram(
    files: &[PathBuf],
    range: Range,
    cpus: Option<&[usize]>,
    source: &Source,
) -> Result<(PlotData, ReadReport), PlotError> {
    let (summary, report) = crate::record::summarize(files, range, cpus).map_err(input)?;
    let series: Vec<CpuSeries> = match source {
        Source::Samplers => (summary.cpus.iter())
            .map(|(cpu, stats)| series_from_stats(format!("CPU {cpu}"), stats))
            .collect(),
        Source::Timerlat(_) => source.timerlat_series(
            (report.timerlat.iter())
                .filter(|((cpu, _), _)| cpus.is_none_or(|c| c.contains(cpu)))
                .map(|((cpu, context), stats)| (*cpu, context.as_str(), stats)),
        ),
    };
    if series.is_empty() {
        return Err(nothing(&report, source));
    }
    let data = PlotData {
        title: range_title(&source.title(), summary.span_ns),
        subtitle: context_subtitle(report.context.as_ref()),
        series,
    };
    Ok((data, report))
}

/// Idle against loaded: the intervals of `cpus` over `range` measured
/// with no load running, and those measured under a load (`load=` in the
/// record), each all CPUs together, as two lines.
pub fn by_load(
    files: &[PathBuf],
    range: Range,
    cpus: Option<&[usize]>,
) -> Result<(PlotData, ReadReport), PlotError> {
    let (idle, loaded, profiles, report) =
        crate::record::summary::summarize_by_load(files, range, cpus).map_err(input)?;
    if idle.cpus.is_empty() || loaded.cpus.is_empty() {
        return Err(input(format!(
            "--by-load needs intervals measured idle and under a load in this range ({} \
             file(s) read); a [load] window or measure --load --log writes them",
            report.files
        )));
    }
    let span = [idle.span_ns, loaded.span_ns]
        .into_iter()
        .flatten()
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    let data = PlotData {
        title: range_title("Wake-up latency, idle and under load", span),
        subtitle: context_subtitle(report.context.as_ref()),
        series: vec![
            series_from_stats("idle".to_string(), &idle.combined()),
            series_from_stats(
                format!("under load {}", profiles.join("+")),
                &loaded.combined(),
            ),
        ],
    };
    Ok((data, report))
}

struct Downsampled {
    width_ns: u64,
    /// (bucket start ns, max ns, p99.9 ns).
    points: Vec<(u64, u64, u64)>,
}

impl Downsampled {
    fn add(&mut self, start_ns: u64, max_ns: u64, p999_ns: u64) {
        let bucket = start_ns / self.width_ns * self.width_ns;
        match self.points.last_mut() {
            Some(last) if last.0 == bucket => {
                last.1 = last.1.max(max_ns);
                last.2 = last.2.max(p999_ns);
            }
            _ => self.points.push((bucket, max_ns, p999_ns)),
        }
        if self.points.len() > MAX_POINTS {
            self.width_ns *= 2;
            let width = self.width_ns;
            let mut merged: Vec<(u64, u64, u64)> = Vec::with_capacity(MAX_POINTS / 2 + 1);
            for &(t, m, p) in &self.points {
                let b = t / width * width;
                match merged.last_mut() {
                    Some(last) if last.0 == b => {
                        last.1 = last.1.max(m);
                        last.2 = last.2.max(p);
                    }
                    _ => merged.push((b, m, p)),
                }
            }
            self.points = merged;
        }
    }
}

/// The maximum and p99.9 of every interval of `cpus` over `range`: the
/// samplers' per CPU, or timerlat's per CPU and context.
pub fn over_time(
    files: &[PathBuf],
    range: Range,
    cpus: Option<&[usize]>,
    source: &Source,
) -> Result<(TimePlot, ReadReport), PlotError> {
    // By CPU, then timerlat's context (none for the samplers), so the
    // lines come in that order.
    type Key = (usize, Option<crate::instruments::event::Context>);
    let mut by_cpu: BTreeMap<Key, (String, Downsampled)> = BTreeMap::new();
    let mut span: Option<(u64, u64)> = None;
    let visit = |entry: crate::record::Entry| {
        if cpus.is_some_and(|c| !c.contains(&entry.cpu)) || entry.stats.count == 0 {
            return;
        }
        let key = match &entry.timerlat {
            None => ((entry.cpu, None), format!("CPU {}", entry.cpu)),
            Some(name) => match source.drawn(name) {
                Some(context) => (
                    (entry.cpu, Some(context)),
                    super::source::label(entry.cpu, name),
                ),
                None => return,
            },
        };
        let (from, to) = span.unwrap_or((u64::MAX, 0));
        span = Some((from.min(entry.start_ns), to.max(entry.end_ns())));
        let (_, points) = by_cpu.entry(key.0).or_insert_with(|| {
            (
                key.1,
                Downsampled {
                    width_ns: 1,
                    points: Vec::new(),
                },
            )
        });
        points.add(
            entry.start_ns,
            entry.stats.max_ns,
            entry.stats.quantile_ns(P999),
        );
    };
    let report = match source {
        Source::Samplers => reader::read(files, range, visit),
        Source::Timerlat(_) => reader::read_timerlat(files, range, visit),
    }
    .map_err(input)?;
    if by_cpu.is_empty() {
        return Err(nothing(&report, source));
    }
    let series: Vec<TimeSeries> = by_cpu
        .into_values()
        .map(|(label, d)| TimeSeries {
            label,
            points: d
                .points
                .iter()
                .map(|&(t, m, p)| (t as f64 / 1e9, m as f64 / 1e3, p as f64 / 1e3))
                .collect(),
        })
        .collect();
    // A gap cuts the lines of its CPU; timerlat's only where the CPU was
    // offline (a stalled sampler stops no timerlat).
    let gap = |g: &crate::record::Gap, label: String| TimeGap {
        label,
        start_s: g.start_ns as f64 / 1e9,
        end_s: g.end_ns as f64 / 1e9,
        reason: g.reason.name(),
    };
    let gaps = (report.gaps.iter())
        .filter(|g| cpus.is_none_or(|c| c.contains(&g.cpu)))
        .flat_map(|g| match source {
            Source::Samplers => vec![gap(g, format!("CPU {}", g.cpu))],
            Source::Timerlat(_) if g.reason.name() == "offline" => (series.iter())
                .filter(|s| s.label.starts_with(&format!("CPU {} ", g.cpu)))
                .map(|s| gap(g, s.label.clone()))
                .collect(),
            Source::Timerlat(_) => vec![],
        })
        .collect();
    let what = match source {
        Source::Samplers => "Maximum latency per interval".to_string(),
        Source::Timerlat(_) => format!("Maximum {} per interval", source.title()),
    };
    let plot = TimePlot {
        title: range_title(&what, span),
        subtitle: context_subtitle(report.context.as_ref()),
        series,
        gaps,
    };
    Ok((plot, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_series_stays_bounded_and_keeps_its_spike() {
        let mut d = Downsampled {
            width_ns: 1,
            points: Vec::new(),
        };
        for i in 0..100_000u64 {
            let max = if i == 77_777 {
                5_000_000
            } else {
                10_000 + i % 100
            };
            d.add(i * 300_000_000_000, max, 8_000);
        }
        assert!(d.points.len() <= MAX_POINTS, "{}", d.points.len());
        assert!(d.points.len() > MAX_POINTS / 4);
        assert_eq!(d.points.iter().map(|p| p.1).max(), Some(5_000_000));
        assert!(
            d.points.windows(2).all(|w| w[0].0 < w[1].0),
            "in time order"
        );
    }
}
