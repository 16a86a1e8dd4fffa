//! Running a measurement: hold `/dev/cpu_dma_latency` if asked, start one
//! sampler per CPU through the engine, drain their handoffs on the main
//! thread every 10 ms (live lines on a terminal), stop on Ctrl-C/SIGTERM or
//! at the end of the plan, and render the results as cyclictest does.

use std::fs;
use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use super::options::{JsonTarget, MeasureOptions, PUBLISH_PERIOD_NS, PmQos};
use super::report::{RunReport, ThreadReport};
use super::{json, text};
use crate::host::HostInfo;
use crate::rt::engine::{DEFAULT_START_TIMEOUT, Engine, EngineSpec};
use crate::rt::sampler::LoopEndReason;
use crate::rt::sys::{self, CpuDmaLatencyHold, Policy};
use crate::stats::{LatencyStats, LinearHistogram};

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
    let mut engine = Engine::start(spec, Arc::clone(&stop))?;
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
                write!(stdout, "{}", text::summary_lines(&report))?;
            } else {
                let lines = (0..report.threads.len()).map(|i| text::summary_line(&report, i));
                write!(stdout, "{}", live_block(options.policy, lines, false))?;
            }
        }
        write!(stdout, "{}", text::histogram_block(&report))?;
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
