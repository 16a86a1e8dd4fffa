//! A measurement as cyclictest runs one, phase by phase: the stop and
//! status signals (SIGINT, SIGTERM or SIGALRM end the run with its
//! results, as rteval and `timeout` stop cyclictest; SIGUSR1 prints the
//! status), the host set up (`setup`), the samplers started through the
//! engine, their intervals drained until the plan ends or a signal comes
//! (`drain`), the report built and printed as cyclictest does (`output`),
//! and `--plot` drawn.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

use anyhow::{Context, bail};

use super::background::Background;
use super::breaks::{finished_captures, start_forensics};
use super::drain::{Around, Sampling};
use super::options::MeasureOptions;
use super::output::Results;
use super::report::{RunReport, ThreadReport};
use super::setup::Setup;
use super::timerlat::TimerlatRun;
use crate::host::HostInfo;
use crate::load::LoadReport;
use crate::rt::engine::{Engine, FinishReport};
use crate::rt::sampler::LoopEndReason;
use crate::rt::sys;
use crate::stats::LatencyStats;

pub fn run(options: &MeasureOptions, host: &HostInfo, cmdline: String) -> anyhow::Result<ExitCode> {
    let signals = Signals::install()?;
    if let Some(knobs) = options.hwlat {
        // No sampler: the tracer spins the CPUs with interrupts off.
        return super::hwlat::run(options, knobs, &signals.stop, &mut io::stdout().lock());
    }
    Background::check(options)?;
    let timerlat = TimerlatRun::start(options).map_err(anyhow::Error::msg)?;
    let mut stdout = io::stdout().lock();
    let mut setup = Setup::before_the_samplers(options, host, &mut stdout)?;
    // Recording before the samplers start: a spike in the first moments
    // finds its events there.
    let recorder = start_forensics(options);
    let smi_before = setup.smi.as_ref().map(|s| s.read());
    let mut engine = Engine::start(setup.engine_spec(options, host), Arc::clone(&signals.stop))?;
    for reason in &engine.non_rt_reasons {
        eprintln!(
            "latencyd measure: warning: not real-time: {reason}; results do not show real-time latency"
        );
    }
    // `--load` starts once the samplers run.
    let mut background = Background::start(options);
    if let (Some(log), Some(profile)) = (&mut setup.log, background.running()) {
        log.set_load(Some(profile.to_string()));
    }
    if let Some(main_cpus) = &options.main_affinity
        && let Err(err) = sys::set_current_thread_affinity(main_cpus)
    {
        eprintln!("latencyd measure: warning: --mainaffinity: cannot move the main thread ({err})");
    }
    let start_time = SystemTime::now();
    let mut sampling = Sampling::new(options, &engine, setup.template.clone());
    let mut around = Around {
        setup: &mut setup,
        recorder: &recorder,
        stop: &signals.stop,
        status_asked: &signals.status_asked,
        background: &background,
    };
    sampling.until_finished(&mut engine, &mut around, &mut stdout)?;
    let non_rt_reasons = std::mem::take(&mut engine.non_rt_reasons);
    let outcome = sampling.finish(engine, &mut setup, &mut stdout)?;
    let ended = Ended {
        timerlat: timerlat.and_then(TimerlatRun::finish),
        smi_counts: smi_counts(smi_before, setup.smi.as_ref().map(|s| s.read())),
        load: background.stop(),
        captures: sampling
            .capture_from
            .map_or_else(Vec::new, |_| finished_captures(&recorder)),
        start_time,
        cmdline,
    };
    drop(setup.fifo.take());
    drop(setup.idle_states.take());
    let mut errors = sampler_errors(&outcome);
    let failed = !errors.is_empty() || !background.problems().is_empty();
    let report = run_report(
        options,
        host,
        &mut setup,
        &outcome,
        &sampling.totals,
        ended,
        failed,
    );
    drop(setup.pm_qos_hold.take());
    let results = Results {
        options,
        report: &report,
        live: &sampling.live,
        non_rt_reasons: &non_rt_reasons,
        recorder: &recorder,
        break_hit: sampling.break_hit,
    };
    results.print(&mut stdout)?;
    if let Some(path) = &options.plot {
        draw_plot(options, host, &report, path)?;
    }
    stdout.flush()?;
    errors.extend(background.failure());
    if !errors.is_empty() {
        bail!("{}", errors.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

/// The flags the signal handlers raise.
struct Signals {
    stop: Arc<AtomicBool>,
    status_asked: Arc<AtomicBool>,
}

impl Signals {
    fn install() -> anyhow::Result<Signals> {
        // The first stops the run gracefully (samplers notice it at their
        // next wake-up); a second exits at once (`crate::signals`).
        let stop = crate::signals::stop_flag()
            .context("cannot install the SIGINT/SIGTERM/SIGALRM handlers")?;
        // SIGUSR1 asks for the current status on stderr, as cyclictest's
        // does; its default action would end the run without results.
        let status_asked = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&status_asked))
            .context("cannot install the SIGUSR1 handler")?;
        Ok(Signals { stop, status_asked })
    }
}

/// What is known once the samplers have returned.
struct Ended {
    smi_counts: Vec<(usize, u64)>,
    load: Option<LoadReport>,
    captures: Vec<crate::forensics::Capture>,
    timerlat: Option<crate::instruments::timerlat::tally::TimerlatReport>,
    start_time: SystemTime,
    cmdline: String,
}

/// Each sampler that ended otherwise than asked, said.
fn sampler_errors(outcome: &FinishReport) -> Vec<String> {
    let mut errors: Vec<String> = (outcome.finished.iter())
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
    errors.extend(outcome.stuck.iter().map(|cpu| {
        format!("the sampler on CPU {cpu} did not stop; it is left out of the results")
    }));
    errors
}

/// Each CPU's SMI counter reading.
type SmiReadings = Vec<(usize, Option<u64>)>;

/// The SMIs counted on each CPU during the run (the counter is 32 bits
/// wide and may wrap once).
fn smi_counts(before: Option<SmiReadings>, after: Option<SmiReadings>) -> Vec<(usize, u64)> {
    let (Some(before), Some(after)) = (before, after) else {
        return Vec::new();
    };
    (after.iter())
        .filter_map(|&(cpu, end)| {
            let start = before.iter().find(|(c, _)| *c == cpu)?.1?;
            Some((cpu, end?.wrapping_sub(start) & 0xffff_ffff))
        })
        .collect()
}

/// The finished run as plain data.
fn run_report(
    options: &MeasureOptions,
    host: &HostInfo,
    setup: &mut Setup,
    outcome: &FinishReport,
    totals: &[LatencyStats],
    ended: Ended,
    failed: bool,
) -> RunReport {
    // Each thread's NUMA node, -1 where sysfs does not say (as cyclictest).
    let node_of = |cpu: usize| {
        (setup.topology.iter())
            .find(|t| t.cpu == cpu)
            .and_then(|t| t.node)
            .map_or(-1, |n| n as i32)
    };
    let threads = (outcome.finished.iter())
        .map(|f| ThreadReport {
            cpu: f.cpu,
            numa_node: node_of(f.cpu),
            tid: f.shared.tid(),
            priority: f.spec.priority,
            interval_ns: f.spec.plan.interval_ns,
            realtime: f.realtime,
            stats: totals[f.idx].clone(),
            smi_count: ended
                .smi_counts
                .iter()
                .find(|(c, _)| *c == f.cpu)
                .map(|s| s.1),
        })
        .collect();
    RunReport {
        cmdline: ended.cmdline,
        start_time: ended.start_time,
        end_time: SystemTime::now(),
        return_code: i32::from(failed),
        host: host.clone(),
        fingerprint: setup.fingerprint.clone(),
        topology: std::mem::take(&mut setup.topology),
        pm_qos_us: setup.pm_qos_hold.as_ref().map(|hold| hold.latency_us),
        policy: options.policy,
        nsecs: options.nsecs,
        histofall: options.histogram.is_some_and(|h| h.all_column),
        threads,
        notes: options.notes.iter().map(ToString::to_string).collect(),
        load: ended.load,
        captures: ended.captures,
        timerlat: ended.timerlat,
    }
}

/// `--plot`: the run's histograms as an OSADL-style plot.
fn draw_plot(
    options: &MeasureOptions,
    host: &HostInfo,
    report: &RunReport,
    path: &Path,
) -> anyhow::Result<()> {
    let shared_cpu = report.threads.len() != options.cpus().len();
    let data = crate::plot::PlotData {
        title: "Wake-up latency (latencyd)".to_string(),
        subtitle: crate::plot::subtitle(
            Some(&host.uname.nodename),
            Some(&host.uname.release),
            host.preempt_rt,
        ),
        series: (report.threads.iter().enumerate())
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
        .with_context(|| format!("cannot draw the plot {}", path.display()))
}
