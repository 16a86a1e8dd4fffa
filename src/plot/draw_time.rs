//! Drawing a `TimePlot`: each CPU's maximum per interval (solid) and
//! p99.9 (thin) in µs over wall time, as OSADL's long-term plots show
//! the maximum over days.

use std::path::Path;

use plotters::prelude::*;

use super::PlotError;
use super::draw::{latency_text, register_system_font};
use super::history::TimePlot;
use crate::calendar::format_rfc3339_ms;

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 600;

pub fn render_time_svg(plot: &TimePlot) -> Result<String, PlotError> {
    register_system_font()?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, plot)?;
        root.present().map_err(|e| PlotError::Draw(e.to_string()))?;
    }
    Ok(svg)
}

pub fn render_time_png(plot: &TimePlot, path: &Path) -> Result<(), PlotError> {
    register_system_font()?;
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    draw(&root, plot)?;
    root.present()
        .map_err(|e| PlotError::Draw(format!("cannot write {}: {e}", path.display())))
}

/// A time axis label: the date and minute, or the second for short spans.
fn time_label(unix_s: f64, span_s: f64) -> String {
    let text = format_rfc3339_ms((unix_s.max(0.0) * 1e9) as u64);
    if span_s > 2.0 * 86_400.0 {
        text[5..16].replace('T', " ")
    } else if span_s > 600.0 {
        text[11..16].to_string()
    } else {
        text[11..19].to_string()
    }
}

/// A series cut where it has no data: where the record says a stretch
/// had no samples (`gaps`: starts, Unix seconds, of the series' CPU), and
/// where a spacing over three times the usual one says so (the daemon
/// stopped). A line never bridges a gap.
fn runs<'a>(points: &'a [(f64, f64, f64)], gaps: &[f64]) -> Vec<&'a [(f64, f64, f64)]> {
    let mut spacings: Vec<f64> = points.windows(2).map(|w| w[1].0 - w[0].0).collect();
    if spacings.is_empty() {
        return vec![points];
    }
    spacings.sort_by(f64::total_cmp);
    let usual = spacings[spacings.len() / 2];
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..points.len() {
        let (before, after) = (points[i - 1].0, points[i].0);
        let recorded = gaps.iter().any(|&g| g >= before && g < after);
        if recorded || after - before > 3.0 * usual {
            runs.push(&points[start..i]);
            start = i;
        }
    }
    runs.push(&points[start..]);
    runs
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    plot: &TimePlot,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| PlotError::Draw(e.to_string());
    root.fill(&WHITE).map_err(err)?;
    let points = plot.series.iter().flat_map(|s| s.points.iter());
    let (t0, t1, top, low) = points
        .fold((f64::MAX, f64::MIN, 1.0f64, f64::MAX), |(a, b, m, l), p| {
            (a.min(p.0), b.max(p.0), m.max(p.1), l.min(p.2).min(p.1))
        });
    let t1 = if t1 > t0 { t1 } else { t0 + 1.0 };
    // A logarithmic latency axis: a stall of minutes leaves the usual
    // maxima readable.
    let (bottom, top) = (low.clamp(0.5, top) * 0.7, top * 2.0);
    let caption = if plot.subtitle.is_empty() {
        plot.title.clone()
    } else {
        format!("{} — {}", plot.title, plot.subtitle)
    };
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(85)
        .build_cartesian_2d(t0..t1, (bottom..top).log_scale())
        .map_err(err)?;
    let span = t1 - t0;
    chart
        .configure_mesh()
        .x_desc("Time (UTC)")
        .y_desc("Latency (logarithmic)")
        .x_labels(8)
        .x_label_formatter(&|v| time_label(*v, span))
        .y_label_formatter(&|v| latency_text(*v))
        .draw()
        .map_err(err)?;
    shade_gaps(&mut chart, plot, (t0, t1), (bottom, top)).map_err(err)?;
    for (i, series) in plot.series.iter().enumerate() {
        draw_one(
            &mut chart,
            plot,
            series,
            Palette99::pick(i).to_rgba(),
            bottom,
        )
        .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// The chart `draw` builds: wall time across, latency up on a log scale.
type Chart<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, LogCoord<f64>>>;

/// The stretches without samples, shaded under the lines: red where a
/// sampler stalled, grey where a CPU was offline; named once each in the
/// legend.
fn shade_gaps<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    plot: &TimePlot,
    (t0, t1): (f64, f64),
    (bottom, top): (f64, f64),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let mut named = Vec::new();
    for gap in &plot.gaps {
        let color = if gap.reason == "stalled" {
            RGBColor(200, 30, 40).mix(0.15)
        } else {
            RGBColor(120, 120, 120).mix(0.15)
        };
        let band = chart.draw_series(std::iter::once(Rectangle::new(
            [(gap.start_s.max(t0), top), (gap.end_s.min(t1), bottom)],
            color.filled(),
        )))?;
        if !named.contains(&gap.reason) {
            named.push(gap.reason);
            band.label(format!("no samples: {}", gap.reason))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 20, y + 5)], color.filled())
                });
        }
    }
    Ok(())
}

/// One CPU's series: its maximum per interval and its p99.9, each cut at
/// the gaps, with their legend entries.
fn draw_one<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    plot: &TimePlot,
    series: &super::history::TimeSeries,
    color: RGBAColor,
    bottom: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let peak = series.points.iter().map(|p| p.1).fold(0.0, f64::max);
    let gaps: Vec<f64> = plot
        .gaps
        .iter()
        .filter(|g| g.label == series.label)
        .map(|g| g.start_s)
        .collect();
    for (k, run) in runs(&series.points, &gaps).into_iter().enumerate() {
        let max = chart.draw_series(LineSeries::new(
            run.iter().map(|p| (p.0, p.1.max(bottom))),
            color.stroke_width(1),
        ))?;
        if k == 0 {
            max.label(format!(
                "{} max (peak {})",
                series.label,
                latency_text(peak)
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        }
        let p999 = chart.draw_series(LineSeries::new(
            run.iter().map(|p| (p.0, p.2.max(bottom))),
            color.mix(0.5).stroke_width(1),
        ))?;
        if k == 0 {
            p999.label(format!("{} p99.9", series.label))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.mix(0.5).stroke_width(1))
                });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_cuts_the_line() {
        let points: Vec<(f64, f64, f64)> = [0.0, 10.0, 20.0, 30.0, 200.0, 210.0]
            .iter()
            .map(|t| (*t, 1.0, 1.0))
            .collect();
        let cut = runs(&points, &[]);
        assert_eq!(cut.iter().map(|r| r.len()).collect::<Vec<_>>(), vec![4, 2]);
        assert_eq!(runs(&points[..1], &[]).len(), 1);
        // A recorded gap cuts where spacing alone would not (a stall of
        // two intervals, 10 to 30, between points 10 s apart at most).
        let cut = runs(&points, &[15.0]);
        assert_eq!(
            cut.iter().map(|r| r.len()).collect::<Vec<_>>(),
            vec![2, 2, 2]
        );
    }
}
