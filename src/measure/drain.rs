//! The main thread while `measure`'s samplers run: every 10 ms their
//! published intervals are merged into each thread's totals and passed on
//! to the live screen, `-v`'s sample lines, `--log`, the `-F` pipe, `-b`
//! (which stops the run) and `--forensics`; SIGUSR1's status goes to
//! stderr. At the end the samplers are joined and their last intervals
//! taken.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::background::Background;
use super::live::{Fifo, Live, live_block};
use super::log::MeasureLog;
use super::options::{JsonTarget, MeasureOptions, PUBLISH_PERIOD_NS};
use super::setup::Setup;
use super::text;
use crate::forensics::{Recorder, Spike, Trigger};
use crate::rt::engine::{Engine, FinishReport};
use crate::stats::{LatencyStats, ShapeMismatch};

/// What the sampling loop reads and tells besides the samplers.
pub(super) struct Around<'a> {
    pub setup: &'a mut Setup,
    pub recorder: &'a Recorder,
    /// Raised to stop the run (`-b`).
    pub stop: &'a AtomicBool,
    /// Raised by SIGUSR1.
    pub status_asked: &'a AtomicBool,
    pub background: &'a Background,
}

/// The main thread while the samplers run: their intervals merged into
/// each thread's totals and passed on to the live lines, `-v`, `--log`,
/// `-F`, `-b` and `--forensics`.
pub(super) struct Sampling<'o> {
    options: &'o MeasureOptions,
    pub totals: Vec<LatencyStats>,
    slot_cpus: Vec<usize>,
    pub live: Live,
    /// The screen refreshed in place (a terminal, no `-q`, `-v` or JSON).
    live_lines: bool,
    next_refresh: Instant,
    samples_out: Vec<u8>,
    /// The lateness `-b` or `--forensics` acts on, the smaller.
    pub capture_from: Option<u64>,
    /// `-b`: the sampler's TID and the latency that stopped the run.
    pub break_hit: Option<(i32, u64)>,
}

