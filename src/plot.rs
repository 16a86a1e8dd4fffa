//! OSADL-style latency plots: the number of samples (log scale) over the
//! wake-up latency in microseconds, one line per CPU, each CPU's maximum
//! marked. Drawn with plotters, to SVG or PNG; text is measured and drawn
//! with a system TrueType font (DejaVu Sans, or Liberation Sans) loaded at
//! run time, so no font is built in.
//!
//! Inputs are what people already have: latencyd's `measure --json`,
//! cyclictest's `--json` (both need a histogram, `-h`), and
//! jitterdebugger's results file; or, inside latencyd, its own
//! histograms.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use plotters::prelude::*;
use serde_json::Value;

use crate::stats::LatencyStats;

/// One CPU's histogram in 1 µs bins.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSeries {
    pub label: String,
    /// (latency in µs, samples) for the non-empty bins, ascending.
    pub bins_us: Vec<(u64, u64)>,
    /// The exact maximum in µs (may lie past the last bin).
    pub max_us: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlotData {
    pub title: String,
    /// Host and kernel, when known.
    pub subtitle: String,
    pub series: Vec<CpuSeries>,
}

#[derive(Debug)]
pub enum PlotError {
    Input(String),
    Draw(String),
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlotError::Input(m) | PlotError::Draw(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for PlotError {}

fn input(message: impl Into<String>) -> PlotError {
    PlotError::Input(message.into())
}

/// Adds a latencyd histogram's samples to 1 µs bins (HDR buckets wider
/// than 1 µs at high latencies go to the bin of their upper edge; samples
/// past the HDR range to the bin of the exact maximum).
pub fn add_bins_us(stats: &LatencyStats, bins: &mut BTreeMap<u64, u64>) {
    for_each_bin_us(stats, |us, count| *bins.entry(us).or_insert(0) += count);
}

/// Hands each 1 µs bin of a latencyd histogram to `add` as (µs, samples),
/// by the rule of [`add_bins_us`]; bins come in ascending order, the
/// overflow bin last, and no bin is empty.
pub fn for_each_bin_us(stats: &LatencyStats, mut add: impl FnMut(u64, u64)) {
    for value in stats.hdr().iter_recorded() {
        add(value.value_iterated_to() / 1_000, value.count_at_value());
    }
    if stats.hdr_overflows > 0 {
        add(stats.max_ns / 1_000, stats.hdr_overflows);
    }
}

/// One CPU's series from a latencyd histogram.
pub fn series_from_stats(label: String, stats: &LatencyStats) -> CpuSeries {
    let mut bins = BTreeMap::new();
    add_bins_us(stats, &mut bins);
    CpuSeries {
        label,
        bins_us: bins.into_iter().collect(),
        max_us: stats.max_ns as f64 / 1_000.0,
    }
}

/// Reads a latencyd or cyclictest `--json` file, or a jitterdebugger
/// results file, telling them apart by their shape.
pub fn read_input(text: &str) -> Result<PlotData, PlotError> {
    let json: Value = serde_json::from_str(text)
        .map_err(|e| input(format!("not JSON ({e}): expected a latencyd or cyclictest --json file or a jitterdebugger results file")))?;
    if json.get("thread").is_some() {
        from_cyclictest_json(&json)
    } else if json.get("cpu").is_some() {
        from_jitterdebugger(&json)
    } else {
        Err(input(
            "neither a cyclictest/latencyd --json file (no \"thread\") nor a jitterdebugger results file (no \"cpu\")",
        ))
    }
}

fn number(value: &Value, what: &str) -> Result<f64, PlotError> {
    value
        .as_f64()
        .ok_or_else(|| input(format!("{what} is not a number")))
}

/// Histogram bins keyed by latency ("3": 220, …) in `unit_ns`, as µs bins.
fn bins(histogram: &Value, unit_ns: f64, what: &str) -> Result<Vec<(u64, u64)>, PlotError> {
    let map = histogram
        .as_object()
        .ok_or_else(|| input(format!("{what}.histogram is not an object")))?;
    let mut out = BTreeMap::new();
    for (key, count) in map {
        let latency: u64 = key.parse().map_err(|_| {
            input(format!(
                "{what}.histogram has a bin '{key}' that is not a number"
            ))
        })?;
        let count = count
            .as_u64()
            .ok_or_else(|| input(format!("{what}.histogram[{key}] is not a count")))?;
        *out.entry((latency as f64 * unit_ns / 1_000.0) as u64)
            .or_insert(0) += count;
    }
    Ok(out.into_iter().collect())
}

/// The entries of the object `json[key]`, whose keys are numbers (thread
/// or CPU numbers), in numeric order.
fn numbered<'a>(json: &'a Value, key: &str) -> Result<Vec<(u64, &'a Value)>, PlotError> {
    let object = json[key]
        .as_object()
        .ok_or_else(|| input(format!("\"{key}\" is not an object")))?;
    let mut ordered = object
        .iter()
        .map(|(k, v)| {
            k.parse()
                .map(|n| (n, v))
                .map_err(|_| input(format!("{key} '{k}' is not a number")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ordered.sort_by_key(|(n, _)| *n);
    Ok(ordered)
}

fn from_cyclictest_json(json: &Value) -> Result<PlotData, PlotError> {
    let unit_ns = if json["resolution_in_ns"].as_u64() == Some(1) {
        1.0
    } else {
        1_000.0
    };
    let ordered = numbered(json, "thread")?;
    let mut series = Vec::new();
    for (n, thread) in ordered {
        let what = format!("thread.{n}");
        let cpu = thread["cpu"].as_i64().unwrap_or(n as i64);
        let bins_us = bins(&thread["histogram"], unit_ns, &what)?;
        if bins_us.is_empty() && thread["cycles"].as_u64().unwrap_or(0) > 0 {
            return Err(input(format!(
                "{what} has samples but no histogram: record one with -h (cyclictest or latencyd measure)"
            )));
        }
        let max_us = number(&thread["max"], &format!("{what}.max"))? * unit_ns / 1_000.0;
        series.push(CpuSeries {
            label: format!("CPU {cpu}"),
            bins_us,
            max_us,
        });
    }
    let sysinfo = &json["sysinfo"];
    let tool = if json.get("latencyd").is_some() {
        "latencyd"
    } else {
        "cyclictest"
    };
    Ok(PlotData {
        title: format!("Wake-up latency ({tool})"),
        subtitle: subtitle(
            sysinfo["nodename"].as_str(),
            sysinfo["release"].as_str(),
            sysinfo["realtime"].as_u64() == Some(1),
        ),
        series,
    })
}

fn from_jitterdebugger(json: &Value) -> Result<PlotData, PlotError> {
    let ordered = numbered(json, "cpu")?;
    // Results files since version 3 say their unit; older ones are in µs.
    let sysinfo = &json["sysinfo"];
    let unit_ns = sysinfo["resolution_in_ns"].as_f64().unwrap_or(1_000.0);
    let mut series = Vec::new();
    for (cpu, data) in ordered {
        let what = format!("cpu.{cpu}");
        series.push(CpuSeries {
            label: format!("CPU {cpu}"),
            bins_us: bins(&data["histogram"], unit_ns, &what)?,
            max_us: number(&data["max"], &format!("{what}.max"))? * unit_ns / 1_000.0,
        });
    }
    Ok(PlotData {
        title: "Wake-up latency (jitterdebugger)".to_string(),
        subtitle: subtitle(
            sysinfo["nodename"].as_str(),
            sysinfo["release"].as_str(),
            false,
        ),
        series,
    })
}

pub fn subtitle(host: Option<&str>, kernel: Option<&str>, preempt_rt: bool) -> String {
    let mut parts = Vec::new();
    if let Some(host) = host {
        parts.push(host.to_string());
    }
    if let Some(kernel) = kernel {
        parts.push(format!(
            "Linux {kernel}{}",
            if preempt_rt { " PREEMPT_RT" } else { "" }
        ));
    }
    parts.join(", ")
}

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

fn register_system_font() -> Result<(), PlotError> {
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

/// The output formats, by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    pub fn of(path: &Path) -> Result<Format, PlotError> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => Err(input(format!(
                "{}: name the output .svg or .png to choose the format",
                path.display()
            ))),
        }
    }
}

/// Writes the plot to `path` in the format its extension names.
pub fn write(data: &PlotData, path: &Path) -> Result<(), PlotError> {
    match Format::of(path)? {
        Format::Svg => std::fs::write(path, render_svg(data)?)
            .map_err(|e| PlotError::Draw(format!("cannot write {}: {e}", path.display()))),
        Format::Png => render_png(data, path),
    }
}

/// `latencyd plot INPUT -o OUTPUT`.
pub fn main(input_path: &Path, output: &Path) -> std::process::ExitCode {
    let result = Format::of(output)
        .and_then(|_| {
            std::fs::read_to_string(input_path)
                .map_err(|e| input(format!("cannot read {}: {e}", input_path.display())))
        })
        .and_then(|text| {
            read_input(&text).map_err(|e| input(format!("{}: {e}", input_path.display())))
        })
        .and_then(|data| write(&data, output));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("latencyd plot: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
