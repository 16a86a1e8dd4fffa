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

/// The TrueType font plots are drawn with, if the system has one.
pub fn system_font() -> Option<&'static str> {
    SYSTEM_FONTS
        .iter()
        .copied()
        .find(|path| std::path::Path::new(path).is_file())
}

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
    let (x_start, x_end) = latency_range(data);
    let max_count = data
        .series
        .iter()
        .flat_map(|s| s.bins_us.iter().map(|(_, c)| *c))
        .max()
        .unwrap_or(1) as f64;
    let floor = 0.5;
    let caption = if data.subtitle.is_empty() {
        data.title.clone()
    } else {
        format!("{} — {}", data.title, data.subtitle)
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(85)
        .build_cartesian_2d(
            (x_start..x_end).log_scale(),
            (floor..max_count * 6.0).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("Latency (logarithmic)")
        .y_desc("Number of samples")
        .x_label_formatter(&|v| latency_text(*v))
        .y_label_formatter(&|v| with_separators(v.round() as u64))
        .draw()
        .map_err(err)?;
    for (i, series) in data.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points = step_outline(&series.bins_us, floor);
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(err)?;
        // The maximum: a marker above the exact value, its label beside it
        // (to its left when the right edge is near); each CPU's a little
        // lower than the previous one's, so close maxima stay legible.
        let top = max_count * 3.0 / 1.6f64.powi(i as i32);
        let label = format!("max {}", latency_text(series.max_us));
        let room_right = (x_end / series.max_us.max(x_start)).log10() / (x_end / x_start).log10()
            * f64::from(WIDTH - 100);
        let width = 8 * label.chars().count() as i32;
        let dx = if room_right > f64::from(width + 16) {
            10
        } else {
            -10 - width
        };
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((series.max_us.max(x_start), top))
                    + TriangleMarker::new((0, 0), 7, color.filled())
                    + Text::new(
                        label,
                        (dx, -7),
                        ("sans-serif", 13).into_font().color(&color),
                    ),
            ))
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
                format!("{} (max {})", series.label, latency_text(series.max_us)),
                (x + 30, y),
                ("sans-serif", 14).into_font().color(&BLACK),
            ))
            .map_err(err)?;
    }
    Ok(())
}

/// The latency axis, logarithmic: from just below the lowest bin (a bin
/// under 1 µs starts at 0.5 µs) to three times the largest maximum, room
/// for its label. A logarithmic axis keeps the body of the distribution
/// readable whatever the outlier: 10 to 150 µs keep a quarter of the
/// width beside a 31 ms maximum, and an eighth beside 600 s.
fn latency_range(data: &PlotData) -> (f64, f64) {
    let lowest = (data.series.iter())
        .filter_map(|s| s.bins_us.first().map(|b| b.0))
        .min()
        .unwrap_or(1);
    let start = (lowest as f64).max(0.5) * 0.8;
    let max_us = data.series.iter().map(|s| s.max_us).fold(1.0, f64::max);
    let end = (max_us * 3.0).max(start * 100.0);
    (start, end)
}

/// A latency for people, in µs, ms or s, to three significant digits
/// (whole numbers with separators from 100 on): `150 µs`, `9.08 ms`,
/// `600 s`, `1,000 s`.
pub fn latency_text(us: f64) -> String {
    let (value, unit) = if us < 1_000.0 {
        (us, "µs")
    } else if us < 1_000_000.0 {
        (us / 1e3, "ms")
    } else {
        (us / 1e6, "s")
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{value:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        with_separators(value.round() as u64)
    };
    format!("{text} {unit}")
}

/// `1234567` as `1,234,567`.
pub fn with_separators(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The outline of a histogram as OSADL plots draw it: each 1 µs bin a
/// flat top, dropping to the floor of the log axis across empty bins (the
/// bin under 1 µs starts at 0.5 µs on the logarithmic latency axis).
fn step_outline(bins_us: &[(u64, u64)], floor: f64) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(bins_us.len() * 4);
    let mut previous_end: Option<u64> = None;
    for &(us, count) in bins_us {
        let left = (us as f64).max(0.5);
        if previous_end != Some(us) {
            if let Some(end) = previous_end {
                points.push((end as f64, floor));
            }
            points.push((left, floor));
        }
        points.push((left, count as f64));
        points.push((us as f64 + 1.0, count as f64));
        previous_end = Some(us + 1);
    }
    if let Some(end) = previous_end {
        points.push((end as f64, floor));
    }
    points
}
