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
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use crate::cli::{MeasureArgs, PolicyArg};
use crate::cpulist::{format_cpu_list, parse_cpu_list};
use crate::handoff::{self, Collector};
use crate::host::HostInfo;
use crate::report::{self, RunReport, ThreadReport};
use crate::sampler::{self, FailedStep, LoopEndReason, LoopPlan, SamplerSpec, SamplerState};
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
/// How long samplers get to pin themselves and switch policy.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

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

/// One sampler as seen from the main thread.
struct Slot {
    handle: sampler::SamplerHandle,
    collector: Collector,
    total: LatencyStats,
    /// Ran with its real-time policy and memory locked.
    realtime: bool,
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

    let mut non_rt_reasons = Vec::new();
    let memory_locked = lock_memory(host, options.allow_non_rt, &mut non_rt_reasons)?;

    let linear = options
        .histogram
        .map(|h| LinearHistogram::new(h.bins, options.unit_ns()));
    let template = LatencyStats::new(options.spike_threshold_ns, linear);
    let plan = options.loop_plan();
    let mut slots = Vec::with_capacity(options.cpus.len());
    for &cpu in &options.cpus {
        let (publisher, collector) = handoff::channel(&template, handoff::DEFAULT_BUFFERS);
        let spec = SamplerSpec {
            cpu,
            policy: options.policy,
            priority: options.priority,
            plan,
            allow_non_rt: options.allow_non_rt,
        };
        let handle = sampler::spawn(spec, publisher, Arc::clone(&stop))
            .with_context(|| format!("cannot start the sampler thread for CPU {cpu}"))?;
        slots.push(Slot {
            handle,
            collector,
            total: template.clone(),
            realtime: false,
        });
    }

    if let Err(err) = wait_for_start(&slots, host, options) {
        stop.store(true, Ordering::Relaxed);
        for slot in slots {
            let _ = slot.handle.join();
        }
        return Err(err);
    }
    for slot in &mut slots {
        slot.realtime =
            memory_locked && slot.handle.shared.state() == SamplerState::RunningRealtime;
        if slot.handle.shared.state() == SamplerState::RunningNonRealtime
            && options.policy.is_realtime()
        {
            let (_, err) = slot.handle.shared.failure();
            non_rt_reasons.push(format!(
                "CPU {}: {} priority {} refused ({err})",
                slot.handle.spec.cpu,
                options.policy.name(),
                options.priority
            ));
        }
    }
    if !options.policy.is_realtime() {
        non_rt_reasons.push("the policy is 'other' (SCHED_OTHER)".to_string());
    }
    for reason in &non_rt_reasons {
        eprintln!(
            "latencyd measure: warning: not real-time: {reason}; results do not show real-time latency"
        );
    }

    let start_time = SystemTime::now();
    let live = !options.quiet && text_to_stdout && io::stdout().is_terminal();
    let mut next_refresh = Instant::now();
    loop {
        let finished = slots.iter().all(|s| s.handle.is_finished());
        for slot in &mut slots {
            slot.collector
                .drain(|interval| slot.total.merge(interval))
                .context("merging a sampler's interval")?;
        }
        if finished {
            break;
        }
        if live && Instant::now() >= next_refresh {
            let lines = slots.iter().enumerate().map(|(i, slot)| {
                report::format_summary_line(
                    i,
                    slot.handle.shared.tid(),
                    slot.handle.spec.priority,
                    slot.handle.spec.plan.interval_ns,
                    &slot.total,
                    options.nsecs,
                )
            });
            write!(stdout, "{}", live_block(options.policy, lines, true))?;
            stdout.flush()?;
            next_refresh += Duration::from_nanos(PUBLISH_PERIOD_NS);
        }
        // Samplers see a raised stop flag after their next wake-up; the
        // loop keeps draining until every one has returned.
        std::thread::sleep(Duration::from_millis(10));
    }

    let mut sampler_errors = Vec::new();
    let mut finished_slots = Vec::with_capacity(slots.len());
    for slot in slots {
        let Slot {
            handle,
            mut collector,
            mut total,
            realtime,
        } = slot;
        let shared = Arc::clone(&handle.shared);
        let (spec, exit) = handle.join()?;
        collector.drain(|interval| total.merge(interval))?;
        total.merge(&exit.remainder)?;
        if let Some(end) = exit.end
            && let LoopEndReason::SleepFailed(errno) = end.reason
        {
            sampler_errors.push(format!(
                "the sampler on CPU {} stopped: clock_nanosleep failed ({})",
                spec.cpu,
                io::Error::from_raw_os_error(errno)
            ));
        }
        finished_slots.push((spec, shared, total, realtime));
    }

