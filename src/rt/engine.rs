//! The set of running samplers, shared by both front ends (`measure` and
//! the daemon): it locks memory, starts one sampler per CPU, waits until
//! each has reported itself running or failed, hands every published
//! interval to the caller, and joins the samplers at the end without losing
//! their last interval.
//!
//! Start-up failures are explained here, once, with what failed and how to
//! fix it, so both front ends say the same thing.
//!
//! Restarting a sampler whose CPU came back online never blocks the
//! caller: `restart_job` hands out the slow part (allocating the handoff,
//! starting the thread) to run on another thread, `adopt` takes its result,
//! and `poll_restarts` looks at the new sampler without waiting. A sampler
//! that does not report running within `EngineSpec::start_timeout` is
//! cancelled (`SamplerShared::cancel`) and joined before its CPU gets
//! another, so a CPU never has two samplers.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::handoff::{self, Collector};
use super::sampler::{LoopEnd, LoopPlan};
use super::sys::{self, Policy};
use super::thread::{self, FailedStep, SamplerHandle, SamplerShared, SamplerSpec, SamplerState};
use crate::stats::{LatencyStats, ShapeMismatch};

/// How long samplers get to pin themselves and switch policy, unless the
/// front end says otherwise.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(10);

/// What the process may do, as detected on the host
/// (`host::HostInfo::rt_limits`): what memory locking and the start-up
/// explanations need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtLimits {
    /// `mlockall(MCL_FUTURE)` cannot make later allocations fail
    /// (CAP_IPC_LOCK, or RLIMIT_MEMLOCK unlimited).
    pub memory_lock_is_safe: bool,
    /// `RLIMIT_MEMLOCK` in bytes (`None`: unlimited).
    pub memlock_limit: Option<u64>,
    /// `RLIMIT_RTPRIO` (`None`: unlimited).
    pub rtprio_limit: Option<u64>,
}

/// What to run: one sampler per CPU, all alike.
#[derive(Debug, Clone)]
pub struct EngineSpec {
    pub cpus: Vec<usize>,
    pub policy: Policy,
    pub priority: i32,
    pub plan: LoopPlan,
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
}

