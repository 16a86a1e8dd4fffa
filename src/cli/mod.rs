//! Command-line flags as the user typed them (stage one of two: `measure`
//! turns these into validated options).
//!
//! - `measure`: `measure`'s flags, which are cyclictest's (`-h` means
//!   `--histogram` there, and help is only `--help`).
//! - `getopt`: reads `measure`'s command line as cyclictest's getopt_long
//!   does (joined short options, optional arguments, abbreviations)
//!   before clap sees it (and `oslat`'s as oslat's getopt_long does).
//! - `oslat`: `oslat`'s flags, which are oslat's.
//! - `qualify`: `qualify`'s flags.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

pub mod getopt;
mod measure;
mod oslat;
mod qualify;

pub use measure::MeasureArgs;
pub use oslat::OslatArgs;
pub use qualify::QualifyArgs;

/// What `--version` prints. A build with the test-only fault injection
/// (a clock wrapper in the samplers' loop) says so, so that a benchmark
/// refuses it rather than measure it.
const VERSION: &str = if cfg!(feature = "fault-injection") {
    concat!(env!("CARGO_PKG_VERSION"), " (fault-injection test build)")
} else {
    env!("CARGO_PKG_VERSION")
};

#[derive(Debug, Parser)]
#[command(
    name = "latencyd",
    version = VERSION,
    about = "Measure Linux wake-up latency the way cyclictest does, continuously",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Without a subcommand, `latencyd` runs the daemon with these flags.
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: sample continuously, serve /metrics and the JSON API
    /// (the default).
    Run(RunArgs),
    /// One-shot measurement with cyclictest-compatible options and output.
    Measure(Box<MeasureArgs>),
    /// One-shot busy-poll measurement with oslat's options and output:
    /// a thread per CPU reads the CPU's counter in a loop and counts every
    /// gap (the time a polling workload loses to the OS).
    Oslat(OslatArgs),
    /// Qualify a host: its facts, hardware noise, wake-up latency idle and
    /// under load, timerlat and busy-polling, each against its maximum
    /// (from a profile, options, or cnf-tests' variables); a verdict, JUnit
    /// and JSON. Exit 0 passed, 1 failed, 2 could not measure.
    Qualify(Box<QualifyArgs>),
    /// Draw an OSADL-style latency plot (log-scale counts over µs, one line
    /// per CPU, maxima marked) from a latencyd or cyclictest --json file
    /// (recorded with -h), a jitterdebugger results file, or the record's
    /// .hlog files (and then, with --over-time, the maximum per interval
    /// over time).
    Plot(PlotArgs),
    /// Print the cyclictest-style summary per CPU of the record's .hlog
    /// files over a time range (or its JSON).
    Report(ReportArgs),
    /// Validate a configuration file and print the effective configuration.
    CheckConfig {
        /// The TOML file to check (the environment applies too).
        file: PathBuf,
    },
    /// Print the completion script for a shell, generated from these very
    /// options (the Debian package installs them).
    Completions {
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Print the man page latencyd(8), in roff, generated from these very
    /// options (the Debian package installs it; `latencyd manpage | man -l -`
    /// reads it)
    Manpage,
    /// Started by latencyd itself for a load (`measure --load`, `[load]`):
    /// leads the load's process group and kills it when latencyd's pipe
    /// closes, so that no load process outlives latencyd.
    #[command(name = "load-guard", hide = true)]
    LoadGuard {
        /// The load's scratch directory, removed before the kill.
        scratch: PathBuf,
    },
    /// Started by latencyd itself for `[timerlat]` and `measure
    /// --timerlat`: its timerlat threads, one per CPU on the CPU's
    /// timerlat_fd, in a process the kernel may kill without killing
    /// latencyd; ends when its standard input closes.
    #[command(name = "timerlat-workload", hide = true)]
    TimerlatWorkload {
        /// The CPUs, as a list ("0,2-3").
        #[arg(long)]
        cpus: String,
        /// SCHED_FIFO priority of the threads.
        #[arg(long)]
        priority: i32,
        /// Where tracefs is mounted.
        #[arg(long)]
        tracefs: PathBuf,
    },
}