    let return_code = i32::from(!sampler_errors.is_empty());
    let report = RunReport {
        cmdline,
        start_time,
        end_time: SystemTime::now(),
        return_code,
        host: host.clone(),
        pm_qos_us: pm_qos_hold.as_ref().map(|hold| hold.latency_us),
        policy: options.policy,
        nsecs: options.nsecs,
        histofall: options.histogram.is_some_and(|h| h.all_column),
        threads: finished_slots
            .into_iter()
            .map(|(spec, shared, stats, realtime)| ThreadReport {
                cpu: spec.cpu,
                numa_node: numa_node_of(spec.cpu),
                tid: shared.tid(),
                priority: spec.priority,
                interval_ns: spec.plan.interval_ns,
                realtime,
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
    stdout.flush()?;
    if !sampler_errors.is_empty() {
        bail!("{}", sampler_errors.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

/// Locks all memory, or explains why it cannot and how to fix that.
/// Returns whether memory is locked (it may not be with `allow_non_rt`).
fn lock_memory(
    host: &HostInfo,
    allow_non_rt: bool,
    non_rt_reasons: &mut Vec<String>,
) -> anyhow::Result<bool> {
    const FIX: &str = "run as root, grant CAP_IPC_LOCK, or raise RLIMIT_MEMLOCK to unlimited \
                       (`ulimit -l unlimited`, or LimitMEMLOCK=infinity under systemd); \
                       or pass --allow-non-rt to measure without it";
    let problem = if host.memory_lock_is_safe() {
        match sys::lock_all_memory() {
            Ok(()) => return Ok(true),
            Err(err) => format!("mlockall failed ({err})"),
        }
    } else {
        format!(
            "RLIMIT_MEMLOCK is {} KiB and the process lacks CAP_IPC_LOCK, so locking all \
             memory would make later allocations fail",
            host.memlock_limit.unwrap_or(0) / 1024
        )
    };
    if allow_non_rt {
        non_rt_reasons.push(format!("memory is not locked: {problem}"));
        Ok(false)
    } else {
        bail!("cannot lock memory: {problem}. To fix: {FIX}")
    }
}

/// Waits until every sampler runs or one fails; a failure becomes an
/// error that says what failed and how to fix it.
fn wait_for_start(slots: &[Slot], host: &HostInfo, options: &MeasureOptions) -> anyhow::Result<()> {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        let mut starting = false;
        for slot in slots {
            match slot.handle.shared.state() {
                SamplerState::Starting => starting = true,
                SamplerState::Failed => {
                    let (step, err) = slot.handle.shared.failure();
                    bail!(
                        "{}",
                        explain_start_failure(slot.handle.spec.cpu, step, &err, host, options)
                    );
                }
                _ => {}
            }
        }
        if !starting {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the samplers did not start within {STARTUP_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn explain_start_failure(
    cpu: usize,
    step: FailedStep,
    err: &io::Error,
    host: &HostInfo,
    options: &MeasureOptions,
) -> String {
    match step {
        FailedStep::Affinity => format!(
            "cannot pin the sampler to CPU {cpu} ({err}): the CPU may have gone offline or be \
             outside this cgroup's cpuset; choose others with --cpus"
        ),
        FailedStep::Policy => {
            let limit = match host.rtprio_limit {
                None => "unlimited".to_string(),
                Some(n) => n.to_string(),
            };
            format!(
                "cannot switch the sampler on CPU {cpu} to SCHED_{} priority {} ({err}). \
                 Real-time scheduling needs root, CAP_SYS_NICE, or RLIMIT_RTPRIO of at least {} \
                 (now {limit}; `ulimit -r {}`, or LimitRTPRIO={} under systemd); a cgroup v1 \
                 group with cpu.rt_runtime_us = 0 refuses it even to root. Pass --allow-non-rt \
                 to measure anyway, marked as not real-time",
                options.policy.name().to_uppercase(),
                options.priority,
                options.priority,
                options.priority,
                options.priority,
            )
        }
        FailedStep::Sleep | FailedStep::None => {
            format!("the sampler on CPU {cpu} failed to start ({err})")
        }
    }
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
