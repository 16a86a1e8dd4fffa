//! Drawing `PlotData` with plotters, to SVG text or a PNG file, with a
//! system TrueType font.

use std::path::Path;

use plotters::prelude::*;

use super::{PlotData, PlotError};

const WIDTH: u32 = 1000;
/// The chart's height; the legend below it adds a row per
/// `LEGEND_COLUMNS` CPUs.
const HEIGHT: u32 = 600;
const LEGEND_COLUMNS: usize = 4;
const LEGEND_ROW: u32 = 20;

/// The picture's size: the chart, then the legend's rows under it (a
/// legend inside the chart would hide the maximum markers under it).
fn size(data: &PlotData) -> (u32, u32) {
    let rows = data.series.len().div_ceil(LEGEND_COLUMNS) as u32;
    (WIDTH, HEIGHT + rows * LEGEND_ROW + 10)
}

/// The plot as an SVG document.
pub fn render_svg(data: &PlotData) -> Result<String, PlotError> {
    register_system_font()?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size(data)).into_drawing_area();
        draw(&root, data)?;
        root.present().map_err(|e| PlotError::Draw(e.to_string()))?;
    }
    Ok(svg)
}

/// Draws the plot into a PNG file.
pub fn render_png(data: &PlotData, path: &Path) -> Result<(), PlotError> {
    register_system_font()?;
    let root = BitMapBackend::new(path, size(data)).into_drawing_area();
    draw(&root, data)?;
    root.present()
        .map_err(|e| PlotError::Draw(format!("cannot write {}: {e}", path.display())))
}

const SYSTEM_FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

pub(super) fn register_system_font() -> Result<(), PlotError> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let bytes = SYSTEM_FONTS
                .iter()
                .find_map(|path| std::fs::read(path).ok())
                .ok_or_else(|| {
                    format!(
                        "plots need a TrueType font and none of {} exists: install \
                         fonts-dejavu-core",
                        SYSTEM_FONTS.join(", ")
                    )
                })?;
            // Registered once for the life of the process, as plotters wants.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| "the system font could not be parsed".to_string())
        })
        .clone()
        .map_err(PlotError::Draw)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    data: &PlotData,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| PlotError::Draw(e.to_string());
    root.fill(&WHITE).map_err(err)?;
    let (root, legend) = root.split_vertically(HEIGHT);
    let max_us = data.series.iter().map(|s| s.max_us).fold(1.0, f64::max);
    let max_count = data
        .series
        .iter()
        .flat_map(|s| s.bins_us.iter().map(|(_, c)| *c))
        .max()
        .unwrap_or(1) as f64;
    // Room right of the largest maximum for its label.
    let x_end = (max_us * 1.15).ceil() + 2.0;
    let floor = 0.8;
    let caption = if data.subtitle.is_empty() {
        data.title.clone()
    } else {
        format!("{} — {}", data.title, data.subtitle)
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_end, (floor..max_count * 6.0).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("Latency (µs)")
        .y_desc("Number of samples")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    for (i, series) in data.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points = step_outline(&series.bins_us, floor);
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(err)?;
        // The maximum: a marker above the exact value; each CPU's a little
        // lower than the previous one's, so close maxima stay legible.
        let top = max_count * 3.0 / 1.6f64.powi(i as i32);
        chart
            .draw_series(std::iter::once(TriangleMarker::new(
                (series.max_us, top),
                7,
                color.filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" max {:.0} µs", series.max_us),
                (series.max_us, top),
                ("sans-serif", 13).into_font().color(&color),
            )))
            .map_err(err)?;
    }
    // The legend: a sample of each line and its label, in columns under
    // the chart, left to right then down.
    let column_width = (WIDTH as i32 - 100) / LEGEND_COLUMNS as i32;
    for (i, series) in data.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let x = 85 + (i % LEGEND_COLUMNS) as i32 * column_width;
        let y = 8 + (i / LEGEND_COLUMNS) as i32 * LEGEND_ROW as i32;
        legend
            .draw(&PathElement::new(
                vec![(x, y + 7), (x + 24, y + 7)],
                color.stroke_width(2),
            ))
            .map_err(err)?;
        legend
            .draw(&Text::new(
                format!("{} (max {:.0} µs)", series.label, series.max_us),
                (x + 30, y),
                ("sans-serif", 14).into_font().color(&BLACK),
            ))
            .map_err(err)?;
    }
    Ok(())
}

/// The outline of a histogram as OSADL plots draw it: each 1 µs bin a
/// flat top, dropping to the floor of the log axis across empty bins.
fn step_outline(bins_us: &[(u64, u64)], floor: f64) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(bins_us.len() * 4);
    let mut previous_end: Option<u64> = None;
    for &(us, count) in bins_us {
        if previous_end != Some(us) {
            if let Some(end) = previous_end {
                points.push((end as f64, floor));
            }
            points.push((us as f64, floor));
        }
        points.push((us as f64, count as f64));
        points.push((us as f64 + 1.0, count as f64));
        previous_end = Some(us + 1);
    }
    if let Some(end) = previous_end {
        points.push((end as f64, floor));
    }
    points
}
