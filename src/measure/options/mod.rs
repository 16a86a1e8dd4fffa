//! Stage two of `measure`'s command line: the raw flags as typed
//! (`cli::MeasureArgs`) become `MeasureOptions`, every value read as
//! cyclictest reads it and checked against the host, each refusal naming
//! its option.
//!
//! - `read`: each group of options (the run's length, its triggers, the
//!   threads, the way of waiting, ...) read from the flags.
//! - `values`: one value, `atoi`-style, and the `Note`s that say what was
//!   not taken exactly as typed.
//! - `threads`: which threads run where, at what policy, priority and
//!   interval.
//! - `power`: the PM QoS request cyclictest makes by default.

mod power;
mod read;
mod threads;
mod values;

use std::path::PathBuf;

pub use threads::ThreadPlan;
pub use values::{Note, UsageError};

use self::power::pm_qos;
use self::values::{Notes, usage};
use crate::cli::MeasureArgs;
use crate::host::HostInfo;
use crate::load::Profile;
use crate::rt::clock::{ClockSource, SleepMode};
use crate::rt::sampler::LoopPlan;
use crate::rt::sys::Policy;
use crate::units::{NS_PER_MS, NS_PER_SEC, NS_PER_US};

/// How often samplers hand their interval to the main thread, and how
/// often live lines refresh.
pub(super) const PUBLISH_PERIOD_NS: u64 = 100 * NS_PER_MS;
/// Bounds that keep a typo from asking for absurd memory or a run that
/// never samples.
const MAX_INTERVAL_NS: u64 = 3_600 * NS_PER_SEC;
/// cyclictest's `HIST_MAX`: larger histograms are cut to it.
const MAX_HISTOGRAM_BINS: i64 = 1_000_000;
/// cyclictest's default number of `--spike` records.
const DEFAULT_SPIKE_NODES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonTarget {
    Stdout,
    File(PathBuf),
}

/// What to do about `/dev/cpu_dma_latency`: hold it at this many
/// microseconds (cyclictest's default is 0), or leave it alone
/// (`--default-system`, `--laptop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmQos {
    Off,
    Hold(i32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistogramOption {
    pub bins: usize,
    pub all_column: bool,
}

/// Where the threads' grids start: each thread's own start (cyclictest's
/// default), one common time (`-A`, each thread `offset` later than the
/// one before), or the next full second plus `offset` (`--secaligned`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alignment {
    None,
    Aligned { offset_ns: u64 },
    SecondAligned { offset_ns: u64 },
}

/// `--spike`: list each wake-up later than `trigger` (in the run's unit,
/// µs or ns with `-N`, as cyclictest compares it), up to `nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpikeList {
    pub trigger: u64,
    pub nodes: usize,
}

/// Validated, ready-to-run options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasureOptions {
    pub threads: Vec<ThreadPlan>,
    pub policy: Policy,
    pub duration_ns: Option<u64>,
    pub loops: Option<u64>,
    pub warmup_ns: u64,
    pub spike_threshold_ns: u64,
    pub histogram: Option<HistogramOption>,
    /// `--histfile`: the histogram goes here instead of stdout.
    pub histfile: Option<PathBuf>,
    pub nsecs: bool,
    pub quiet: bool,
    /// `-v`: print every `reduction`-th sample's largest (1: every sample).
    pub verbose: Option<u64>,
    pub unbuffered: bool,
    pub refresh_on_max: bool,
    pub json: Option<JsonTarget>,
    pub fifo: Option<PathBuf>,
    pub clock: ClockSource,
    pub sleep: SleepMode,
    pub alignment: Alignment,
    pub resolution_check: bool,
    /// `-b`: stop at the first wake-up at least this late.
    pub breaktrace_ns: Option<u64>,
    pub tracemark: bool,
    pub spike_list: Option<SpikeList>,
    pub smi: bool,
    pub pm_qos: PmQos,
    /// Disable idle states deeper than this (-1: all) on the measured CPUs.
    pub deepest_idle_state: Option<i32>,
    pub main_affinity: Option<Vec<usize>>,
    pub debug: bool,
    pub allow_non_rt: bool,
    /// `--forensics`: capture wake-ups at least this late.
    pub forensics_ns: Option<u64>,
    /// `--log FILE` and its interval.
    pub log: Option<(PathBuf, u64)>,
    /// `--timerlat`: the kernel's timerlat beside the samplers.
    pub timerlat: Option<TimerlatOption>,
    /// `--hwlat`: the kernel's hwlat tracer instead of the samplers.
    pub hwlat: Option<HwlatOption>,
    pub plot: Option<PathBuf>,
    /// `--load PROFILE` on `--load-cpus`.
    pub load: Option<(Profile, Vec<usize>)>,
    /// What was accepted but not exactly as typed, or means nothing here.
    pub notes: Vec<Note>,
}

