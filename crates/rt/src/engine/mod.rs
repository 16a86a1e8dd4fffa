//! The set of running samplers, shared by both front ends (`measure` and
//! the daemon): it locks memory, starts one sampler per CPU, waits until
//! each has reported itself running or failed, hands every published
//! interval to the caller, and joins the samplers at the end without losing
//! their last interval.
//!
//! Start-up failures are explained once (`start`), with what failed and how
//! to fix it, so both front ends say the same thing.
//!
//! Restarting a sampler whose CPU came back online (`restart`) never
//! blocks the caller: `restart_jobs` hands out the slow part (allocating the handoff,
//! starting the thread) to run on another thread, `adopt` takes its result,
//! and `poll_restarts` looks at the new sampler without waiting. A sampler
//! that does not report running within `EngineSpec::start_timeout` is
//! cancelled (`SamplerShared::cancel`) and joined before its CPU gets
//! another, so a CPU never has two samplers.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

mod restart;
mod start;

use super::clock::Timing;
use super::handoff::{self, Collector};
use super::sampler::{LoopEnd, LoopPlan};
use super::sys::Policy;
use super::thread::{self, SamplerHandle, SamplerShared, SamplerSpec, SamplerState};
use crate::stats::{LatencyStats, ShapeMismatch};

pub use restart::{Candidate, RestartJob, RestartOutcome};
pub use start::{DEFAULT_START_TIMEOUT, RtLimits, StartError};
use start::{lock_memory, wait_for_start};

/// What to run: a sampler per entry of `threads` (the daemon's one per
/// CPU, all alike; `measure`'s as cyclictest lays them out), all under one
/// policy.
#[derive(Debug, Clone)]
pub struct EngineSpec {
    pub threads: Vec<ThreadSetup>,
    pub policy: Policy,
    /// Run degraded (not real-time) instead of failing when the policy or
    /// memory locking is refused.
    pub allow_non_rt: bool,
    /// Every sampler's statistics start as copies of this.
    pub template: LatencyStats,
    /// How long a sampler may take to report running before it is given
    /// up on (`DEFAULT_START_TIMEOUT` unless a test needs it short).
    pub start_timeout: Duration,
    /// What the process may do (memory locking, RT priority).
    pub limits: RtLimits,
    /// A CPU that is offline at start, or goes offline while its sampler
    /// starts, leaves its slot waiting for a restart instead of failing
    /// the start (the daemon's choice; `measure` fails as cyclictest does).
    pub tolerate_offline: bool,
}

/// One sampler of an engine: where it runs and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSetup {
    pub cpu: usize,
    pub priority: i32,
    pub plan: LoopPlan,
    pub timing: Timing,
}

impl ThreadSetup {
    /// One sampler per CPU of `cpus`, all alike, on `CLOCK_MONOTONIC` with
    /// absolute sleeps (the daemon's layout).
    pub fn one_per_cpu(cpus: &[usize], priority: i32, plan: LoopPlan) -> Vec<ThreadSetup> {
        cpus.iter()
            .map(|&cpu| ThreadSetup {
                cpu,
                priority,
                plan,
                timing: Timing::default(),
            })
            .collect()
    }
}

/// What runs in a slot.
enum Run {
    /// The sampler (running, or ended on its own: finished, failed, or
    /// off its CPU and not reaped yet).
    Sampler(SamplerHandle),
    /// Reaped after its CPU went offline; waiting for a restart.
    Offline,
    /// A `RestartJob` is out.
    Preparing,
    /// A restarted sampler that has not reported running yet, and since
    /// when it is waited for.
    Starting {
        handle: SamplerHandle,
        collector: Collector,
        since: Instant,
    },
    /// A restarted sampler that failed or was cancelled, to be joined once
    /// its thread has returned; no other starts on the CPU until then.
    Retiring(SamplerHandle),
}

/// One CPU's sampler. After its CPU went offline the thread is joined and
/// the slot waits until `restart_jobs`, `adopt` and `poll_restarts` bring a
/// new one.
pub struct Slot {
    pub cpu: usize,
    /// The priority its sampler asks for.
    pub priority: i32,
    run: Run,
    /// The current (or last) running sampler's shared state.
    shared: Arc<SamplerShared>,
    collector: Collector,
    /// Runs with its real-time policy, with memory locked.
    pub realtime: bool,
}

