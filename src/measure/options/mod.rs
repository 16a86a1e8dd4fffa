//! Stage two of `measure`'s command line: the raw flags as typed
//! (`cli::MeasureArgs`) become `MeasureOptions`, every value read as
//! cyclictest reads it and checked against the host, each refusal naming
//! its option.
//!
//! - `values`: one value, `atoi`-style, and the `Note`s that say what was
//!   not taken exactly as typed.
//! - `threads`: which threads run where, at what policy, priority and
//!   interval.
//! - `power`: the PM QoS request cyclictest makes by default.

mod power;
mod threads;
mod values;

use std::path::PathBuf;

pub use threads::ThreadPlan;
pub use values::{Note, UsageError};

use self::power::pm_qos;
use self::threads::{Placement, Spacing, place, plan_threads, policy_and_priority};
use self::values::{Notes, duration, integer, integer_in, signed_duration, usage};
use crate::cli::MeasureArgs;
use crate::cpulist::parse_cpu_list;
use crate::host::HostInfo;
use crate::load::Profile;
use crate::rt::clock::{ClockSource, SleepMode};
use crate::rt::sampler::LoopPlan;
use crate::rt::sys::Policy;
use crate::units::{NS_PER_MS, NS_PER_SEC, NS_PER_US, format_duration_ns};

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
    pub plot: Option<PathBuf>,
    /// `--load PROFILE` on `--load-cpus`.
    pub load: Option<(Profile, Vec<usize>)>,
    /// What was accepted but not exactly as typed, or means nothing here.
    pub notes: Vec<Note>,
}