impl<'o> Sampling<'o> {
    pub(super) fn new(
        options: &'o MeasureOptions,
        engine: &Engine,
        template: LatencyStats,
    ) -> Sampling<'o> {
        let text_to_stdout = options.json != Some(JsonTarget::Stdout);
        Sampling {
            options,
            totals: vec![template; engine.slots.len()],
            slot_cpus: engine.slots.iter().map(|slot| slot.cpu).collect(),
            live: Live::new(options),
            live_lines: !options.quiet
                && options.verbose.is_none()
                && text_to_stdout
                && io::stdout().is_terminal(),
            next_refresh: Instant::now(),
            samples_out: Vec::new(),
            capture_from: [options.breaktrace_ns, options.forensics_ns]
                .into_iter()
                .flatten()
                .min(),
            break_hit: None,
        }
    }

    /// Drains every 10 ms until each sampler has returned (they see a
    /// raised stop flag after their next wake-up).
    pub(super) fn until_finished(
        &mut self,
        engine: &mut Engine,
        around: &mut Around,
        stdout: &mut impl Write,
    ) -> anyhow::Result<()> {
        while !engine.all_finished() {
            let spikes = self.drain(engine, &mut around.setup.log)?;
            stdout.write_all(&self.samples_out)?;
            self.samples_out.clear();
            if let Some(log) = &mut around.setup.log {
                log.write_due(false);
            }
            for notice in around.recorder.take_notices() {
                eprintln!("latencyd measure: forensics: {notice}");
            }
            self.on_spikes(engine, spikes, around);
            around.background.say_events();
            if around.status_asked.swap(false, Ordering::Relaxed) {
                let rule = "#---------------------------";
                let lines = self.summary_lines(engine).join("\n");
                eprintln!("{rule}\n# cyclictest current status:\n{lines}\n{rule}");
            }
            if Instant::now() >= self.next_refresh {
                self.refresh(engine, around.setup.fifo.as_ref(), stdout)?;
                self.next_refresh += Duration::from_nanos(PUBLISH_PERIOD_NS);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Merges the published intervals; the late wake-ups `-b` or
    /// `--forensics` act on, as (slot, latency, wake-up time).
    fn drain(
        &mut self,
        engine: &mut Engine,
        log: &mut Option<MeasureLog>,
    ) -> anyhow::Result<Vec<(usize, u64, u64)>> {
        let mut spikes = Vec::new();
        let capture_from = self.capture_from;
        engine
            .drain(|idx, interval| {
                if let (Some(from), Some(at)) = (capture_from, interval.max_at_ns())
                    && interval.count > 0
                    && interval.max_ns >= from
                {
                    spikes.push((idx, interval.max_ns, at));
                }
                self.take(idx, interval, log)
            })
            .context("merging a sampler's interval")?;
        Ok(spikes)
    }

    /// One interval of slot `idx` into the log, the live output and the
    /// totals.
    fn take(
        &mut self,
        idx: usize,
        interval: &LatencyStats,
        log: &mut Option<MeasureLog>,
    ) -> Result<(), ShapeMismatch> {
        if let Some(log) = log {
            log.add(self.slot_cpus[idx], interval);
        }
        // Into memory: the closure cannot return an I/O error.
        let _ = self.live.on_interval(idx, interval, &mut self.samples_out);
        self.totals[idx].merge(interval)
    }

    /// `-b` stops the run at its first hit (and marks the trace);
    /// `-b` and `--forensics` hand each spike to the recorder.
    fn on_spikes(&mut self, engine: &Engine, spikes: Vec<(usize, u64, u64)>, around: &mut Around) {
        let options = self.options;
        for (idx, latency_ns, wakeup_ns) in spikes {
            let slot = &engine.slots[idx];
            let tid = slot.shared().tid();
            let breaks = options.breaktrace_ns.is_some_and(|b| latency_ns >= b);
            if breaks && self.break_hit.is_none() {
                self.break_hit = Some((tid, latency_ns));
                around.stop.store(true, Ordering::Relaxed);
                if let (Some(mark), Some(limit_ns)) =
                    (&mut around.setup.tracemark, options.breaktrace_ns)
                {
                    mark.hit(&format!(
                        "hit latency threshold ({} > {})",
                        latency_ns / options.unit_ns(),
                        limit_ns / options.unit_ns()
                    ));
                }
            }
            if breaks || options.forensics_ns.is_some_and(|f| latency_ns >= f) {
                around.recorder.notice(Spike {
                    cpu: slot.cpu,
                    sampler_tid: tid,
                    latency_ns,
                    wakeup_ns,
                    trigger: Trigger::Threshold,
                });
            }
        }
    }

    /// cyclictest's `T:` line of each thread so far.
    fn summary_lines(&self, engine: &Engine) -> Vec<String> {
        (engine.slots.iter().zip(&self.totals).enumerate())
            .map(|(i, (slot, total))| {
                text::format_summary_line(
                    i,
                    slot.shared().tid(),
                    slot.priority,
                    self.options.threads[i].interval_ns,
                    total,
                    self.options.nsecs,
                )
            })
            .collect()
    }

    /// Once a publishing period: the `-F` pipe and the live screen.
    fn refresh(
        &mut self,
        engine: &Engine,
        fifo: Option<&Fifo>,
        stdout: &mut impl Write,
    ) -> io::Result<()> {
        let lines = self.summary_lines(engine);
        if let Some(fifo) = fifo {
            fifo.publish(lines.iter().map(|l| format!("{l}\n")).collect());
        }
        if self.live_lines && self.live.refresh_due(&self.totals) {
            let block = live_block(self.options.policy, lines.into_iter(), true);
            write!(stdout, "{block}")?;
            stdout.flush()?;
        }
        Ok(())
    }

    /// Joins the samplers (each stops at its next wake-up: one interval,
    /// plus slack) and takes their last intervals.
    pub(super) fn finish(
        &mut self,
        engine: Engine,
        setup: &mut Setup,
        stdout: &mut impl Write,
    ) -> anyhow::Result<FinishReport> {
        let longest_interval_ns = (self.options.threads.iter())
            .map(|t| t.interval_ns)
            .max()
            .unwrap_or(0);
        let timeout = Duration::from_nanos(longest_interval_ns) + Duration::from_secs(2);
        let outcome = engine.finish(timeout, |idx, interval| {
            self.take(idx, interval, &mut setup.log)
        })?;
        stdout.write_all(&self.samples_out)?;
        if let Some(log) = &mut setup.log {
            log.write_due(true);
        }
        Ok(outcome)
    }
}
