//! Drawing a `TimePlot`: each CPU's maximum per interval (solid) and
//! p99.9 (thin) in µs over wall time, as OSADL's long-term plots show
//! the maximum over days.

use std::path::Path;

use plotters::prelude::*;

use super::PlotError;
use super::draw::register_system_font;
use super::history::TimePlot;
use crate::units::format_rfc3339_ms;

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
    let (t0, t1, top) = points.fold((f64::MAX, f64::MIN, 1.0f64), |(a, b, m), p| {
        (a.min(p.0), b.max(p.0), m.max(p.1))
    });
    let t1 = if t1 > t0 { t1 } else { t0 + 1.0 };
    let caption = if plot.subtitle.is_empty() {
        plot.title.clone()
    } else {
        format!("{} — {}", plot.title, plot.subtitle)
    };
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(t0..t1, 0f64..top * 1.1)
        .map_err(err)?;
    let span = t1 - t0;
    chart
        .configure_mesh()
        .x_desc("Time (UTC)")
        .y_desc("Latency (µs)")
        .x_labels(8)
        .x_label_formatter(&|v| time_label(*v, span))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    for (i, series) in plot.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let peak = series.points.iter().map(|p| p.1).fold(0.0, f64::max);
        chart
            .draw_series(LineSeries::new(
                series.points.iter().map(|p| (p.0, p.1)),
                color.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!("{} max (peak {peak:.0} µs)", series.label))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(LineSeries::new(
                series.points.iter().map(|p| (p.0, p.2)),
                color.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?
            .label(format!("{} p99.9", series.label))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.mix(0.5).stroke_width(1))
            });
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