impl MeasureOptions {
    pub fn from_args(args: &MeasureArgs, host: &HostInfo) -> Result<MeasureOptions, UsageError> {
        let mut notes = Notes::default();
        let interval_ns = duration("--interval", &args.interval, NS_PER_US)?;
        if !(NS_PER_US..=MAX_INTERVAL_NS).contains(&interval_ns) {
            return Err(usage(
                "--interval",
                format!(
                    "'{}' is outside 1us..=1h; write e.g. 100us or 1ms",
                    args.interval
                ),
            ));
        }
        let duration_ns = args
            .duration
            .as_deref()
            .map(|d| duration("--duration", d, NS_PER_SEC))
            .transpose()?
            // cyclictest's -D 0 means "no limit".
            .filter(|&ns| ns > 0);
        if let Some(ns) = duration_ns
            && ns < interval_ns
        {
            return Err(usage(
                "--duration",
                format!(
                    "'{}' is shorter than one interval ({}): nothing would be measured",
                    args.duration.as_deref().unwrap_or_default(),
                    format_duration_ns(interval_ns)
                ),
            ));
        }
        let loops = args
            .loops
            .as_deref()
            .map(|l| integer_in("--loops", l, 0..=i64::MAX, &mut notes))
            .transpose()?
            // cyclictest's -l 0 means "endless".
            .filter(|&n| n > 0)
            .map(|n| n as u64);
        let warmup_ns = match &args.warmup {
            Some(w) => duration("--warmup", w, NS_PER_SEC)?,
            None => 0,
        };
        let spike_threshold_ns = duration("--spike-threshold", &args.spike_threshold, NS_PER_US)?;
        // A threshold of 0 switches -b off, as in cyclictest.
        let breaktrace_ns = args
            .breaktrace
            .as_deref()
            .map(|text| duration("--breaktrace", text, NS_PER_US))
            .transpose()?
            .filter(|&ns| ns > 0);
        if args.tracemark && breaktrace_ns.is_none() {
            notes.add("--tracemark", "has no effect without -b, as in cyclictest");
        }
        let forensics_ns = if args.forensics {
            match duration(
                "--forensics-threshold",
                &args.forensics_threshold,
                NS_PER_US,
            )? {
                0 => return Err(usage("--forensics-threshold", "must be more than 0")),
                ns => Some(ns),
            }
        } else {
            None
        };
        let log = match &args.log {
            None => None,
            Some(path) => {
                let ns = duration("--log-interval", &args.log_interval, NS_PER_SEC)?;
                if !(NS_PER_SEC..=3_600 * NS_PER_SEC).contains(&ns) || ns % NS_PER_SEC != 0 {
                    return Err(usage(
                        "--log-interval",
                        "must be whole seconds between 1s and 1h",
                    ));
                }
                Some((path.clone(), ns))
            }
        };

        let histogram = histogram_option(args, &mut notes)?;
        let distance_ns = match (&args.distance, histogram) {
            (Some(text), Some(_)) => {
                signed_duration("--distance", text, NS_PER_US)?;
                notes.add(
                    "--distance",
                    "ignored and set to 0 with a histogram, as cyclictest does",
                );
                0
            }
            (None, Some(_)) => 0,
            (Some(text), None) => signed_duration("--distance", text, NS_PER_US)?,
            (None, None) => 500 * NS_PER_US as i64,
        };

        let threads_arg = match &args.threads {
            Some(Some(text)) => Some(Some(integer("--threads", text, &mut notes)?)),
            Some(None) => Some(None),
            None => None,
        };
        let placement = Placement {
            cpus: args.cpus.as_ref().map(|c| c.as_deref()),
            threads: threads_arg,
            smp: args.smp,
        };
        let (mask, n_threads) = place(&placement, host, &mut notes)?;

        let (policy, priority) = policy_and_priority(args, n_threads, &mut notes)?;
        let threads = plan_threads(
            &mask,
            n_threads,
            policy,
            Spacing {
                priority,
                priospread: args.priospread,
                interval_ns,
                distance_ns,
                max_interval_ns: MAX_INTERVAL_NS,
            },
        )?;

        let verbose = match (&args.oscope, args.verbose) {
            (Some(_), false) => {
                return Err(usage(
                    "--oscope",
                    "-o only means something with -v (verbose), as in cyclictest",
                ));
            }
            (Some(text), true) => {
                Some(integer_in("--oscope", text, 1..=i64::MAX, &mut notes)? as u64)
            }
            (None, true) => Some(1),
            (None, false) => None,
        };

        let clock = match integer_in("--clock", &args.clock, 0..=1, &mut notes)? {
            0 => ClockSource::Monotonic,
            _ => ClockSource::Realtime,
        };
        let sleep = match (args.posix_timers, args.relative || args.system) {
            (true, true) => {
                notes.add(
                    "-x",
                    "with -r or -s: the timer is armed relative to each wake-up",
                );
                SleepMode::Relative
            }
            (true, false) => SleepMode::PosixTimer,
            (false, true) => SleepMode::Relative,
            (false, false) => SleepMode::Absolute,
        };
        let offset = |option: &'static str, value: &Option<String>, notes: &mut Notes| {
            value
                .as_deref()
                .map(|text| {
                    integer_in(option, text, 0..=i64::MAX, notes).map(|us| us as u64 * NS_PER_US)
                })
                .transpose()
                .map(Option::unwrap_or_default)
        };
        let alignment = match (&args.aligned, &args.secaligned) {
            (Some(_), Some(_)) => {
                return Err(usage(
                    "--aligned",
                    "-A and --secaligned exclude each other, as in cyclictest",
                ));
            }
            (Some(value), None) => Alignment::Aligned {
                offset_ns: offset("--aligned", value, &mut notes)?,
            },
            (None, Some(value)) => Alignment::SecondAligned {
                offset_ns: offset("--secaligned", value, &mut notes)?,
            },
            (None, None) => Alignment::None,
        };

        let spike_list = args
            .spike
            .as_deref()
            .map(|text| -> Result<SpikeList, UsageError> {
                let trigger = integer_in("--spike", text, 0..=i64::MAX, &mut notes)?;
                let nodes = match &args.spike_nodes {
                    Some(n) => integer_in("--spike-nodes", n, 1..=1_000_000, &mut notes)? as usize,
                    None => DEFAULT_SPIKE_NODES,
                };
                Ok(SpikeList {
                    trigger: trigger as u64,
                    nodes,
                })
            })
            .transpose()?
            // --spike 0 records nothing in cyclictest.
            .filter(|s| s.trigger > 0);
        if args.spike_nodes.is_some() && spike_list.is_none() {
            notes.add("--spike-nodes", "has no effect without --spike");
        }

