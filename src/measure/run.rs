//! Running a measurement as cyclictest runs one: tune the host for the
//! run (`tuning`), start the samplers through the engine, drain their
//! handoffs on the main thread every 10 ms (live lines on a terminal, `-v`
//! samples, the `-F` pipe), stop on SIGINT, SIGTERM or SIGALRM (rteval and
//! `timeout` stop cyclictest so) or at the end of the plan, print the
//! current status on stderr at SIGUSR1, and render the results as
//! cyclictest does.

use std::fs;
use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use super::background::Background;
use super::breaks::{TraceMark, finished_captures, forensics_block, start_forensics};
use super::live::{Fifo, Live, live_block, sample_log};
use super::log::MeasureLog;
use super::options::{Alignment, JsonTarget, MeasureOptions, PUBLISH_PERIOD_NS};
use super::report::{RunReport, ThreadReport};
use super::tuning::{IdleStates, before_the_run, check_resolution};
use super::{json, text};
use crate::forensics::{Spike, Trigger};
use crate::host::HostInfo;
use crate::rt::clock::Timing;
use crate::rt::engine::{DEFAULT_START_TIMEOUT, Engine, EngineSpec, ThreadSetup};
use crate::rt::sampler::LoopEndReason;
use crate::rt::sys::{self, ClockSource};
use crate::stats::{LatencyStats, LinearHistogram};
use crate::units::NS_PER_SEC;

/// The signals that end a run with its results printed: Ctrl-C, `kill`,
/// and SIGALRM (cyclictest ends `-D` with `alarm`, and scripts send it).
const STOP_SIGNALS: [i32; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGALRM,
];

