//! The set of running samplers, shared by both front ends (`measure` and
//! the daemon): it locks memory, starts one sampler per CPU, waits until
//! each has reported itself running or failed, hands every published
//! interval to the caller, and joins the samplers at the end without losing
//! their last interval.
//!
//! Start-up failures are explained here, once, with what failed and how to
//! fix it, so both front ends say the same thing.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::handoff::{self, Collector};
use crate::host::HostInfo;
use crate::sampler::{
    self, FailedStep, LoopEnd, LoopPlan, SamplerHandle, SamplerShared, SamplerSpec, SamplerState,
};
use crate::stats::{LatencyStats, ShapeMismatch};
use crate::sys::{self, Policy};

/// How long samplers get to pin themselves and switch policy.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

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

/// One CPU's sampler. After its CPU went offline the thread is joined
/// and `handle` is `None` until `Engine::restart` starts a new one.
pub struct Slot {
    pub cpu: usize,
    handle: Option<SamplerHandle>,
    /// The current (or last) sampler's shared state.
    shared: Arc<SamplerShared>,
    collector: Collector,
    /// Runs with its real-time policy, with memory locked.
    pub realtime: bool,
}

impl Slot {
    pub fn shared(&self) -> &Arc<SamplerShared> {
        &self.shared
    }

    /// The sampler thread has returned (or was joined after its CPU went
    /// offline).
    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(SamplerHandle::is_finished)
    }

    /// The sampler stopped because its CPU went away (see
    /// `SamplerState::Displaced`); it is not dead, and `Engine::restart`
    /// brings it back.
    pub fn is_offline(&self) -> bool {
        self.shared.state() == SamplerState::Displaced
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
    spec: EngineSpec,
    stop: Arc<AtomicBool>,
    memory_locked: bool,
}

impl Engine {
    /// Locks memory, starts the samplers and waits for them. On failure
    /// every sampler already started is stopped and joined.
    pub fn start(
        spec: EngineSpec,
        host: &HostInfo,
        stop: Arc<AtomicBool>,
    ) -> Result<Engine, StartError> {
        let mut non_rt_reasons = Vec::new();
        let memory_locked = lock_memory(host, spec.allow_non_rt, &mut non_rt_reasons)?;
        let mut slots = Vec::with_capacity(spec.cpus.len());
        for &cpu in &spec.cpus {
            let (publisher, collector) = handoff::channel(&spec.template, handoff::DEFAULT_BUFFERS);
            let sampler_spec = SamplerSpec {
                cpu,
                policy: spec.policy,
                priority: spec.priority,
                plan: spec.plan,
                allow_non_rt: spec.allow_non_rt,
            };
            match sampler::spawn(sampler_spec, publisher, Arc::clone(&stop)) {
                Ok(handle) => slots.push(Slot {
                    cpu,
                    shared: Arc::clone(&handle.shared),
                    handle: Some(handle),
                    collector,
                    realtime: false,
                }),
                Err(err) => {
                    stop_all(slots, &stop);
                    return Err(StartError {
                        permission: false,
                        message: format!("cannot start the sampler thread for CPU {cpu}: {err}"),
                    });
                }
            }
        }
        if let Err(err) = wait_for_start(&slots, host, &spec) {
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
            if !(slot.is_offline() && slot.handle.as_ref().is_some_and(SamplerHandle::is_finished))
            {
                continue;
            }
            let Some(handle) = slot.handle.take() else {
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

    /// Starts a new sampler in slot `idx`, whose previous one was reaped
    /// by `reap_offline`, and waits until it runs. Its samples continue the
    /// slot's (the same handoff, the same statistics on the caller's side).
    pub fn restart(&mut self, idx: usize, host: &HostInfo) -> Result<(), StartError> {
        let slot = &mut self.slots[idx];
        if slot.handle.is_some() {
            return Ok(());
        }
        let (publisher, collector) =
            handoff::channel(&self.spec.template, handoff::DEFAULT_BUFFERS);
        let sampler_spec = SamplerSpec {
            cpu: slot.cpu,
            policy: self.spec.policy,
            priority: self.spec.priority,
            plan: self.spec.plan,
            allow_non_rt: self.spec.allow_non_rt,
        };
        let handle =
            sampler::spawn(sampler_spec, publisher, Arc::clone(&self.stop)).map_err(|err| {
                StartError {
                    permission: false,
                    message: format!(
                        "cannot start the sampler thread for CPU {}: {err}",
                        slot.cpu
                    ),
                }
            })?;
        let candidate = Slot {
            cpu: slot.cpu,
            shared: Arc::clone(&handle.shared),
            handle: Some(handle),
            collector,
            realtime: false,
        };
        if let Err(err) = wait_for_start(std::slice::from_ref(&candidate), host, &self.spec) {
            // The slot stays offline, as it was, for a later attempt. A
            // sampler that failed has returned; one that never reported
            // (start-up timeout) is left to the stop flag.
            if let Some(handle) = candidate.handle.filter(SamplerHandle::is_finished) {
                let _ = handle.join();
            }
            return Err(err);
        }
        *slot = Slot {
            realtime: self.memory_locked
                && candidate.shared.state() == SamplerState::RunningRealtime,
            ..candidate
        };
        Ok(())
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
    /// or died).
    pub fn all_finished(&self) -> bool {
        self.slots.iter().all(Slot::is_finished)
    }

    /// Joins every sampler (the caller has raised the stop flag or the plan
    /// has ended), then hands over what is left: first the queued intervals,
    /// then each sampler's unpublished remainder, so nothing is lost. A
    /// sampler that has not returned within `timeout` is stuck (its sleep
    /// never returns): it is reported in `stuck` and left behind, its
    /// last interval lost, rather than holding up the exit forever.
    pub fn finish(
        self,
        timeout: Duration,
        mut merge: impl FnMut(usize, &LatencyStats) -> Result<(), ShapeMismatch>,
    ) -> io::Result<FinishReport> {
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
                handle,
                shared,
                mut collector,
                realtime,
            } = slot;
            let Some(handle) = handle else {
                // Reaped when its CPU went offline: nothing left to join.
                report.offline.push(cpu);
                continue;
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
        if let Some(handle) = slot.handle {
            let _ = handle.join();
        }
    }
}

/// Locks all memory, or explains why it cannot and how to fix that.
/// Returns whether memory is locked (it may not be with `allow_non_rt`).
fn lock_memory(
    host: &HostInfo,
    allow_non_rt: bool,
    non_rt_reasons: &mut Vec<String>,
) -> Result<bool, StartError> {
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
fn wait_for_start(slots: &[Slot], host: &HostInfo, spec: &EngineSpec) -> Result<(), StartError> {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        let mut starting = false;
        for slot in slots {
            match slot.shared.state() {
                SamplerState::Starting => starting = true,
                SamplerState::Failed => {
                    let (step, err) = slot.shared.failure();
                    return Err(explain_start_failure(slot.cpu, step, &err, host, spec));
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
                message: format!("the samplers did not start within {STARTUP_TIMEOUT:?}"),
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn explain_start_failure(
    cpu: usize,
    step: FailedStep,
    err: &io::Error,
    host: &HostInfo,
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
            let limit = host
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