impl Slot {
    /// A slot whose CPU is offline: no thread, waiting for a restart.
    fn offline(cpu: usize, priority: i32, template: &LatencyStats) -> Slot {
        let (_, collector) = handoff::channel(template, handoff::DEFAULT_BUFFERS);
        Slot {
            cpu,
            priority,
            shared: Arc::new(SamplerShared::idle()),
            run: Run::Offline,
            collector,
            realtime: false,
        }
    }

    fn new(cpu: usize, handle: SamplerHandle, collector: Collector) -> Slot {
        Slot {
            cpu,
            priority: handle.spec.priority,
            shared: Arc::clone(&handle.shared),
            run: Run::Sampler(handle),
            collector,
            realtime: false,
        }
    }

    pub fn shared(&self) -> &Arc<SamplerShared> {
        &self.shared
    }

    /// The running sampler's thread has returned (or the slot has none
    /// running: its CPU is offline).
    pub fn is_finished(&self) -> bool {
        match &self.run {
            Run::Sampler(handle) => handle.is_finished(),
            _ => true,
        }
    }

    /// The slot does not sample because its CPU went away (see
    /// `SamplerState::Displaced`): not dead, and a restart brings it back.
    pub fn is_offline(&self) -> bool {
        match &self.run {
            Run::Sampler(_) => self.shared.state() == SamplerState::Displaced,
            _ => true,
        }
    }

    /// At a tolerant start: a sampler that could not pin itself (its CPU
    /// went offline as it started) is joined by `poll_restarts` and
    /// restarted when its CPU is back; one that found itself off its CPU
    /// is reaped as any displaced sampler is.
    fn retire_if_it_lost_its_cpu(&mut self) {
        let failed_to_pin = self.shared.state() == SamplerState::Failed
            && self.shared.failure().0 == thread::FailedStep::Affinity;
        if failed_to_pin
            && let Run::Sampler(handle) = std::mem::replace(&mut self.run, Run::Offline)
        {
            self.run = Run::Retiring(handle);
            // Not a dead sampler: a slot waiting for its CPU.
            self.shared = Arc::new(SamplerShared::idle());
        }
    }

    /// The handles of every thread this slot still owns.
    fn handles(&self) -> impl Iterator<Item = &SamplerHandle> {
        match &self.run {
            Run::Sampler(handle) | Run::Starting { handle, .. } | Run::Retiring(handle) => {
                Some(handle)
            }
            Run::Offline | Run::Preparing => None,
        }
        .into_iter()
    }
}

/// A sampler after it was joined.
pub struct Finished {
    /// Its index among the engine's slots (and the `merge` callbacks).
    pub idx: usize,
    pub cpu: usize,
    pub spec: SamplerSpec,
    pub shared: Arc<SamplerShared>,
    pub realtime: bool,
    /// How the hot loop ended (`None`: it never started).
    pub end: Option<LoopEnd>,
}

pub struct Engine {
    pub slots: Vec<Slot>,
    /// Why results are not real-time, one reason per line; empty when they
    /// are.
    pub non_rt_reasons: Vec<String>,
    /// Shared with restart jobs, so that handing one out copies no
    /// histogram.
    spec: Arc<EngineSpec>,
    stop: Arc<AtomicBool>,
    memory_locked: bool,
}