/// `--hwlat`'s knobs, as hwlatdetect's, in µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HwlatOption {
    pub threshold_us: u64,
    pub width_us: u64,
    pub window_us: u64,
}

/// `--timerlat`'s settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerlatOption {
    pub period_us: u64,
    pub priority: i32,
    pub user_threads: bool,
}

impl MeasureOptions {
    pub fn from_args(args: &MeasureArgs, host: &HostInfo) -> Result<MeasureOptions, UsageError> {
        // In cyclictest's order of reading, so that the notes come in it.
        let mut notes = Notes::default();
        let length = read::run_length(args, &mut notes)?;
        let triggers = read::triggers(args, &mut notes)?;
        let histogram = read::histogram_option(args, &mut notes)?;
        let distance_ns = read::distance(args, histogram.is_some(), &mut notes)?;
        let (policy, threads) =
            read::threads(args, host, length.interval_ns, distance_ns, &mut notes)?;
        let verbose = read::verbose(args, &mut notes)?;
        let (clock, sleep, alignment) = read::waiting(args, &mut notes)?;
        let spike_list = read::spike_list(args, &mut notes)?;
        let pm_qos = pm_qos(args, &mut notes)?;
        let (deepest_idle_state, main_affinity) = read::idle_and_affinity(args, &mut notes)?;
        let load = read::load(args, host)?;
        read::accepted_from_older_versions(args, &mut notes);
        let json = args.json.as_ref().map(|path| {
            if path.as_os_str() == "-" {
                JsonTarget::Stdout
            } else {
                JsonTarget::File(path.clone())
            }
        });
        let hwlat = read::hwlat(args)?;
        if hwlat.is_some() {
            // No sampler runs: how many and where is not said.
            notes.0.retain(|note| note.option != "-t");
        }
        if let Some(path) = &args.plot {
            crate::plot::Format::of(path).map_err(|e| usage("--plot", e.to_string()))?;
        }
        Ok(MeasureOptions {
            threads,
            policy,
            duration_ns: length.duration_ns,
            loops: length.loops,
            warmup_ns: length.warmup_ns,
            spike_threshold_ns: triggers.spike_threshold_ns,
            histogram,
            histfile: args.histfile.clone(),
            nsecs: args.nsecs,
            quiet: args.quiet,
            verbose,
            unbuffered: args.unbuffered,
            refresh_on_max: args.refresh_on_max,
            json,
            fifo: args.fifo.clone(),
            clock,
            sleep,
            alignment,
            resolution_check: args.resolution,
            breaktrace_ns: triggers.breaktrace_ns,
            tracemark: args.tracemark,
            spike_list,
            smi: args.smi,
            pm_qos,
            deepest_idle_state,
            main_affinity,
            debug: args.dbg_cyclictest,
            allow_non_rt: args.allow_non_rt,
            forensics_ns: triggers.forensics_ns,
            log: triggers.log,
            timerlat: read::timerlat(args)?,
            hwlat,
            plot: args.plot.clone(),
            load,
            notes: notes.0,
        })
    }

    /// The distinct CPUs measured, in thread order.
    pub fn cpus(&self) -> Vec<usize> {
        let mut cpus: Vec<usize> = Vec::new();
        for thread in &self.threads {
            if !cpus.contains(&thread.cpu) {
                cpus.push(thread.cpu);
            }
        }
        cpus
    }

    /// A sampler's plan: everything in whole periods of its interval.
    pub fn loop_plan(&self, interval_ns: u64) -> LoopPlan {
        LoopPlan {
            interval_ns,
            warmup_periods: self.warmup_ns.div_ceil(interval_ns),
            measure_periods: self.duration_ns.map(|d| d / interval_ns),
            max_samples: self.loops,
            publish_period_ns: PUBLISH_PERIOD_NS,
        }
    }

    pub(super) fn unit_ns(&self) -> u64 {
        if self.nsecs { 1 } else { NS_PER_US }
    }
}
