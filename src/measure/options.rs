//! Stage two of `measure`'s command line: the raw flags as typed
//! (`cli::MeasureArgs`) become `MeasureOptions`, every value checked
//! against the host, each refusal naming its option.

use std::fmt;
use std::path::PathBuf;

use crate::cli::{MeasureArgs, PolicyArg};
use crate::host::HostInfo;
use crate::rt::sampler::LoopPlan;
use crate::rt::sys::Policy;
use crate::sampling::{CpuSelection, check_priority, default_priority};
use crate::units::{NS_PER_MS, NS_PER_SEC, NS_PER_US, format_duration_ns, parse_duration_ns};

/// How often samplers hand their interval to the main thread, and how
/// often live lines refresh.
pub(super) const PUBLISH_PERIOD_NS: u64 = 100 * NS_PER_MS;
/// Bounds that keep a typo from asking for absurd memory or a run that
/// never samples.
const MAX_INTERVAL_NS: u64 = 3_600 * NS_PER_SEC;
const MAX_HISTOGRAM_BINS: usize = 1_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonTarget {
    Stdout,
    File(PathBuf),
}

/// What to do about `/dev/cpu_dma_latency`: nothing (the default), or
/// hold it at this many microseconds, failing if that is not possible.
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

/// Validated, ready-to-run options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasureOptions {
    pub cpus: Vec<usize>,
    pub policy: Policy,
    pub priority: i32,
    pub interval_ns: u64,
    pub duration_ns: Option<u64>,
    pub loops: Option<u64>,
    pub warmup_ns: u64,
    pub spike_threshold_ns: u64,
    pub histogram: Option<HistogramOption>,
    pub nsecs: bool,
    pub quiet: bool,
    pub json: Option<JsonTarget>,
    pub plot: Option<PathBuf>,
    pub allow_non_rt: bool,
    pub pm_qos: PmQos,
    /// `-b`: stop at the first wake-up at least this late.
    pub breaktrace_ns: Option<u64>,
    /// `--forensics`: capture wake-ups at least this late.
    pub forensics_ns: Option<u64>,
    /// `--log FILE` and its interval.
    pub log: Option<(std::path::PathBuf, u64)>,
}

/// A command-line value that cannot be used, with the option it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    pub option: &'static str,
    pub message: String,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.option, self.message)
    }
}

impl std::error::Error for UsageError {}

fn usage(option: &'static str, message: impl Into<String>) -> UsageError {
    UsageError {
        option,
        message: message.into(),
    }
}

impl MeasureOptions {
    pub fn from_args(args: &MeasureArgs, host: &HostInfo) -> Result<MeasureOptions, UsageError> {
        let interval_ns = parse_duration_ns(&args.interval, Some(NS_PER_US))
            .map_err(|e| usage("--interval", e.to_string()))?;
        if interval_ns < NS_PER_US {
            return Err(usage(
                "--interval",
                format!("'{}' is below 1us; write e.g. 100us or 1ms", args.interval),
            ));
        }
        if interval_ns > MAX_INTERVAL_NS {
            return Err(usage(
                "--interval",
                format!("'{}' is longer than the 1h maximum", args.interval),
            ));
        }
        let duration_ns = args
            .duration
            .as_deref()
            .map(|d| {
                let ns = parse_duration_ns(d, Some(NS_PER_SEC))
                    .map_err(|e| usage("--duration", e.to_string()))?;
                if ns < interval_ns {
                    return Err(usage(
                        "--duration",
                        format!(
                            "'{d}' is shorter than one interval ({}): nothing would be measured",
                            format_duration_ns(interval_ns)
                        ),
                    ));
                }
                Ok(ns)
            })
            .transpose()?;
        let warmup_ns = match &args.warmup {
            Some(w) => parse_duration_ns(w, Some(NS_PER_SEC))
                .map_err(|e| usage("--warmup", e.to_string()))?,
            None => 0,
        };
        let spike_threshold_ns = parse_duration_ns(&args.spike_threshold, Some(NS_PER_US))
            .map_err(|e| usage("--spike-threshold", e.to_string()))?;
        let positive =
            |option: &'static str, text: &str| match parse_duration_ns(text, Some(NS_PER_US)) {
                Ok(0) => Err(usage(option, "must be more than 0".to_string())),
                Ok(ns) => Ok(ns),
                Err(e) => Err(usage(option, e.to_string())),
            };
        let breaktrace_ns = args
            .breaktrace
            .as_deref()
            .map(|text| positive("--breaktrace", text))
            .transpose()?;
        let forensics_ns = if args.forensics {
            Some(positive(
                "--forensics-threshold",
                &args.forensics_threshold,
            )?)
        } else {
            None
        };