        let pm_qos = pm_qos(args, &mut notes)?;
        let deepest_idle_state = args
            .deepest_idle_state
            .as_deref()
            .map(|text| {
                integer_in("--deepest-idle-state", text, -1..=64, &mut notes).map(|n| n as i32)
            })
            .transpose()?;
        let main_affinity = args
            .mainaffinity
            .as_deref()
            .map(|text| {
                parse_cpu_list(text.trim()).map_err(|e| usage("--mainaffinity", e.to_string()))
            })
            .transpose()?;
        let load = match (&args.load, &args.load_cpus) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(usage(
                    "--load-cpus",
                    "says where a load runs; add --load PROFILE to start one",
                ));
            }
            (Some(name), cpus) => {
                let profile = Profile::parse(name).map_err(|e| usage("--load", e))?;
                let cpus = match cpus {
                    None => host.usable_cpus.clone(),
                    Some(text) => {
                        let cpus = parse_cpu_list(text.trim())
                            .map_err(|e| usage("--load-cpus", e.to_string()))?;
                        if let Some(cpu) = cpus.iter().find(|c| !host.usable_cpus.contains(c)) {
                            return Err(usage(
                                "--load-cpus",
                                format!(
                                    "CPU {cpu} is not usable here (usable: {})",
                                    crate::cpulist::format_cpu_list(&host.usable_cpus)
                                ),
                            ));
                        }
                        cpus
                    }
                };
                Some((profile, cpus))
            }
        };

        if args.nanosleep {
            notes.add(
                "-n",
                "accepted from cyclictest 1.x; clock_nanosleep is always used",
            );
        }
        if args.numa {
            notes.add(
                "--numa",
                "accepted from cyclictest 1.x; each sampler's memory is first touched by \
                 its own pinned thread, so it is on that CPU's node already",
            );
        }
        if args.smp && args.priospread {
            notes.add("--priospread", "spreads priorities with -S too");
        }

        let json = args.json.as_ref().map(|path| {
            if path.as_os_str() == "-" {
                JsonTarget::Stdout
            } else {
                JsonTarget::File(path.clone())
            }
        });
        if let Some(path) = &args.plot {
            crate::plot::Format::of(path).map_err(|e| usage("--plot", e.to_string()))?;
        }

        Ok(MeasureOptions {
            threads,
            policy,
            duration_ns,
            loops,
            warmup_ns,
            spike_threshold_ns,
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
            breaktrace_ns,
            tracemark: args.tracemark,
            spike_list,
            smi: args.smi,
            pm_qos,
            deepest_idle_state,
            main_affinity,
            debug: args.dbg_cyclictest,
            allow_non_rt: args.allow_non_rt,
            forensics_ns,
            log,
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

/// `-h`/`-H`: bins, cut to cyclictest's maximum (said in a note).
fn histogram_option(
    args: &MeasureArgs,
    notes: &mut Notes,
) -> Result<Option<HistogramOption>, UsageError> {
    let (text, all_column, option) = match (&args.histogram, &args.histofall) {
        (Some(text), _) => (text, false, "--histogram"),
        (None, Some(text)) => (text, true, "--histofall"),
        (None, None) => return Ok(None),
    };
    if args.histogram.is_some() && args.histofall.is_some() {
        notes.add(
            "--histofall",
            "given with -h: the all-threads column is added",
        );
    }
    let bins = integer(option, text, notes)?;
    if bins < 1 {
        return Err(usage(option, format!("{bins} bins: choose 1 or more")));
    }
    let bins = if bins > MAX_HISTOGRAM_BINS {
        notes.add(
            option,
            format!("{bins} bins cut to {MAX_HISTOGRAM_BINS}, cyclictest's maximum"),
        );
        MAX_HISTOGRAM_BINS
    } else {
        bins
    };
    Ok(Some(HistogramOption {
        bins: bins as usize,
        all_column: all_column || args.histofall.is_some(),
    }))
}
