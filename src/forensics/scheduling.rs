//! How a task was scheduled, said one way everywhere: the kernel's
//! `prio` (as `sched_switch` gives it) turned into the priority users set
//! and the class it tells, and both written as one phrase for verdicts and
//! the capture page.

/// The kernel's `prio` as users set it: 1..99 for a real-time task
/// (`prio = 99 - rt_priority`), the nice value for another (`120 + nice`),
/// none for SCHED_DEADLINE.
pub fn user_priority(prio: i32) -> Option<i32> {
    match prio {
        p if p < 0 => None,
        p if p < 100 => Some(99 - p),
        p => Some(p - 120),
    }
}

/// The scheduling class the kernel's `prio` tells (not which policy of
/// the class).
pub fn policy_class(prio: i32) -> &'static str {
    match prio {
        p if p < 0 => "SCHED_DEADLINE",
        p if p < 100 => REALTIME,
        _ => NORMAL,
    }
}

/// How a task was scheduled, one way everywhere (the verdict, the capture
/// page): a real-time policy with its priority (`SCHED_FIFO 90`,
/// `real-time 90` when the task was gone before its policy could be
/// read), any other with its nice value (`SCHED_OTHER, nice 0`).
pub fn scheduling(policy: Option<&str>, priority: Option<i32>) -> Option<String> {
    let realtime = |p: &str| matches!(p, "SCHED_FIFO" | "SCHED_RR" | REALTIME);
    Some(match (policy, priority) {
        (Some(p), Some(n)) if realtime(p) => format!("{p} {n}"),
        (Some(p), Some(n)) => format!("{p}, nice {n}"),
        (Some(p), None) => p.to_string(),
        (None, Some(n)) => format!("priority {n}"),
        (None, None) => return None,
    })
}

/// The policy a capture names for a real-time task (its kernel priority
/// says so) that was gone before its exact policy could be read.
pub const REALTIME: &str = "real-time";

/// The policy a capture names for any other task gone before it was read.
pub const NORMAL: &str = "normal";