pub fn run(options: &MeasureOptions, host: &HostInfo, cmdline: String) -> anyhow::Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in STOP_SIGNALS {
        // The first signal stops the run gracefully (samplers notice it at
        // their next wake-up); a second one, while the first is pending,
        // exits at once, for intervals too long to wait for.
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&stop)))
            .context("cannot install the SIGINT/SIGTERM/SIGALRM handlers")?;
    }
    // SIGUSR1 asks for the current status on stderr, as cyclictest's does;
    // its default action would end the run without results.
    let status_asked = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&status_asked))
        .context("cannot install the SIGUSR1 handler")?;
    Background::check(options)?;
    let text_to_stdout = options.json != Some(JsonTarget::Stdout);
    let mut stdout = io::stdout().lock();
    let cpus = options.cpus();

    let (pm_qos_hold, smi) = before_the_run(options, host, &cpus, &mut stdout)?;
    let idle_states = options
        .deepest_idle_state
        .map(|deepest| IdleStates::limit(Path::new("/sys/devices/system/cpu"), &cpus, deepest))
        .transpose()?;
    if let Some(states) = &idle_states {
        eprintln!(
            "latencyd measure: {} idle states deeper than {} disabled on CPUs {} until the end",
            states.count(),
            options.deepest_idle_state.unwrap_or_default(),
            crate::cpulist::format_cpu_list(&cpus)
        );
    }
    // The host's facts under the run's own conditions (its PM QoS request
    // and idle-state limits are in force from here): before the samplers,
    // so reading them costs the measurement nothing.
    let fingerprint = crate::host::FactReader::live(&cpus).read();
    let topology = crate::host::topology::read(Path::new("/"), &cpus);
    let mut tracemark =
        (options.tracemark && options.breaktrace_ns.is_some()).then(TraceMark::open);
    if options.resolution_check {
        check_resolution(options.clock, options.verbose.is_some());
    }

    let linear = options
        .histogram
        .map(|h| LinearHistogram::new(h.bins, options.unit_ns()));
    let shortest_interval_ns = options
        .threads
        .iter()
        .map(|t| t.interval_ns)
        .min()
        .unwrap_or(NS_PER_SEC);
    let template = LatencyStats::new(options.spike_threshold_ns, linear)
        .with_sample_log(sample_log(options, shortest_interval_ns));
    let grid = start_grid(options.alignment, options.clock);
    let spec = EngineSpec {
        threads: options
            .threads
            .iter()
            .enumerate()
            .map(|(idx, thread)| ThreadSetup {
                cpu: thread.cpu,
                priority: thread.priority,
                plan: options.loop_plan(thread.interval_ns),
                timing: Timing {
                    clock: options.clock,
                    sleep: options.sleep,
                    start_grid_ns: grid.map(|(base, step)| base + step * idx as u64),
                },
            })
            .collect(),
        policy: options.policy,
        allow_non_rt: options.allow_non_rt,
        template: template.clone(),
        start_timeout: DEFAULT_START_TIMEOUT,
        limits: host.rt_limits(),
        tolerate_offline: false,
    };
    // `--log`: created now, so a path that cannot be written stops the
    // run before it starts.
    let mut log = match &options.log {
        Some((path, interval_ns)) => Some(MeasureLog::create(
            path,
            *interval_ns,
            options,
            host,
            &fingerprint,
        )?),
        None => None,
    };
    let fifo = options
        .fifo
        .as_deref()
        .map(|path| {
            Fifo::start(path)
                .with_context(|| format!("-F: cannot create the named pipe {}", path.display()))
        })
        .transpose()?;
    // Recording before the samplers start: a spike in the first moments
    // finds its events there.
    let recorder = start_forensics(options);
    let smi_before = smi.as_ref().map(|s| s.read());
    let mut engine = Engine::start(spec, Arc::clone(&stop))?;
    for reason in &engine.non_rt_reasons {
        eprintln!(
            "latencyd measure: warning: not real-time: {reason}; results do not show real-time latency"
        );
    }
    // `--load` starts once the samplers run.
    let mut background = Background::start(options);
    if let (Some(log), Some(profile)) = (&mut log, background.running()) {
        log.set_load(Some(profile.to_string()));
    }
    if let Some(main_cpus) = &options.main_affinity
        && let Err(err) = sys::set_current_thread_affinity(main_cpus)
    {
        eprintln!("latencyd measure: warning: --mainaffinity: cannot move the main thread ({err})");
    }

    // `-b`: the sampler's TID and the latency that stopped the run.
    let mut break_hit: Option<(i32, u64)> = None;
    let capture_from = [options.breaktrace_ns, options.forensics_ns]
        .into_iter()
        .flatten()
        .min();

    let mut totals = vec![template; engine.slots.len()];
    let slot_cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
    let mut live = Live::new(options);
    let start_time = SystemTime::now();
    let live_lines =
        !options.quiet && options.verbose.is_none() && text_to_stdout && io::stdout().is_terminal();
    let mut next_refresh = Instant::now();
    let mut samples_out = Vec::new();
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
                    log.add(slot_cpus[idx], interval);
                }
                // Into memory: the closure cannot return an I/O error.
                let _ = live.on_interval(idx, interval, &mut samples_out);
                totals[idx].merge(interval)
            })
            .context("merging a sampler's interval")?;
        stdout.write_all(&samples_out)?;
        samples_out.clear();
        if let Some(log) = &mut log {
            log.write_due(false);
        }
        for notice in recorder.take_notices() {
            eprintln!("latencyd measure: forensics: {notice}");
        }
        for (idx, latency_ns, wakeup_ns) in spikes {
            let slot = &engine.slots[idx];
            let tid = slot.shared().tid();
            let breaks = options.breaktrace_ns.is_some_and(|b| latency_ns >= b);
            if breaks && break_hit.is_none() {
                break_hit = Some((tid, latency_ns));
                stop.store(true, Ordering::Relaxed);
                if let (Some(mark), Some(limit_ns)) = (&mut tracemark, options.breaktrace_ns) {
                    mark.hit(latency_ns / options.unit_ns(), limit_ns / options.unit_ns());
                }
            }
            if breaks || options.forensics_ns.is_some_and(|f| latency_ns >= f) {
                recorder.notice(Spike {
                    cpu: slot.cpu,
                    sampler_tid: tid,
                    latency_ns,
                    wakeup_ns,
                    trigger: Trigger::Threshold,
                });
            }
        }
        let summary_lines = || -> Vec<String> {
            engine
                .slots
                .iter()
                .zip(&totals)
                .enumerate()
                .map(|(i, (slot, total))| {
                    text::format_summary_line(
                        i,
                        slot.shared().tid(),
                        slot.priority,
                        options.threads[i].interval_ns,
                        total,
                        options.nsecs,
                    )
                })
                .collect()
        };
        background.say_events();
        if status_asked.swap(false, Ordering::Relaxed) {
            let rule = "#---------------------------";
            let lines = summary_lines().join("\n");
            eprintln!("{rule}\n# cyclictest current status:\n{lines}\n{rule}");
        }
        if Instant::now() >= next_refresh {
            let lines = summary_lines();
            if let Some(fifo) = &fifo {
                fifo.publish(lines.iter().map(|l| format!("{l}\n")).collect());
            }
            if live_lines && live.refresh_due(&totals) {
                write!(
                    stdout,
                    "{}",
                    live_block(options.policy, lines.into_iter(), true)
                )?;
                stdout.flush()?;
            }
            next_refresh += Duration::from_nanos(PUBLISH_PERIOD_NS);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let non_rt_reasons = std::mem::take(&mut engine.non_rt_reasons);
    // Samplers stop at their next wake-up: one interval, plus slack.
    let longest_interval_ns = options
        .threads
        .iter()
        .map(|t| t.interval_ns)
        .max()
        .unwrap_or(0);
    let timeout = Duration::from_nanos(longest_interval_ns) + Duration::from_secs(2);
    let outcome = engine.finish(timeout, |idx, interval| {
        if let Some(log) = &mut log {
            log.add(slot_cpus[idx], interval);
        }
        let _ = live.on_interval(idx, interval, &mut samples_out);
        totals[idx].merge(interval)
    })?;
    stdout.write_all(&samples_out)?;
    if let Some(log) = &mut log {
        log.write_due(true);
    }
    let smi_after = smi.as_ref().map(|s| s.read());
    let load_report = background.stop();
    drop(fifo);
    drop(idle_states);
    let finished = outcome.finished;

    let mut sampler_errors: Vec<String> = finished
        .iter()
        .filter_map(|f| match f.end.map(|end| end.reason) {
            Some(LoopEndReason::SleepFailed(errno)) => Some(format!(
                "the sampler on CPU {} stopped: its sleep failed ({})",
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
    let smi_of = |cpu: usize| -> Option<u64> {
        let count = |readings: &Option<Vec<(usize, Option<u64>)>>| {
            readings
                .as_ref()?
                .iter()
                .find(|(c, _)| *c == cpu)
                .and_then(|(_, n)| *n)
        };
        Some(count(&smi_after)?.wrapping_sub(count(&smi_before)?) & 0xffff_ffff)
    };
    // Each thread's NUMA node, -1 where sysfs does not say (as cyclictest).
    let nodes: Vec<(usize, i32)> = (topology.iter())
        .map(|t| (t.cpu, t.node.map_or(-1, |n| n as i32)))
        .collect();
    let captures = capture_from.map_or_else(Vec::new, |_| finished_captures(&recorder));
    let report = RunReport {
        cmdline,
        start_time,
        end_time: SystemTime::now(),
        return_code: i32::from(!sampler_errors.is_empty() || !background.problems().is_empty()),
        host: host.clone(),
        fingerprint,
        topology,
        pm_qos_us: pm_qos_hold.as_ref().map(|hold| hold.latency_us),
        policy: options.policy,
        nsecs: options.nsecs,
        histofall: options.histogram.is_some_and(|h| h.all_column),
        threads: finished
            .iter()
            .map(|f| ThreadReport {
                cpu: f.cpu,
                numa_node: nodes.iter().find(|(c, _)| *c == f.cpu).map_or(-1, |n| n.1),
                tid: f.shared.tid(),
                priority: f.spec.priority,
                interval_ns: f.spec.plan.interval_ns,
                realtime: f.realtime,
                stats: totals[f.idx].clone(),
                smi_count: smi_of(f.cpu),
            })
            .collect(),
        notes: options.notes.iter().map(ToString::to_string).collect(),
        load: load_report,
        captures,
    };
    drop(pm_qos_hold);

    if live.dropped() > 0 {
        eprintln!(
            "latencyd measure: warning: {} samples were not printed (-v): the output could not \
             keep up",
            live.dropped()
        );
    }
    if text_to_stdout {
        if !report.realtime() {
            writeln!(
                stdout,
                "# latencyd: NOT REAL-TIME ({}): these latencies are not representative",
                non_rt_reasons.join("; ")
            )?;
        }
        // cyclictest's closing lines: with -q the summary (unless a
        // histogram replaces it), else the live screen's last state; with
        // -v only the samples, and the summary with -q.
        if options.quiet {
            if options.histogram.is_none() {
                write!(stdout, "{}", text::summary_lines(&report))?;
            }
        } else if options.verbose.is_none() {
            let lines = (0..report.threads.len()).map(|i| text::summary_line(&report, i));
            write!(stdout, "{}", live_block(options.policy, lines, false))?;
        }
        write!(stdout, "{}", live.spike_block())?;
        let histogram = text::histogram_block(&report);
        match &options.histfile {
            Some(path) => fs::write(path, histogram)
                .with_context(|| format!("--histfile: cannot write {}", path.display()))?,
            None => write!(stdout, "{histogram}")?,
        }
    }
    if let Some(load) = &report.load {
        after_results(&mut stdout, text_to_stdout, &load.text_block())?;
    }
    if capture_from.is_some() {
        recorder.flush();
        let tids: Vec<i32> = report.threads.iter().map(|t| t.tid).collect();
        let forensics = forensics_block(options, &recorder, &tids, break_hit);
        after_results(&mut stdout, text_to_stdout, &forensics)?;
    }
    match &options.json {
        Some(JsonTarget::Stdout) => write!(stdout, "{}", json::json_document(&report))?,
        Some(JsonTarget::File(path)) => fs::write(path, json::json_document(&report))
            .with_context(|| format!("cannot write the JSON results to {}", path.display()))?,
        None => {}
    }
    if let Some(path) = &options.plot {
        let shared_cpu = report.threads.len() != options.cpus().len();
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
                .enumerate()
                .map(|(i, t)| {
                    let label = if shared_cpu {
                        format!("T{i} CPU {}", t.cpu)
                    } else {
                        format!("CPU {}", t.cpu)
                    };
                    crate::plot::series_from_stats(label, &t.stats)
                })
                .collect(),
        };
        crate::plot::write(&data, path)
            .with_context(|| format!("cannot draw the plot {}", path.display()))?;
    }
    stdout.flush()?;
    sampler_errors.extend(background.failure());
    if !sampler_errors.is_empty() {
        bail!("{}", sampler_errors.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

/// `#` lines after the results: on stdout with the text, on stderr when
/// stdout carries the JSON alone.
fn after_results(stdout: &mut impl Write, text_to_stdout: bool, block: &str) -> io::Result<()> {
    if text_to_stdout {
        stdout.write_all(block.as_bytes())
    } else {
        io::stderr().write_all(block.as_bytes())
    }
}

/// The time grid aligned threads share, on `clock`, and how much later
/// each thread starts than the one before: `-A` aligns them to one time
/// (now), `--secaligned` to the next full second at least 100 ms away,
/// each plus the offset as cyclictest adds it.
fn start_grid(alignment: Alignment, clock: ClockSource) -> Option<(u64, u64)> {
    let now = sys::clock_now_ns(clock);
    match alignment {
        Alignment::None => None,
        Alignment::Aligned { offset_ns } => Some((now, offset_ns)),
        Alignment::SecondAligned { offset_ns } => {
            let next_second = (now / NS_PER_SEC + 1) * NS_PER_SEC;
            let base = if next_second - now < NS_PER_SEC / 10 {
                next_second + NS_PER_SEC
            } else {
                next_second
            };
            Some((base + offset_ns, 0))
        }
    }
}
