//! `latencyd measure`: a one-shot, cyclictest-compatible measurement.
//!
//! Stage two of command-line handling turns the raw flags into
//! `MeasureOptions` (every value checked against the host), then `run`
//! locks memory, starts one sampler per CPU, drains their handoffs on the
//! main thread (printing live lines on a terminal), and renders the
//! results as cyclictest does when the run ends, is interrupted with
//! Ctrl-C / SIGTERM, or reaches its duration or loop count.

use std::fmt;
use std::fs;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use crate::cli::{MeasureArgs, PolicyArg};
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::engine::{Engine, EngineSpec};
use crate::host::HostInfo;
use crate::report::{self, RunReport, ThreadReport};
use crate::sampler::{LoopEndReason, LoopPlan};
use crate::stats::{LatencyStats, LinearHistogram};
use crate::sys::{self, CpuDmaLatencyHold, Policy};
use crate::units::{NS_PER_MS, NS_PER_SEC, NS_PER_US, format_duration_ns, parse_duration_ns};

/// The default real-time priority: high enough to preempt ordinary RT
/// work, below the kernel's own per-CPU threads at 99.
pub const DEFAULT_RT_PRIORITY: i32 = 80;
/// How often samplers hand their interval to the main thread, and how
/// often live lines refresh.
const PUBLISH_PERIOD_NS: u64 = 100 * NS_PER_MS;
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

        let cpus = match args.cpus.as_deref().map(str::trim) {
            None | Some("all") => host.usable_cpus.clone(),
            Some(list) => {
                let cpus = parse_cpu_list(list).map_err(|e| usage("--cpus", e.to_string()))?;
                if let Some(bad) = cpus.iter().find(|cpu| !host.usable_cpus.contains(cpu)) {
                    return Err(usage(
                        "--cpus",
                        format!(
                            "CPU {bad} is offline, absent or outside this process's affinity; \
                             usable CPUs are {}",
                            format_cpu_list(&host.usable_cpus)
                        ),
                    ));
                }
                cpus
            }
        };
        if cpus.is_empty() {
            return Err(usage("--cpus", "no usable CPU found"));
        }

        let policy = match args.policy {
            Some(PolicyArg::Fifo) => Policy::Fifo,
            Some(PolicyArg::Rr) => Policy::RoundRobin,
            Some(PolicyArg::Other) => Policy::Other,
            // cyclictest runs SCHED_OTHER when asked for priority 0.
            None if args.priority == Some(0) => Policy::Other,
            None => Policy::Fifo,
        };
        let priority = args.priority.unwrap_or(if policy.is_realtime() {
            DEFAULT_RT_PRIORITY
        } else {
            0
        });
        let (lowest, highest) = policy.priority_range();
        if !(lowest..=highest).contains(&priority) {
            return Err(usage(
                "--priority",
                format!(
                    "{priority} is outside {lowest}..={highest}, the range of the {} policy",
                    policy.name()
                ),
            ));
        }

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
        })
    }

    /// The samplers' plan: everything in whole periods of the interval.
    pub fn loop_plan(&self) -> LoopPlan {
        LoopPlan {
            interval_ns: self.interval_ns,
            warmup_periods: self.warmup_ns.div_ceil(self.interval_ns),
            measure_periods: self.duration_ns.map(|d| d / self.interval_ns),
            max_samples: self.loops,
            publish_every_periods: (PUBLISH_PERIOD_NS / self.interval_ns).max(1),
        }
    }

    fn unit_ns(&self) -> u64 {
        if self.nsecs { 1 } else { NS_PER_US }
    }
}

