//! Starting the engine: locking memory, waiting for the samplers to report,
//! and explaining a failure with what failed and how to fix it.

use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use super::{EngineSpec, Slot};
use crate::sys;
use crate::thread::{FailedStep, SamplerState};

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

/// Why the samplers could not be started, and whether it is a missing
/// privilege (the daemon exits 77, EX_NOPERM, for those) or anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// Real-time scheduling or memory locking was refused.
    Permission(String),
    /// Anything else: a CPU that cannot be pinned, a thread that cannot be
    /// started, a clock that cannot sleep, a sampler that never reported.
    Failed(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Permission(message) | StartError::Failed(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for StartError {}

/// Locks all memory, or explains why it cannot and how to fix that.
/// Returns whether memory is locked (it may not be with `allow_non_rt`).
pub(super) fn lock_memory(
    spec: &EngineSpec,
    non_rt_reasons: &mut Vec<String>,
) -> Result<bool, StartError> {
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
        Err(StartError::Permission(format!(
            "cannot lock memory: {problem}. To fix: run as root, grant CAP_IPC_LOCK, or \
                 raise RLIMIT_MEMLOCK to unlimited (`ulimit -l unlimited`, or \
                 LimitMEMLOCK=infinity under systemd); or allow running without real-time \
                 guarantees ({})",
            ALLOW_NON_RT_HINT
        )))
    }
}

/// How each front end lets users run degraded.
const ALLOW_NON_RT_HINT: &str =
    "--allow-non-rt for measure, realtime.required = false for the daemon";

/// Waits until every sampler runs or one fails.
pub(super) fn wait_for_start(slots: &[Slot], spec: &EngineSpec) -> Result<(), StartError> {
    let deadline = Instant::now() + spec.start_timeout;
    loop {
        let mut starting = false;
        for slot in slots {
            match slot.shared.state() {
                SamplerState::Starting => starting = true,
                // Its CPU went offline as it started: the caller retires it.
                SamplerState::Failed
                    if spec.tolerate_offline && slot.shared.failure().0 == FailedStep::Affinity => {
                }
                SamplerState::Failed => {
                    let (step, err) = slot.shared.failure();
                    return Err(explain_start_failure(
                        slot.cpu,
                        slot.priority,
                        step,
                        &err,
                        spec,
                    ));
                }
                _ => {}
            }
        }
        if !starting {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(StartError::Failed(format!(
                "the samplers did not start within {:?}",
                spec.start_timeout
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub(super) fn explain_start_failure(
    cpu: usize,
    prio: i32,
    step: FailedStep,
    err: &io::Error,
    spec: &EngineSpec,
) -> StartError {
    match step {
        FailedStep::Affinity => StartError::Failed(format!(
            "cannot pin the sampler to CPU {cpu} ({err}): the CPU may have gone offline or \
                 be outside this cgroup's cpuset; choose other CPUs"
        )),
        FailedStep::Policy => {
            let limit = spec
                .limits
                .rtprio_limit
                .map_or_else(|| "unlimited".to_string(), |n| n.to_string());
            StartError::Permission(format!(
                "cannot switch the sampler on CPU {cpu} to SCHED_{} priority {prio} ({err}). \
                     Real-time scheduling needs root, CAP_SYS_NICE, or RLIMIT_RTPRIO of at least \
                     {prio} (now {limit}; `ulimit -r {prio}`, or LimitRTPRIO={prio} under \
                     systemd); a cgroup v1 group with cpu.rt_runtime_us = 0 refuses it even to \
                     root. To measure anyway, marked as not real-time: {ALLOW_NON_RT_HINT}",
                spec.policy.name().to_uppercase(),
            ))
        }
        FailedStep::Sleep => StartError::Failed(format!(
            "the sampler on CPU {cpu} could not sleep: clock_nanosleep (or, with -x, its \
                 POSIX timer) failed ({err}); the kernel's clock is unusable here"
        )),
        FailedStep::None => {
            StartError::Failed(format!("the sampler on CPU {cpu} failed to start ({err})"))
        }
    }
}