        let log = match &args.log {
            None => None,
            Some(path) => {
                let ns = parse_duration_ns(&args.log_interval, Some(NS_PER_SEC))
                    .map_err(|e| usage("--log-interval", e.to_string()))?;
                if !(NS_PER_SEC..=3_600 * NS_PER_SEC).contains(&ns) || ns % NS_PER_SEC != 0 {
                    return Err(usage(
                        "--log-interval",
                        "must be whole seconds between 1s and 1h".to_string(),
                    ));
                }
                Some((path.clone(), ns))
            }
        };

        let selection = match args.cpus.as_deref() {
            None => CpuSelection::All,
            Some(text) => CpuSelection::parse(text.trim()).map_err(|e| usage("--cpus", e))?,
        };
        let cpus = selection.resolve(host).map_err(|e| usage("--cpus", e))?;

        let policy = match args.policy {
            Some(PolicyArg::Fifo) => Policy::Fifo,
            Some(PolicyArg::Rr) => Policy::RoundRobin,
            Some(PolicyArg::Other) => Policy::Other,
            // cyclictest runs SCHED_OTHER when asked for priority 0.
            None if args.priority == Some(0) => Policy::Other,
            None => Policy::Fifo,
        };
        let priority = match args.priority {
            Some(p) => check_priority(policy, i64::from(p)).map_err(|e| usage("--priority", e))?,
            None => default_priority(policy),
        };

        let histogram = match (args.histogram, args.histofall) {
            (Some(bins), _) => Some((bins, false, "--histogram")),
            (None, Some(bins)) => Some((bins, true, "--histofall")),
            (None, None) => None,
        };
        let histogram = histogram
            .map(|(bins, all_column, option)| {
                if bins == 0 || bins > MAX_HISTOGRAM_BINS {
                    return Err(usage(
                        option,
                        format!("{bins} bins: choose between 1 and {MAX_HISTOGRAM_BINS}"),
                    ));
                }
                Ok(HistogramOption { bins, all_column })
            })
            .transpose()?;

        let pm_qos = match args.latency {
            Some(us) if us < 0 => {
                return Err(usage(
                    "--latency",
                    format!("{us}: write 0 or more microseconds"),
                ));
            }
            Some(us) => PmQos::Hold(us),
            None => PmQos::Off,
        };

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
            cpus,
            policy,
            priority,
            interval_ns,
            duration_ns,
            // cyclictest's -l 0 means "endless".
            loops: args.loops.filter(|&n| n > 0),
            warmup_ns,
            spike_threshold_ns,
            histogram,
            nsecs: args.nsecs,
            quiet: args.quiet,
            json,
            plot: args.plot.clone(),
            allow_non_rt: args.allow_non_rt,
            pm_qos,
            breaktrace_ns,
            forensics_ns,
            log,
        })
    }

    /// The samplers' plan: everything in whole periods of the interval.
    pub fn loop_plan(&self) -> LoopPlan {
        LoopPlan {
            interval_ns: self.interval_ns,
            warmup_periods: self.warmup_ns.div_ceil(self.interval_ns),
            measure_periods: self.duration_ns.map(|d| d / self.interval_ns),
            max_samples: self.loops,
            publish_period_ns: PUBLISH_PERIOD_NS,
        }
    }

    pub(super) fn unit_ns(&self) -> u64 {
        if self.nsecs { 1 } else { NS_PER_US }
    }
}