/// The shells `latencyd completions` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// Which part of a record: a time range and CPUs.
#[derive(Debug, Clone, Default, Args)]
pub struct RangeArgs {
    /// Only intervals from this time: RFC 3339 (2026-11-22T00:00:00Z) or a
    /// negative duration from now (-7d, -90m).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// Only intervals before this time (same forms as --from).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Only these CPUs (a list such as 0-3,8).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    /// One results file, or .hlog files of the record (or directories
    /// holding them).
    #[arg(required_unless_present = "capture", value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Draw one forensics capture instead (SVG): its CPU around the late
    /// wake-up, a lane per interrupt, softirq and thread, the deadline,
    /// the wake-up and the main cause. FILE is a capture (a file of the
    /// capture directory, or /api/v1/spikes/ID saved) or the --json
    /// output of measure -b or --forensics.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["inputs", "over_time", "by_load"])]
    pub capture: Option<PathBuf>,
    /// With --capture on a measure --json file: the capture to draw, by
    /// its id (the largest latency by default).
    #[arg(long, value_name = "ID", requires = "capture")]
    pub capture_id: Option<String>,
    /// The picture to write: .svg or .png.
    #[arg(short = 'o', long, value_name = "OUT.svg|OUT.png")]
    pub output: PathBuf,
    #[command(flatten)]
    pub range: RangeArgs,
    /// With .hlog files: draw each interval's maximum and p99.9 over time
    /// instead of the histogram.
    #[arg(long)]
    pub over_time: bool,
    /// With .hlog files: two lines, all CPUs together: the intervals
    /// measured idle and those measured under a load ([load] windows,
    /// measure --load --log).
    #[arg(long, conflicts_with = "over_time")]
    pub by_load: bool,
    /// What to draw: samplers (the clock_nanosleep samplers' wake-ups)
    /// or timerlat (the kernel's timerlat, a line per CPU and context:
    /// the record's [timerlat] entries, or measure --timerlat -h --json).
    #[arg(long, value_name = "samplers|timerlat", conflicts_with_all = ["capture", "by_load"])]
    pub source: Option<String>,
    /// With --source timerlat: only these contexts (irq, thread, user;
    /// a comma-separated list).
    #[arg(long, value_name = "LIST", requires = "source")]
    pub context: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// .hlog files of the record, or directories holding them.
    #[arg(required = true, value_name = "FILE.hlog")]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub range: RangeArgs,
    /// Print JSON (cyclictest's --json layout, with our fields) instead.
    #[arg(long)]
    pub json: bool,
    /// Report in nanoseconds instead of microseconds.
    #[arg(short = 'N', long)]
    pub nsecs: bool,
    /// Split the range into epochs where the host's fingerprint changes:
    /// per epoch, the facts that differ from the one before, and min,
    /// avg, p99, p99.99 and max of all CPUs together.
    #[arg(long, conflicts_with = "compare")]
    pub by_fingerprint: bool,
    /// Two ranges side by side (A/B, e.g. across a kernel upgrade), each
    /// FROM..TO in --from's forms, either side open (-14d..-7d
    /// -7d..): the statistics with B/A, the distributions, the facts
    /// that differ.
    #[arg(long, num_args = 2, value_names = ["FROM..TO", "FROM..TO"], allow_hyphen_values = true)]
    pub compare: Option<Vec<String>>,
    /// Idle against loaded: the intervals measured while no load ran
    /// side by side with those measured under a load window's (`[load]`,
    /// `measure --load --log`), as --compare shows two ranges.
    #[arg(long, conflicts_with_all = ["compare", "by_fingerprint"])]
    pub by_load: bool,
    /// With --compare or --by-load: both distributions overlaid, drawn to
    /// this file (.svg or .png).
    #[arg(long, value_name = "OUT.svg|OUT.png")]
    pub plot: Option<PathBuf>,
}

/// Flags of `latencyd run`. Each overrides the configuration key named in
/// its help, above the file and the environment.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// TOML configuration file (see config.example.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// export.listen: address and port to serve on; repeat for several
    /// (default [::]:9479, dual-stack).
    #[arg(
        long = "web.listen-address",
        visible_alias = "listen",
        value_name = "ADDR:PORT",
        action = ArgAction::Append
    )]
    pub listen: Vec<String>,
    /// export.telemetry_path: the path of the metrics (default /metrics).
    #[arg(long = "web.telemetry-path", value_name = "PATH")]
    pub telemetry_path: Option<String>,
    /// measure.cpus: CPUs to sample ("all" or a list such as 0-3,8).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// measure.interval: sampling interval with a unit (e.g. 1ms, 250us).
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<String>,
    /// measure.priority: real-time priority of the samplers.
    #[arg(long, value_name = "PRIO", allow_negative_numbers = true)]
    pub priority: Option<String>,
    /// export.web_config_file: TLS and basic-auth settings in the format of
    /// Prometheus exporters' web configuration (exporter-toolkit).
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<String>,
    /// log.level: error, warn, info, debug or trace.
    #[arg(long = "log.level", visible_alias = "log-level", value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// log.format: text or json.
    #[arg(
        long = "log.format",
        visible_alias = "log-format",
        value_name = "FORMAT"
    )]
    pub log_format: Option<String>,
}

impl RunArgs {
    /// The configuration keys these flags set: (key, value, flag as typed).
    /// The daemon layers them over the file and the environment
    /// (`config::Sources`).
    pub fn config_flags(&self) -> Vec<(&'static str, String, &'static str)> {
        let listen = (!self.listen.is_empty()).then(|| self.listen.join(","));
        let flags = [
            ("export.listen", &listen, "--web.listen-address"),
            (
                "export.telemetry_path",
                &self.telemetry_path,
                "--web.telemetry-path",
            ),
            ("measure.cpus", &self.cpus, "--cpus"),
            ("measure.interval", &self.interval, "--interval"),
            ("measure.priority", &self.priority, "--priority"),
            (
                "export.web_config_file",
                &self.web_config_file,
                "--web.config.file",
            ),
            ("log.level", &self.log_level, "--log.level"),
            ("log.format", &self.log_format, "--log.format"),
        ];
        flags
            .into_iter()
            .filter_map(|(key, value, flag)| value.clone().map(|v| (key, v, flag)))
            .collect()
    }
}