/// Entry point of the subcommand: validation errors exit 2 (like clap's),
/// run-time failures exit 1.
pub fn main(args: &MeasureArgs) -> ExitCode {
    let host = HostInfo::detect();
    let options = match MeasureOptions::from_args(args, &host) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("latencyd measure: {err}");
            return ExitCode::from(2);
        }
    };
    let cmdline = std::env::args().collect::<Vec<_>>().join(" ");
    match run(&options, &host, cmdline) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("latencyd measure: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

pub fn run(options: &MeasureOptions, host: &HostInfo, cmdline: String) -> anyhow::Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The first signal stops the run gracefully (samplers notice it at
        // their next wake-up); a second one, while the first is pending,
        // exits at once, for intervals too long to wait for.
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&stop)))
            .context("cannot install the SIGINT/SIGTERM handler")?;
    }
    let text_to_stdout = options.json != Some(JsonTarget::Stdout);
    let mut stdout = io::stdout().lock();

    let pm_qos_hold = match options.pm_qos {
        PmQos::Off => None,
        PmQos::Hold(us) => Some(CpuDmaLatencyHold::acquire(us).with_context(|| {
            format!(
                "cannot hold {} at {us}us (it needs root or write access to the device); \
                 drop --latency to run without it",
                sys::CPU_DMA_LATENCY_PATH
            )
        })?),
    };
    if let (Some(hold), true) = (&pm_qos_hold, text_to_stdout) {
        writeln!(
            stdout,
            "# /dev/cpu_dma_latency set to {}us",
            hold.latency_us
        )?;
    }

    let linear = options
        .histogram
        .map(|h| LinearHistogram::new(h.bins, options.unit_ns()));
    let template = LatencyStats::new(options.spike_threshold_ns, linear);
    let spec = EngineSpec {
        cpus: options.cpus.clone(),
        policy: options.policy,
        priority: options.priority,
        plan: options.loop_plan(),
        allow_non_rt: options.allow_non_rt,
        template: template.clone(),
    };
    let mut engine = Engine::start(spec, host, Arc::clone(&stop))?;
    for reason in &engine.non_rt_reasons {
        eprintln!(
            "latencyd measure: warning: not real-time: {reason}; results do not show real-time latency"
        );
    }

    let mut totals = vec![template; engine.slots.len()];
    let start_time = SystemTime::now();
    let live = !options.quiet && text_to_stdout && io::stdout().is_terminal();
    let mut next_refresh = Instant::now();
    // Samplers see a raised stop flag after their next wake-up; the loop
    // keeps draining until every one has returned.
    while !engine.all_finished() {
        engine
            .drain(|idx, interval| totals[idx].merge(interval))
            .context("merging a sampler's interval")?;
        if live && Instant::now() >= next_refresh {
            let lines = engine
                .slots
                .iter()
                .zip(&totals)
                .enumerate()
                .map(|(i, (slot, total))| {
                    report::format_summary_line(
                        i,
                        slot.shared().tid(),
                        options.priority,
                        options.interval_ns,
                        total,
                        options.nsecs,
                    )
                });
            write!(stdout, "{}", live_block(options.policy, lines, true))?;
            stdout.flush()?;
            next_refresh += Duration::from_nanos(PUBLISH_PERIOD_NS);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let non_rt_reasons = std::mem::take(&mut engine.non_rt_reasons);
    // Samplers stop at their next wake-up: one interval, plus slack.
    let timeout = Duration::from_nanos(options.interval_ns) + Duration::from_secs(2);
    let outcome = engine.finish(timeout, |idx, interval| totals[idx].merge(interval))?;
    let finished = outcome.finished;

    let mut sampler_errors: Vec<String> = finished
        .iter()
        .filter_map(|f| match f.end.map(|end| end.reason) {
            Some(LoopEndReason::SleepFailed(errno)) => Some(format!(
                "the sampler on CPU {} stopped: clock_nanosleep failed ({})",
                f.cpu,
                io::Error::from_raw_os_error(errno)
            )),
            Some(LoopEndReason::Displaced) => Some(format!(
                "the sampler on CPU {} stopped early: the CPU went offline or the thread was \
                 moved off it; its results cover the time before",
                f.cpu
            )),
            _ => None,
        })
        .collect();
    sampler_errors.extend(outcome.stuck.iter().map(|cpu| {
        format!("the sampler on CPU {cpu} did not stop; it is left out of the results")
    }));
    let report = RunReport {
        cmdline,
        start_time,
        end_time: SystemTime::now(),
        return_code: i32::from(!sampler_errors.is_empty()),
        host: host.clone(),
        pm_qos_us: pm_qos_hold.as_ref().map(|hold| hold.latency_us),
        policy: options.policy,
        nsecs: options.nsecs,
        histofall: options.histogram.is_some_and(|h| h.all_column),
        threads: finished
            .iter()
            .map(|f| (f, totals[f.idx].clone()))
            .map(|(f, stats)| ThreadReport {
                cpu: f.cpu,
                numa_node: numa_node_of(f.cpu),
                tid: f.shared.tid(),
                priority: f.spec.priority,
                interval_ns: f.spec.plan.interval_ns,
                realtime: f.realtime,
                stats,
            })
            .collect(),
    };

    if text_to_stdout {
        if !report.realtime() {
            writeln!(
                stdout,
                "# latencyd: NOT REAL-TIME ({}): these latencies are not representative",
                non_rt_reasons.join("; ")
            )?;
        }
        if !(options.quiet && options.histogram.is_some()) {
            if options.quiet {
                write!(stdout, "{}", report::summary_lines(&report))?;
            } else {
                let lines = (0..report.threads.len()).map(|i| report::summary_line(&report, i));
                write!(stdout, "{}", live_block(options.policy, lines, false))?;
            }
        }
        write!(stdout, "{}", report::histogram_block(&report))?;
    }
    match &options.json {
        Some(JsonTarget::Stdout) => write!(stdout, "{}", report::json_document(&report))?,
        Some(JsonTarget::File(path)) => fs::write(path, report::json_document(&report))
            .with_context(|| format!("cannot write the JSON results to {}", path.display()))?,
        None => {}
    }
    if let Some(path) = &options.plot {
        let data = crate::plot::PlotData {
            title: "Wake-up latency (latencyd)".to_string(),
            subtitle: crate::plot::subtitle(
                Some(&host.uname.nodename),
                Some(&host.uname.release),
                host.preempt_rt,
            ),
            series: report
                .threads
                .iter()
                .map(|t| crate::plot::series_from_stats(format!("CPU {}", t.cpu), &t.stats))
                .collect(),
        };
        crate::plot::write(&data, path)
            .with_context(|| format!("cannot draw the plot {}", path.display()))?;
    }
    stdout.flush()?;
    if !sampler_errors.is_empty() {
        bail!("{}", sampler_errors.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

/// cyclictest's screen: a `policy: … loadavg: …` line, a blank line and a
/// summary line per thread; while `moving_up`, the cursor then goes back
/// to the top so the next refresh overwrites it.
fn live_block(policy: Policy, lines: impl Iterator<Item = String>, moving_up: bool) -> String {
    let loadavg = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut block = format!(
        "policy: {}: loadavg: {}          \n\n",
        policy.name(),
        loadavg.trim()
    );
    let mut n_lines = 0;
    for line in lines {
        block.push_str(&line);
        block.push('\n');
        n_lines += 1;
    }
    if moving_up {
        block.push_str(&format!("\x1b[{}A", n_lines + 2));
    }
    block
}

/// The NUMA node of a CPU from sysfs (`cpuN/nodeM`), or -1 as cyclictest
/// writes when it does not know.
fn numa_node_of(cpu: usize) -> i32 {
    let Ok(entries) = fs::read_dir(format!("/sys/devices/system/cpu/cpu{cpu}")) else {
        return -1;
    };
    entries
        .filter_map(Result::ok)
        .find_map(|entry| {
            entry
                .file_name()
                .to_str()
                .and_then(|name| name.strip_prefix("node"))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(-1)
}
