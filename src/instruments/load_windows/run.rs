//! The scheduled load windows (`[load]`), stepped by the collector's
//! tick: a window's load starts and stops on the blocking pool (starting
//! processes and waiting for stress-ng's metrics are not the runtime
//! thread's work); the tick only looks at finished jobs, publishes the
//! window and the generators' throughput into the state, logs and counts
//! every failure, and tells the record when the load state changes. The
//! samplers never hear of any of it.

use std::collections::BTreeMap;
use std::time::SystemTime;

use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::LoadPart;
use crate::config::Config;
use crate::cpulist::format_cpu_list;
use crate::host::HostInfo;
use crate::instruments::shape::{Boxed, Run, Step};
use crate::load::{LoadReport, LoadSpec, Profile, RunningLoad, Schedule, Window};

enum Phase {
    Idle,
    Starting(Window, JoinHandle<std::io::Result<RunningLoad>>),
    Running(Window, RunningLoad),
    /// The window's load could not start: nothing runs until it ends.
    Skipped(Window),
    Stopping(JoinHandle<LoadReport>),
}

pub(super) struct LoadWindows {
    profile: Profile,
    cpus: Vec<usize>,
    schedule: Schedule,
    phase: Phase,
    /// Failures per generator in the windows that ended.
    past_failures: BTreeMap<String, u64>,
}

impl LoadWindows {
    /// None unless `[load]` names a profile (checked against the host at
    /// start: its CPUs resolve and its programs are installed).
    pub(super) fn new(config: &Config, host: &HostInfo) -> Option<LoadWindows> {
        let profile = config.section::<super::LoadConfig>().profile?;
        let cpus = config
            .section::<super::LoadConfig>()
            .cpus
            .resolve(host)
            .ok()?;
        Some(LoadWindows {
            profile,
            cpus,
            schedule: config.section::<super::LoadConfig>().schedule,
            phase: Phase::Idle,
            past_failures: BTreeMap::new(),
        })
    }

    /// One step at `now`. Returns the new load state for the record when
    /// it changed: `Some(Some(profile))` as a window's load runs,
    /// `Some(None)` as it stops.
    async fn tick(&mut self, now: SystemTime, state: &Step<'_>) -> Option<Option<String>> {
        let mut change = None;
        self.phase = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => match self.schedule.window_at(now) {
                Some(window) => {
                    let spec = LoadSpec::new(self.profile, self.cpus.clone());
                    let job = tokio::task::spawn_blocking(move || RunningLoad::start(spec));
                    Phase::Starting(window, job)
                }
                None => Phase::Idle,
            },
            Phase::Starting(window, job) if job.is_finished() => {
                let started = job
                    .await
                    .unwrap_or_else(|err| Err(std::io::Error::other(err.to_string())));
                match started {
                    Ok(load) => {
                        info!(
                            "load window: {} on CPUs {} until {} (process group {})",
                            self.profile,
                            format_cpu_list(&self.cpus),
                            crate::calendar::format_rfc3339_ms(unix_ns(window.end)),
                            load.group()
                        );
                        let report = load.snapshot();
                        state.update(|l: &mut LoadPart| {
                            l.active = Some(window);
                            l.windows_total += 1;
                            l.report = Some(report);
                        });
                        change = Some(Some(self.profile.name().to_string()));
                        Phase::Running(window, load)
                    }
                    Err(err) => {
                        warn!(
                            "load window: the load {} could not start ({err}); the window is \
                             skipped, sampling goes on",
                            self.profile
                        );
                        state.update(|l: &mut LoadPart| {
                            *l.failures.entry("load".to_string()).or_default() += 1;
                        });
                        *self.past_failures.entry("load".to_string()).or_default() += 1;
                        Phase::Skipped(window)
                    }
                }
            }
            Phase::Running(window, load) => {
                for event in load.take_events() {
                    warn!("load window: {event}");
                }
                let report = load.snapshot();
                let failures = self.failures_with(&report);
                state.update(|l: &mut LoadPart| {
                    l.report = Some(report);
                    l.failures = failures;
                });
                // The window stays loaded until the generators are gone
                // (stress-ng takes a moment to stop and write its metrics).
                if now >= window.end {
                    Phase::Stopping(tokio::task::spawn_blocking(move || load.stop()))
                } else {
                    Phase::Running(window, load)
                }
            }
            Phase::Skipped(window) if now >= window.end => Phase::Idle,
            Phase::Stopping(job) if job.is_finished() => {
                state.update(|l: &mut LoadPart| l.active = None);
                change = Some(None);
                if let Ok(report) = job.await {
                    self.window_ended(report, state);
                }
                Phase::Idle
            }
            other => other,
        };
        let next = self.schedule.next_window(now);
        state.update(|l: &mut LoadPart| l.next = Some(next));
        change
    }

    /// At shutdown: stops a running load (waiting for it, off the runtime
    /// thread) so that nothing of it outlives the daemon.
    async fn stop(&mut self, state: &Step<'_>) {
        let load = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Running(_, load) => Some(load),
            // A start under way finishes (moments), and is stopped at once.
            Phase::Starting(_, job) => job.await.ok().and_then(Result::ok),
            Phase::Stopping(job) => {
                if let Ok(report) = job.await {
                    self.window_ended(report, state);
                }
                None
            }
            Phase::Idle | Phase::Skipped(_) => None,
        };
        if let Some(load) = load
            && let Ok(report) = tokio::task::spawn_blocking(move || load.stop()).await
        {
            state.update(|l: &mut LoadPart| l.active = None);
            self.window_ended(report, state);
        }
    }

    fn window_ended(&mut self, report: LoadReport, state: &Step<'_>) {
        info!(
            "load window ended: {} for {:.0} s; {}",
            report.profile,
            report.seconds(),
            report
                .rates_line()
                .unwrap_or_else(|| "no throughput reported".to_string())
        );
        for problem in report.problems() {
            warn!("load window: {problem}");
        }
        for g in &report.generators {
            *self.past_failures.entry(g.name.clone()).or_default() += g.failures;
        }
        let failures = self.past_failures.clone();
        state.update(|l: &mut LoadPart| {
            l.failures = failures;
            l.report = Some(report);
        });
    }

    /// Past windows' failures plus the running one's.
    fn failures_with(&self, current: &LoadReport) -> BTreeMap<String, u64> {
        let mut all = self.past_failures.clone();
        for g in &current.generators {
            *all.entry(g.name.clone()).or_default() += g.failures;
        }
        all
    }
}

impl Run for LoadWindows {
    /// A load window starting or ending cuts the record's interval, so
    /// that each is filed under one load state.
    fn step<'a>(&'a mut self, mut step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async move {
            let now = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(step.unix_ns);
            if let Some(load) = self.tick(now, &step).await
                && let Some((accumulator, keeper)) = step.record.as_deref_mut()
            {
                for batch in accumulator.set_load(load, step.unix_ns) {
                    keeper.submit(batch);
                }
            }
        })
    }

    /// Stops a running load, waiting for it off the runtime's thread, so
    /// that nothing of it outlives the daemon.
    fn stop<'a>(&'a mut self, step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async move { LoadWindows::stop(self, &step).await })
    }
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
