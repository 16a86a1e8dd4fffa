//! Another thread's scheduling, read and set by its thread id: what the
//! collector checks every tick, because a tuned profile, tuna, `chrt` or a
//! cgroup move can change a running sampler's policy, priority or CPUs
//! without latencyd being told.

use std::io;

use super::{MAX_CPUS, Policy, cpu_set_of};

/// A thread's scheduling as the kernel reports it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadScheduling {
    /// The kernel's policy number (`SCHED_RESET_ON_FORK` cleared).
    pub policy: i32,
    pub priority: i32,
    /// The CPUs it may run on.
    pub cpus: Vec<usize>,
}

impl ThreadScheduling {
    /// The policy as latencyd names it (`fifo`, `rr`, `other`, `batch`,
    /// `idle`), or `deadline`, or the number for one latencyd does not know.
    pub fn policy_name(&self) -> String {
        match self.policy {
            libc::SCHED_FIFO => "fifo".into(),
            libc::SCHED_RR => "rr".into(),
            libc::SCHED_OTHER => "other".into(),
            libc::SCHED_BATCH => "batch".into(),
            libc::SCHED_IDLE => "idle".into(),
            6 => "deadline".into(),
            other => format!("policy {other}"),
        }
    }

    /// What a thread set to `policy` at `priority` on `cpu` alone reports
    /// (the kernel keeps priority 0 for the policies without one).
    pub fn of(policy: Policy, priority: i32, cpu: usize) -> ThreadScheduling {
        ThreadScheduling {
            policy: policy.to_libc(),
            priority: if policy.is_realtime() { priority } else { 0 },
            cpus: vec![cpu],
        }
    }
}

/// `fifo 80 on CPU 1`, `other 0 on CPUs 0-1`.
impl std::fmt::Display for ThreadScheduling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = if self.cpus.len() == 1 { "" } else { "s" };
        write!(
            f,
            "{} {} on CPU{plural} {}",
            self.policy_name(),
            self.priority,
            crate::cpulist::format_cpu_list(&self.cpus)
        )
    }
}

/// Thread `tid`'s policy, priority and CPUs (three system calls, none of
/// which blocks). `ESRCH` when the thread has ended.
pub fn thread_scheduling(tid: i32) -> io::Result<ThreadScheduling> {
    if tid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: sched_getscheduler reads no memory of ours.
    let policy = unsafe { libc::sched_getscheduler(tid) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid out-pointer.
    if unsafe { libc::sched_getparam(tid, &mut param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: cpu_set_t is plain data; all-zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid out-buffer of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let cpus = (0..MAX_CPUS)
        // SAFETY: every index is below CPU_SETSIZE and `set` is initialised.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect();
    Ok(ThreadScheduling {
        policy: policy & !libc::SCHED_RESET_ON_FORK,
        priority: param.sched_priority,
        cpus,
    })
}

/// Sets thread `tid` (a thread of this process: the same rights as for
/// the calling thread) to `to`: its policy and priority, then its CPUs.
pub fn set_thread_scheduling(tid: i32, to: &ThreadScheduling) -> io::Result<()> {
    if tid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    let param = libc::sched_param {
        sched_priority: to.priority,
    };
    // SAFETY: `param` is a valid sched_param; a thread that has gone is an
    // error return.
    if unsafe { libc::sched_setscheduler(tid, to.policy, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let set = cpu_set_of(&to.cpus)?;
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_reads_its_own_scheduling_and_a_gone_thread_is_esrch() {
        let own = thread_scheduling(super::super::current_tid()).unwrap();
        assert!(!own.cpus.is_empty());
        assert!(!own.policy_name().is_empty());
        let gone = thread_scheduling(i32::MAX).unwrap_err();
        assert_eq!(gone.raw_os_error(), Some(libc::ESRCH));
        assert_eq!(
            thread_scheduling(0).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
    }

    #[test]
    fn a_thread_set_back_runs_as_asked_on_its_cpu() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            tx.send(super::super::current_tid()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let cpu = *super::super::process_affinity().unwrap().first().unwrap();
        set_thread_scheduling(tid, &ThreadScheduling::of(Policy::Batch, 7, cpu)).unwrap();
        let now = thread_scheduling(tid).unwrap();
        assert_eq!(now.policy_name(), "batch");
        assert_eq!(now.to_string(), format!("batch 0 on CPU {cpu}"));
        assert_eq!(now, ThreadScheduling::of(Policy::Batch, 7, cpu));
        assert_ne!(now, ThreadScheduling::of(Policy::Other, 0, cpu));
        done_tx.send(()).unwrap();
        worker.join().unwrap();
    }
}