impl Engine {
    /// Locks memory, starts the samplers and waits for them. On failure
    /// every sampler already started is stopped and joined.
    pub fn start(spec: EngineSpec, stop: Arc<AtomicBool>) -> Result<Engine, StartError> {
        let mut non_rt_reasons = Vec::new();
        let memory_locked = lock_memory(&spec, &mut non_rt_reasons)?;
        let mut slots = Vec::with_capacity(spec.threads.len());
        let online = spec
            .tolerate_offline
            .then(crate::sys::online_cpus)
            .flatten();
        for idx in 0..spec.threads.len() {
            let thread = &spec.threads[idx];
            if online
                .as_ref()
                .is_some_and(|online| !online.contains(&thread.cpu))
            {
                slots.push(Slot::offline(thread.cpu, thread.priority, &spec.template));
                continue;
            }
            match spawn_sampler(spec.sampler_spec(idx), &spec.template, &stop) {
                Ok((handle, collector)) => {
                    slots.push(Slot::new(spec.threads[idx].cpu, handle, collector))
                }
                Err(err) => {
                    stop_all(slots, &stop);
                    return Err(err);
                }
            }
        }
        if let Err(err) = wait_for_start(&slots, &spec) {
            stop_all(slots, &stop);
            return Err(err);
        }
        for slot in &mut slots {
            if spec.tolerate_offline {
                slot.retire_if_it_lost_its_cpu();
            }
            let state = slot.shared.state();
            slot.realtime = memory_locked && state == SamplerState::RunningRealtime;
            if state == SamplerState::RunningNonRealtime && spec.policy.is_realtime() {
                let (_, err) = slot.shared.failure();
                non_rt_reasons.push(format!(
                    "CPU {}: SCHED_{} priority {} refused ({err})",
                    slot.cpu,
                    spec.policy.name().to_uppercase(),
                    slot.priority
                ));
            }
        }
        if !spec.policy.is_realtime() {
            non_rt_reasons.push(format!(
                "the policy is '{}' (SCHED_{})",
                spec.policy.name(),
                spec.policy.name().to_uppercase()
            ));
        }
        Ok(Engine {
            slots,
            non_rt_reasons,
            spec: Arc::new(spec),
            stop,
            memory_locked,
        })
    }

    /// Adds a slot for `cpu`, a CPU that came online after the start, set
    /// up as the first slot's (the daemon's samplers are all alike); its
    /// sampler starts through `restart_jobs` like any offline slot's.
    /// Returns its index.
    pub fn add_slot(&mut self, cpu: usize) -> usize {
        let spec = Arc::make_mut(&mut self.spec);
        let mut setup = spec.threads[0];
        setup.cpu = cpu;
        spec.threads.push(setup);
        self.slots
            .push(Slot::offline(cpu, setup.priority, &spec.template));
        self.slots.len() - 1
    }

    /// Joins the samplers that stopped because their CPU went offline and
    /// hands over what they recorded (queued intervals, then the
    /// remainder). Returns the CPUs newly found offline.
    pub fn reap_offline(
        &mut self,
        mut merge: impl FnMut(usize, &LatencyStats) -> Result<(), ShapeMismatch>,
    ) -> io::Result<Vec<usize>> {
        let mut offline = Vec::new();
        for (idx, slot) in self.slots.iter_mut().enumerate() {
            let reapable = matches!(&slot.run, Run::Sampler(handle) if handle.is_finished())
                && slot.shared.state() == SamplerState::Displaced;
            if !reapable {
                continue;
            }
            let Run::Sampler(handle) = std::mem::replace(&mut slot.run, Run::Offline) else {
                continue;
            };
            let (_, exit) = handle.join()?;
            slot.collector
                .drain(|interval| merge(idx, interval))
                .and_then(|_| merge(idx, &exit.remainder))
                .map_err(|e| io::Error::other(e.to_string()))?;
            offline.push(slot.cpu);
        }
        Ok(offline)
    }

    /// Hands every interval published since the last call to `merge`, with
    /// the index of its slot, oldest first per slot.
    pub fn drain(
        &mut self,
        mut merge: impl FnMut(usize, &LatencyStats) -> Result<(), ShapeMismatch>,
    ) -> Result<(), ShapeMismatch> {
        for (idx, slot) in self.slots.iter_mut().enumerate() {
            slot.collector.drain(|interval| merge(idx, interval))?;
        }
        Ok(())
    }

    /// Every sampler thread has returned (finished its plan, was stopped,
    /// or died), restarting ones included.
    pub fn all_finished(&self) -> bool {
        self.slots
            .iter()
            .flat_map(Slot::handles)
            .all(SamplerHandle::is_finished)
    }