/// Why the samplers could not be started.
#[derive(Debug)]
pub struct StartError {
    /// The failure is a missing privilege (exit status 77, EX_NOPERM, in
    /// the daemon), as opposed to anything else.
    pub permission: bool,
    pub message: String,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StartError {}

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
/// the slot waits until `restart_job`, `adopt` and `poll_restarts` bring a
/// new one.
pub struct Slot {
    pub cpu: usize,
    run: Run,
    /// The current (or last) running sampler's shared state.
    shared: Arc<SamplerShared>,
    collector: Collector,
    /// Runs with its real-time policy, with memory locked.
    pub realtime: bool,
}

impl Slot {
    fn new(cpu: usize, handle: SamplerHandle, collector: Collector) -> Slot {
        Slot {
            cpu,
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

/// The slow part of restarting slot `idx`'s sampler, to run off the
/// caller's thread: allocate the handoff (its buffers are touched, and
/// locked under `mlockall`) and start the thread. It does not wait for the
/// sampler to run; `Engine::poll_restarts` does that without blocking.
pub struct RestartJob {
    pub idx: usize,
    spec: SamplerSpec,
    template: LatencyStats,
    stop: Arc<AtomicBool>,
}

/// A restarted sampler's thread and its end of the handoff.
pub struct Candidate {
    handle: SamplerHandle,
    collector: Collector,
}

impl RestartJob {
    /// Starts the new sampler, if its CPU is listed online (`Ok(None)`
    /// if it is not yet: try again later).
    pub fn run(self) -> Result<Option<Candidate>, StartError> {
        let online = sys::online_cpus().unwrap_or_default();
        if !online.contains(&self.spec.cpu) {
            return Ok(None);
        }
        let cpu = self.spec.cpu;
        let (publisher, collector) = handoff::channel(&self.template, handoff::DEFAULT_BUFFERS);
        let handle = thread::spawn(self.spec, publisher, self.stop).map_err(|err| StartError {
            permission: false,
            message: format!("cannot start the sampler thread for CPU {cpu}: {err}"),
        })?;
        Ok(Some(Candidate { handle, collector }))
    }
}

/// What `Engine::poll_restarts` saw happen to a restarting slot.
#[derive(Debug, PartialEq, Eq)]
pub enum RestartOutcome {
    /// The new sampler runs: the CPU is sampled again.
    Resumed { cpu: usize },
    /// The new sampler failed or did not report running in time (then it
    /// was cancelled); the slot retries once its thread is joined.
    NotResumed { cpu: usize, why: String },
}

pub struct Engine {
    pub slots: Vec<Slot>,
    /// Why results are not real-time, one reason per line; empty when they
    /// are.
    pub non_rt_reasons: Vec<String>,
    spec: EngineSpec,
    stop: Arc<AtomicBool>,
    memory_locked: bool,
}

impl Engine {
    /// Locks memory, starts the samplers and waits for them. On failure
    /// every sampler already started is stopped and joined.
    pub fn start(spec: EngineSpec, stop: Arc<AtomicBool>) -> Result<Engine, StartError> {
        let mut non_rt_reasons = Vec::new();
        let memory_locked = lock_memory(&spec, &mut non_rt_reasons)?;
        let mut slots = Vec::with_capacity(spec.cpus.len());
        for &cpu in &spec.cpus {
            let (publisher, collector) = handoff::channel(&spec.template, handoff::DEFAULT_BUFFERS);
            match thread::spawn(spec.sampler_spec(cpu), publisher, Arc::clone(&stop)) {
                Ok(handle) => slots.push(Slot::new(cpu, handle, collector)),
                Err(err) => {
                    stop_all(slots, &stop);
                    return Err(StartError {
                        permission: false,
                        message: format!("cannot start the sampler thread for CPU {cpu}: {err}"),
                    });
                }
            }
        }
        if let Err(err) = wait_for_start(&slots, &spec) {
            stop_all(slots, &stop);
            return Err(err);
        }
        for slot in &mut slots {
            let state = slot.shared.state();
            slot.realtime = memory_locked && state == SamplerState::RunningRealtime;
            if state == SamplerState::RunningNonRealtime && spec.policy.is_realtime() {
                let (_, err) = slot.shared.failure();
                non_rt_reasons.push(format!(
                    "CPU {}: SCHED_{} priority {} refused ({err})",
                    slot.cpu,
                    spec.policy.name().to_uppercase(),
                    spec.priority
                ));
            }
        }
        if !spec.policy.is_realtime() {
            non_rt_reasons.push("the policy is 'other' (SCHED_OTHER)".to_string());
        }
        Ok(Engine {
            slots,
            non_rt_reasons,
            spec,
            stop,
            memory_locked,
        })
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

    /// The restart of every offline slot that has none under way, as jobs
    /// for another thread; hand each result to `adopt`. The new sampler's
    /// samples continue the slot's (the same index on the caller's side).
    pub fn restart_jobs(&mut self) -> Vec<RestartJob> {
        let mut jobs = Vec::new();
        for (idx, slot) in self.slots.iter_mut().enumerate() {
            if matches!(slot.run, Run::Offline) {
                slot.run = Run::Preparing;
                jobs.push(RestartJob {
                    idx,
                    spec: self.spec.sampler_spec(slot.cpu),
                    template: self.spec.template.clone(),
                    stop: Arc::clone(&self.stop),
                });
            }
        }
        jobs
    }

    /// Takes the result of slot `idx`'s `RestartJob`: the new sampler is
    /// then waited for by `poll_restarts`. An error (or a CPU not online
    /// yet) leaves the slot offline for the next `restart_jobs`.
    pub fn adopt(
        &mut self,
        idx: usize,
        result: Result<Option<Candidate>, StartError>,
        now: Instant,
    ) -> Result<(), StartError> {
        let slot = &mut self.slots[idx];
        match result {
            Ok(Some(Candidate { handle, collector })) => {
                slot.run = Run::Starting {
                    handle,
                    collector,
                    since: now,
                };
                Ok(())
            }
            Ok(None) => {
                slot.run = Run::Offline;
                Ok(())
            }
            Err(err) => {
                slot.run = Run::Offline;
                Err(err)
            }
        }
    }

    /// Looks at every restarting sampler, without waiting: one that runs
    /// takes over its slot; one that failed, or has not reported running
    /// `start_timeout` after `adopt`, is cancelled and left to be joined;
    /// a joined one frees its slot for the next restart.
    pub fn poll_restarts(&mut self, now: Instant) -> Vec<RestartOutcome> {
        let mut outcomes = Vec::new();
        for slot in &mut self.slots {
            match std::mem::replace(&mut slot.run, Run::Offline) {
                Run::Starting {
                    handle,
                    collector,
                    since,
                } => {
                    let state = handle.shared.state();
                    let timed_out = now.saturating_duration_since(since) >= self.spec.start_timeout;
                    if state.is_running() {
                        slot.realtime =
                            self.memory_locked && state == SamplerState::RunningRealtime;
                        slot.shared = Arc::clone(&handle.shared);
                        slot.collector = collector;
                        slot.run = Run::Sampler(handle);
                        outcomes.push(RestartOutcome::Resumed { cpu: slot.cpu });
                    } else if state == SamplerState::Failed {
                        let (step, err) = handle.shared.failure();
                        let why = explain_start_failure(slot.cpu, step, &err, &self.spec);
                        slot.run = Run::Retiring(handle);
                        outcomes.push(RestartOutcome::NotResumed {
                            cpu: slot.cpu,
                            why: why.message,
                        });
                    } else if timed_out && handle.shared.cancel() {
                        slot.run = Run::Retiring(handle);
                        outcomes.push(RestartOutcome::NotResumed {
                            cpu: slot.cpu,
                            why: format!(
                                "its sampler did not start within {:?} and was stopped",
                                self.spec.start_timeout
                            ),
                        });
                    } else {
                        // Still starting, or it began running just as the
                        // timeout came (`cancel` lost): seen next time.
                        slot.run = Run::Starting {
                            handle,
                            collector,
                            since,
                        };
                    }
                }
                Run::Retiring(handle) if handle.is_finished() => {
                    // Returned without sampling: nothing to hand over.
                    let _ = handle.join();
                }
                other => slot.run = other,
            }
        }
        outcomes
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
    fn sampler_spec(&self, cpu: usize) -> SamplerSpec {
        SamplerSpec {
            cpu,
            policy: self.policy,
            priority: self.priority,
            plan: self.plan,
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

/// Locks all memory, or explains why it cannot and how to fix that.
/// Returns whether memory is locked (it may not be with `allow_non_rt`).
fn lock_memory(spec: &EngineSpec, non_rt_reasons: &mut Vec<String>) -> Result<bool, StartError> {
    let allow_non_rt = spec.allow_non_rt;
    let problem = if spec.limits.memory_lock_is_safe {
        match sys::lock_all_memory() {
            Ok(()) => return Ok(true),
            Err(err) => format!("mlockall failed ({err})"),
        }
    } else {
        format!(
            "RLIMIT_MEMLOCK is {} KiB and the process lacks CAP_IPC_LOCK, so locking all \
             memory would make later allocations fail",
            spec.limits.memlock_limit.unwrap_or(0) / 1024
        )
    };
    if allow_non_rt {
        non_rt_reasons.push(format!("memory is not locked: {problem}"));
        Ok(false)
    } else {
        Err(StartError {
            permission: true,
            message: format!(
                "cannot lock memory: {problem}. To fix: run as root, grant CAP_IPC_LOCK, or \
                 raise RLIMIT_MEMLOCK to unlimited (`ulimit -l unlimited`, or \
                 LimitMEMLOCK=infinity under systemd); or allow running without real-time \
                 guarantees ({})",
                ALLOW_NON_RT_HINT
            ),
        })
    }
}

/// How each front end lets users run degraded.
const ALLOW_NON_RT_HINT: &str =
    "--allow-non-rt for measure, realtime.required = false for the daemon";

/// Waits until every sampler runs or one fails.
fn wait_for_start(slots: &[Slot], spec: &EngineSpec) -> Result<(), StartError> {
    let deadline = Instant::now() + spec.start_timeout;
    loop {
        let mut starting = false;
        for slot in slots {
            match slot.shared.state() {
                SamplerState::Starting => starting = true,
                SamplerState::Failed => {
                    let (step, err) = slot.shared.failure();
                    return Err(explain_start_failure(slot.cpu, step, &err, spec));
                }
                _ => {}
            }
        }
        if !starting {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(StartError {
                permission: false,
                message: format!("the samplers did not start within {:?}", spec.start_timeout),
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn explain_start_failure(
    cpu: usize,
    step: FailedStep,
    err: &io::Error,
    spec: &EngineSpec,
) -> StartError {
    match step {
        FailedStep::Affinity => StartError {
            permission: false,
            message: format!(
                "cannot pin the sampler to CPU {cpu} ({err}): the CPU may have gone offline or \
                 be outside this cgroup's cpuset; choose other CPUs"
            ),
        },
        FailedStep::Policy => {
            let limit = spec
                .limits
                .rtprio_limit
                .map_or_else(|| "unlimited".to_string(), |n| n.to_string());
            let prio = spec.priority;
            StartError {
                permission: true,
                message: format!(
                    "cannot switch the sampler on CPU {cpu} to SCHED_{} priority {prio} ({err}). \
                     Real-time scheduling needs root, CAP_SYS_NICE, or RLIMIT_RTPRIO of at least \
                     {prio} (now {limit}; `ulimit -r {prio}`, or LimitRTPRIO={prio} under \
                     systemd); a cgroup v1 group with cpu.rt_runtime_us = 0 refuses it even to \
                     root. To measure anyway, marked as not real-time: {ALLOW_NON_RT_HINT}",
                    spec.policy.name().to_uppercase(),
                ),
            }
        }
        FailedStep::Sleep => StartError {
            permission: false,
            message: format!(
                "the sampler on CPU {cpu} could not sleep: clock_nanosleep(CLOCK_MONOTONIC) \
                 failed ({err}); the kernel's monotonic clock is unusable here"
            ),
        },
        FailedStep::None => StartError {
            permission: false,
            message: format!("the sampler on CPU {cpu} failed to start ({err})"),
        },
    }
}
