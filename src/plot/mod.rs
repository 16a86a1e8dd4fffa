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
//! - `source`: the samplers' wake-ups or the kernel's timerlat, by CPU
//!   and context.

mod draw;
mod draw_time;
pub mod history;
mod inputs;
pub mod source;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

pub use draw::{render_png, render_svg, system_font};
pub use draw_time::{render_time_png, render_time_svg};
pub use inputs::read_input;
pub use source::Source;

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

/// `latencyd plot INPUT… -o OUTPUT [--from] [--to] [--cpus] [--over-time]`.
pub fn main(args: &crate::cli::PlotArgs) -> std::process::ExitCode {
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("latencyd plot: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: &crate::cli::PlotArgs) -> Result<(), PlotError> {
    use crate::record::reader;
    let format = Format::of(&args.output)?;
    let source = Source::parse(args.source.as_deref(), args.context.as_deref())
        .map_err(|e| input(format!("--source/--context: {e}")))?;
    let ranged = args.range.from.is_some() || args.range.to.is_some() || args.range.cpus.is_some();
    if let Some(path) = &args.capture {
        if ranged {
            return Err(input(
                "--from, --to and --cpus read the record; --capture draws one capture",
            ));
        }
        if format != Format::Svg {
            return Err(input(format!(
                "{}: --capture draws SVG; name the output .svg",
                args.output.display()
            )));
        }
        let text = read_input_file(path)?;
        let chosen = crate::forensics::picture::read(&text, args.capture_id.as_deref())
            .map_err(|e| input(format!("{}: {e}", path.display())))?;
        return std::fs::write(&args.output, crate::forensics::picture::render(&chosen))
            .map_err(|e| PlotError::Draw(format!("cannot write {}: {e}", args.output.display())));
    }
    let record = args
        .inputs
        .iter()
        .any(|p| p.is_dir() || p.extension().is_some_and(|e| e == "hlog"));
    if !record {
        if args.inputs.len() != 1 {
            return Err(input(
                "plot one results file at a time (several .hlog files of a record can go together)",
            ));
        }
        if ranged || args.over_time || args.by_load {
            return Err(input(
                "--from, --to, --cpus, --over-time and --by-load read the record: give .hlog \
                 files or their directory",
            ));
        }
        let path = &args.inputs[0];
        let text = read_input_file(path)?;
        let data =
            read_input(&text, &source).map_err(|e| input(format!("{}: {e}", path.display())))?;
        return write(&data, &args.output);
    }
    let files = reader::expand_inputs(&args.inputs).map_err(input)?;
    let now = crate::units::unix_now_ns();
    let (range, cpus) = reader::selection(&args.range, now).map_err(input)?;
    let report = if args.over_time {
        let (plot, report) = history::over_time(&files, range, cpus.as_deref(), &source)?;
        match format {
            Format::Svg => std::fs::write(&args.output, render_time_svg(&plot)?).map_err(|e| {
                PlotError::Draw(format!("cannot write {}: {e}", args.output.display()))
            })?,
            Format::Png => render_time_png(&plot, &args.output)?,
        }
        report
    } else if args.by_load {
        let (data, report) = history::by_load(&files, range, cpus.as_deref())?;
        write(&data, &args.output)?;
        report
    } else {
        let (data, report) = history::histogram(&files, range, cpus.as_deref(), &source)?;
        write(&data, &args.output)?;
        report
    };
    if let Some(warning) = report.warning() {
        eprintln!("latencyd plot: warning: {warning}");
    }
    Ok(())
}
/// The largest results or capture file a plot reads: a cyclictest
/// `--json` of 1,024 threads with a 10 ms 1 µs histogram each is about
/// 150 MB.
const MAX_INPUT_BYTES: u64 = 256 << 20;

/// A results or capture file a person named: a regular file (a link is
/// followed, as named), at most `MAX_INPUT_BYTES`, UTF-8.
fn read_input_file(path: &std::path::Path) -> Result<String, PlotError> {
    crate::files::read_text_bounded(path, crate::files::Links::Follow, MAX_INPUT_BYTES)
        .map_err(input)
}