    /// Joins every sampler (the caller has raised the stop flag or the plan
    /// has ended), then hands over what is left: first the queued intervals,
    /// then each sampler's unpublished remainder, so nothing is lost. A
    /// sampler that has not returned within `timeout` is stuck (its sleep
    /// never returns): it is reported in `stuck` and left behind, its
    /// last interval lost, rather than holding up the exit forever.
    /// Restarting samplers are cancelled and joined the same way.
    pub fn finish(
        self,
        timeout: Duration,
        mut merge: impl FnMut(usize, &LatencyStats) -> Result<(), ShapeMismatch>,
    ) -> io::Result<FinishReport> {
        for slot in &self.slots {
            if let Run::Starting { handle, .. } = &slot.run {
                // Whether it loses or wins, the stop flag ends it.
                handle.shared.cancel();
            }
        }
        let deadline = Instant::now() + timeout;
        while !self.all_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut report = FinishReport {
            finished: Vec::with_capacity(self.slots.len()),
            stuck: Vec::new(),
            offline: Vec::new(),
        };
        for (idx, slot) in self.slots.into_iter().enumerate() {
            let Slot {
                cpu,
                priority: _,
                run,
                shared,
                mut collector,
                realtime,
            } = slot;
            let handle = match run {
                Run::Sampler(handle) => handle,
                Run::Starting { handle, .. } | Run::Retiring(handle) => {
                    // Offline all along from the caller's side; its last
                    // sampler's samples were handed over when it was reaped.
                    if handle.is_finished() {
                        let _ = handle.join();
                        report.offline.push(cpu);
                    } else {
                        report.stuck.push(cpu);
                    }
                    continue;
                }
                Run::Offline | Run::Preparing => {
                    // Reaped when its CPU went offline: nothing left to join.
                    report.offline.push(cpu);
                    continue;
                }
            };
            if !handle.is_finished() {
                // What it published is still counted.
                collector
                    .drain(|interval| merge(idx, interval))
                    .map_err(|e| io::Error::other(e.to_string()))?;
                report.stuck.push(cpu);
                continue;
            }
            let (spec, exit) = handle.join()?;
            let merged = collector
                .drain(|interval| merge(idx, interval))
                .and_then(|_| merge(idx, &exit.remainder));
            merged.map_err(|e| io::Error::other(e.to_string()))?;
            report.finished.push(Finished {
                idx,
                cpu,
                spec,
                shared,
                realtime,
                end: exit.end,
            });
        }
        Ok(report)
    }
}

impl EngineSpec {
    /// What slot `idx`'s sampler is told.
    fn sampler_spec(&self, idx: usize) -> SamplerSpec {
        let thread = &self.threads[idx];
        SamplerSpec {
            cpu: thread.cpu,
            policy: self.policy,
            priority: thread.priority,
            plan: thread.plan,
            timing: thread.timing,
            allow_non_rt: self.allow_non_rt,
        }
    }
}

/// The samplers after `Engine::finish`.
pub struct FinishReport {
    pub finished: Vec<Finished>,
    /// CPUs whose sampler did not return in time.
    pub stuck: Vec<usize>,
    /// CPUs whose sampler had stopped earlier because the CPU went offline
    /// and was not restarted (what it recorded was handed over then).
    pub offline: Vec<usize>,
}

/// Allocates a sampler's handoff (every buffer touched, so locked under
/// `mlockall`) and starts its thread; it does not wait for it to run.
fn spawn_sampler(
    spec: SamplerSpec,
    template: &LatencyStats,
    stop: &Arc<AtomicBool>,
) -> Result<(SamplerHandle, Collector), StartError> {
    let cpu = spec.cpu;
    let (publisher, collector) = handoff::channel(template, handoff::DEFAULT_BUFFERS);
    let handle = thread::spawn(spec, publisher, Arc::clone(stop)).map_err(|err| {
        StartError::Failed(format!(
            "cannot start the sampler thread for CPU {cpu}: {err}"
        ))
    })?;
    Ok((handle, collector))
}

fn stop_all(slots: Vec<Slot>, stop: &AtomicBool) {
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for slot in slots {
        if let Run::Sampler(handle) = slot.run {
            // A sampler still starting never enters its loop.
            handle.shared.cancel();
            let _ = handle.join();
        }
    }
}
