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
//!
//! - `inputs`: the three file formats read into `PlotData`.
//! - `draw`: `PlotData` drawn to SVG or PNG.

mod draw;
mod inputs;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

pub use draw::{render_png, render_svg};
pub use inputs::read_input;

use crate::stats::{LatencyStats, add_bins_us};

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

pub(crate) fn input(message: impl Into<String>) -> PlotError {
    PlotError::Input(message.into())
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
