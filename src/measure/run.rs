//! Running a measurement: hold `/dev/cpu_dma_latency` if asked, start one
//! sampler per CPU through the engine, drain their handoffs on the main
//! thread every 10 ms (live lines on a terminal), stop on Ctrl-C/SIGTERM or
//! at the end of the plan, and render the results as cyclictest does.

use std::fs;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use super::options::{JsonTarget, MeasureOptions, PUBLISH_PERIOD_NS, PmQos};
use super::report::{RunReport, ThreadReport};
use super::{json, text};
use crate::forensics::attribution::human;
use crate::forensics::tracefs::DEFAULT_TRACEFS;
use crate::forensics::{Recorder, Settings, Spike};
use crate::host::HostInfo;
use crate::record::{Accumulator, Context as RecordContext, LogWriter, Target};
use crate::rt::engine::{DEFAULT_START_TIMEOUT, Engine, EngineSpec};
use crate::rt::sampler::LoopEndReason;
use crate::rt::sys::{self, CpuDmaLatencyHold, Policy};
use crate::stats::{LatencyStats, LinearHistogram};
use crate::units::{NS_PER_MS, unix_now_ns};

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
        start_timeout: DEFAULT_START_TIMEOUT,
        limits: host.rt_limits(),
    };
    // `--log`: created now, so a path that cannot be written stops the
    // run before it starts.
    let mut log = match &options.log {
        Some((path, interval_ns)) => Some(MeasureLog::create(path, *interval_ns, options, host)?),
        None => None,
    };
    // Recording before the samplers start: a spike in the first moments
    // finds its events there.
    let recorder = start_forensics(options);
    let mut engine = Engine::start(spec, Arc::clone(&stop))?;
    for reason in &engine.non_rt_reasons {
        eprintln!(
            "latencyd measure: warning: not real-time: {reason}; results do not show real-time latency"
        );
    }

    // `-b`: the sampler's TID and the latency that stopped the run.
    let mut break_hit: Option<(i32, u64)> = None;
    let capture_from = [options.breaktrace_ns, options.forensics_ns]
        .into_iter()
        .flatten()
        .min();

    let mut totals = vec![template; engine.slots.len()];
    let cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
    let start_time = SystemTime::now();
    let live = !options.quiet && text_to_stdout && io::stdout().is_terminal();
    let mut next_refresh = Instant::now();
    // Samplers see a raised stop flag after their next wake-up; the loop
    // keeps draining until every one has returned.
    while !engine.all_finished() {
        let mut spikes: Vec<(usize, u64, u64)> = Vec::new();
        engine
            .drain(|idx, interval| {
                if let (Some(from), Some(at)) = (capture_from, interval.max_at_ns())
                    && interval.count > 0
                    && interval.max_ns >= from
                {
                    spikes.push((idx, interval.max_ns, at));
                }
                if let Some(log) = &mut log {
                    log.accumulator.add(cpus[idx], interval);
                }
                totals[idx].merge(interval)
            })
            .context("merging a sampler's interval")?;
        if let Some(log) = &mut log {
            log.write_due(false);
        }
        for (idx, latency_ns, wakeup_ns) in spikes {
            let slot = &engine.slots[idx];
            let tid = slot.shared().tid();
            let breaks = options.breaktrace_ns.is_some_and(|b| latency_ns >= b);
            if breaks && break_hit.is_none() {
                break_hit = Some((tid, latency_ns));
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            if breaks || options.forensics_ns.is_some_and(|f| latency_ns >= f) {
                recorder.notice(Spike {
                    cpu: slot.cpu,
                    sampler_tid: tid,
                    latency_ns,
                    wakeup_ns,
                });
            }
        }
        if live && Instant::now() >= next_refresh {
            let lines = engine
                .slots
                .iter()
                .zip(&totals)
                .enumerate()
                .map(|(i, (slot, total))| {
                    text::format_summary_line(
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
    let outcome = engine.finish(timeout, |idx, interval| {
        if let Some(log) = &mut log {
            log.accumulator.add(cpus[idx], interval);
        }
        totals[idx].merge(interval)
    })?;
    if let Some(log) = &mut log {
        log.write_due(true);
    }
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
                write!(stdout, "{}", text::summary_lines(&report))?;
            } else {
                let lines = (0..report.threads.len()).map(|i| text::summary_line(&report, i));
                write!(stdout, "{}", live_block(options.policy, lines, false))?;
            }
        }
        write!(stdout, "{}", text::histogram_block(&report))?;
    }
    if capture_from.is_some() {
        recorder.flush();
        let forensics = forensics_block(options, &recorder, break_hit);
        if text_to_stdout {
            write!(stdout, "{forensics}")?;
        } else {
            eprint!("{forensics}");
        }
    }
    match &options.json {
        Some(JsonTarget::Stdout) => write!(stdout, "{}", json::json_document(&report))?,
        Some(JsonTarget::File(path)) => fs::write(path, json::json_document(&report))
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

/// `measure --log`: the record's format for a one-shot run, one file.
struct MeasureLog {
    accumulator: Accumulator,
    writer: LogWriter,
    path: PathBuf,
    failed: bool,
}

impl MeasureLog {
    fn create(
        path: &Path,
        interval_ns: u64,
        options: &MeasureOptions,
        host: &HostInfo,
    ) -> anyhow::Result<MeasureLog> {
        std::fs::File::create(path)
            .with_context(|| format!("--log: cannot create {}", path.display()))?;
        let context = RecordContext::of(
            host,
            options.interval_ns,
            options.policy.name(),
            options.priority,
        );
        Ok(MeasureLog {
            accumulator: Accumulator::new(interval_ns, options.spike_threshold_ns, unix_now_ns()),
            writer: LogWriter::new(Target::File(path.to_path_buf())).with_context(context),
            path: path.to_path_buf(),
            failed: false,
        })
    }

    /// Writes the finished interval (every interval, or the part in
    /// progress at the end). A failure is said once; the run goes on.
    fn write_due(&mut self, end: bool) {
        let Some(batch) = self.accumulator.take(unix_now_ns(), end) else {
            return;
        };
        if let Err(err) = self.writer.write(&batch, unix_now_ns())
            && !self.failed
        {
            self.failed = true;
            eprintln!(
                "latencyd measure: warning: --log {}: {err}; the run goes on, the log is \
                 incomplete",
                self.path.display()
            );
        }
    }
}

/// Starts the flight recorder for `-b` or `--forensics` (a disabled one
/// otherwise); says on stderr why it cannot run.
fn start_forensics(options: &MeasureOptions) -> Recorder {
    let threshold_ns = match [options.breaktrace_ns, options.forensics_ns]
        .into_iter()
        .flatten()
        .min()
    {
        Some(ns) => ns,
        None => return Recorder::disabled(),
    };
    let recorder = Recorder::start(
        Settings {
            threshold_ns,
            dir: None,
            max_captures: MEASURE_MAX_CAPTURES,
            max_bytes: u64::MAX,
            buffer_size_kb: MEASURE_BUFFER_KB,
            tracefs: PathBuf::from(DEFAULT_TRACEFS),
            per_cpu_gap_ns: MEASURE_PER_CPU_GAP_NS,
            max_per_minute: 60,
        },
        &options.cpus,
    );
    let journal = recorder.journal();
    let data = journal.lock();
    if !data.available {
        eprintln!(
            "latencyd measure: warning: no spike forensics: {}",
            data.reason.as_deref().unwrap_or("unknown reason")
        );
    }
    drop(data);
    recorder
}

/// Causes printed per capture, largest first.
const MEASURE_CAUSES_SHOWN: usize = 8;
/// Captures `measure` keeps (in memory; oldest dropped).
const MEASURE_MAX_CAPTURES: usize = 100;
/// At most one capture per CPU within this long in `measure`.
const MEASURE_PER_CPU_GAP_NS: u64 = 200 * NS_PER_MS;
/// Each CPU's ring buffer for `measure`, KiB.
const MEASURE_BUFFER_KB: u64 = 1024;

/// `-b`'s lines as cyclictest prints them, then each capture: its verdict
/// and causes, oldest first.
fn forensics_block(
    options: &MeasureOptions,
    recorder: &Recorder,
    break_hit: Option<(i32, u64)>,
) -> String {
    let mut out = String::new();
    if let Some((tid, latency_ns)) = break_hit {
        let value = if options.nsecs {
            latency_ns
        } else {
            latency_ns / 1_000
        };
        out.push_str(&format!("# Break thread: {tid}\n# Break value: {value}\n"));
    }
    let journal = recorder.journal();
    let data = journal.lock();
    if !data.available && data.in_memory.is_empty() {
        if let Some(reason) = &data.reason {
            out.push_str(&format!("# No spike forensics: {reason}\n"));
        }
        return out;
    }
    for capture in data.in_memory.iter().rev() {
        let s = &capture.summary;
        out.push_str(&format!("# Spike at {}: {}\n", s.at, s.verdict));
        for cause in s.causes.iter().take(MEASURE_CAUSES_SHOWN) {
            let who = match (cause.pid, &cause.policy, cause.priority) {
                (Some(pid), Some(policy), Some(prio)) => format!(" (pid {pid}, {policy} {prio})"),
                (Some(pid), None, Some(prio)) => format!(" (pid {pid}, priority {prio})"),
                (Some(pid), _, None) => format!(" (pid {pid})"),
                (None, ..) => String::new(),
            };
            out.push_str(&format!(
                "#   {:>9}  {:<11} {}{who}\n",
                human(cause.duration_ns),
                cause.kind,
                cause.name
            ));
        }
        if s.causes.len() > MEASURE_CAUSES_SHOWN {
            let rest = &s.causes[MEASURE_CAUSES_SHOWN..];
            let ns: u64 = rest.iter().map(|c| c.duration_ns).sum();
            out.push_str(&format!(
                "#   {:>9}  ({} more causes)\n",
                human(ns),
                rest.len()
            ));
        }
        if !s.complete {
            out.push_str(&format!("#   incomplete trace: {}\n", s.gaps.join("; ")));
        }
    }
    let skipped: u64 = data.uncaptured.values().sum();
    if skipped > 0 {
        out.push_str(&format!(
            "# {skipped} more spikes not captured (at most one per CPU in 200 ms, 60 a minute)\n"
        ));
    }
    out
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
