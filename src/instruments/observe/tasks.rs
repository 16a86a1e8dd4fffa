//! Who a task the observer saw is, from `/proc`: whether it is a kernel
//! thread (its `PF_KTHREAD` flag), the container or systemd unit its
//! cgroup path names, and whether it is one of latencyd's own. Read once
//! per task on the observer thread and cached; a task gone before it is
//! read is taken for a user task of no container.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::tally::{Comm, TaskKinds};
use crate::files::{MAX_KERNEL_FILE_BYTES, read_kernel_text};
use crate::tasks::container_of;
use crate::tasks::stat::{PF_KTHREAD, stat_flags, status_field};
/// Tasks remembered at most; the cache starts over beyond.
const MAX_CACHED: usize = 16_384;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Known {
    comm: Comm,
    kernel_thread: bool,
    container: String,
    /// A thread of latencyd's own process or of a child it started.
    own: bool,
}

/// The tasks seen, read from `root` (`/proc`, or a directory in tests).
#[derive(Debug)]
pub struct ProcTasks {
    root: PathBuf,
    cache: HashMap<i32, Known>,
    /// latencyd's own process id (another in tests).
    own_pid: i32,
}

impl ProcTasks {
    pub fn new(root: &Path) -> ProcTasks {
        ProcTasks::of(root, std::process::id() as i32)
    }

    /// Tasks read from `root` for the process `own_pid`.
    fn of(root: &Path, own_pid: i32) -> ProcTasks {
        ProcTasks {
            root: root.to_path_buf(),
            cache: HashMap::new(),
            own_pid,
        }
    }

    fn known(&mut self, pid: i32, comm: &[u8]) -> &Known {
        let comm = Comm::new(comm);
        // A pid reused by another task (its name changed) is read again.
        let fresh = self.cache.get(&pid).is_some_and(|k| k.comm == comm);
        if !fresh {
            if self.cache.len() >= MAX_CACHED {
                // A new table, not clear(): that keeps the capacity.
                self.cache = HashMap::new();
            }
            let dir = self.root.join(pid.to_string());
            let read = |file: &str| {
                read_kernel_text(&dir.join(file), MAX_KERNEL_FILE_BYTES).unwrap_or_default()
            };
            let (stat, cgroup, status) = (read("stat"), read("cgroup"), read("status"));
            // A task /proc does not show (gone already, or hidden by
            // ProtectProc=invisible): a kernel thread if its name is one.
            let kernel_thread = match stat_flags(&stat) {
                Some(flags) => flags & PF_KTHREAD != 0,
                None => named_like_a_kernel_thread(comm.as_bytes()),
            };
            self.cache.insert(
                pid,
                Known {
                    comm,
                    kernel_thread,
                    container: container_of(&cgroup),
                    own: (status_field(&status, "Tgid:") == Some(self.own_pid))
                        || status_field(&status, "PPid:") == Some(self.own_pid),
                },
            );
        }
        &self.cache[&pid]
    }

    /// The container (or unit) label of a task.
    /// The CPU task `tid` last ran on, or was last queued to (field 39 of
    /// its `stat`); `None` when it is gone or cannot be read.
    pub fn last_cpu(&self, tid: i32) -> Option<usize> {
        let stat = self.root.join(tid.to_string()).join("stat");
        let stat = read_kernel_text(&stat, MAX_KERNEL_FILE_BYTES).ok()?;
        let close = stat.rfind(')')?;
        let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
        // fields[0] is field 3.
        fields.get(39 - 3)?.parse().ok()
    }

    pub fn container(&mut self, pid: i32, comm: &[u8]) -> String {
        self.known(pid, comm).container.clone()
    }

    /// Whether the task is one of latencyd's own (a thread of its process,
    /// a sampler or a poller; or of a child it started, timerlat's
    /// workload), read from its `status` (`Tgid`, `PPid`): not a workload
    /// task, never offered as one's capture. A task gone is not.
    pub fn is_own(&mut self, pid: i32, comm: &[u8]) -> bool {
        self.known(pid, comm).own
    }
}

impl TaskKinds for ProcTasks {
    fn is_kernel_thread(&mut self, pid: i32, comm: &[u8]) -> bool {
        self.known(pid, comm).kernel_thread
    }

    /// `/proc/irq/N/` has a directory per action, named as the action.
    fn irq_action(&mut self, irq: u32, prefix: &str) -> Option<String> {
        let mut names: Vec<String> = fs::read_dir(self.root.join("irq").join(irq.to_string()))
            .ok()?
            .filter_map(|entry| {
                let entry = entry.ok()?;
                entry.file_type().ok()?.is_dir().then_some(())?;
                entry.file_name().into_string().ok()
            })
            .filter(|name| name.starts_with(prefix))
            .collect();
        names.sort();
        // The exact name where the comm was not cut, else the only match.
        match names.iter().position(|name| name == prefix) {
            Some(i) => Some(names.swap_remove(i)),
            None if names.len() == 1 => names.pop(),
            None => None,
        }
    }
}

/// The names of the kernel's own threads that may run with a real-time
/// policy (per-CPU threads `family/N`, threaded IRQs `irq/N-name`, RCU and
/// timer threads).
fn named_like_a_kernel_thread(comm: &[u8]) -> bool {
    let name = String::from_utf8_lossy(comm);
    const FAMILIES: &[&str] = &[
        "migration/",
        "ksoftirqd/",
        "kworker/",
        "irq/",
        "rcuc/",
        "rcuop/",
        "rcuog/",
        "ktimers/",
        "cpuhp/",
        "watchdog/",
        "idle_inject/",
        "posixcputmr/",
    ];
    FAMILIES.iter().any(|f| name.starts_with(f))
        || matches!(name.as_ref(), "rcu_preempt" | "rcu_sched" | "kthreadd")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_threads_cut_name_is_completed_from_proc_irq() {
        // /proc/irq/N/ holds a directory per action (and files beside it).
        let dir = tempfile::tempdir().unwrap();
        let irq = dir.path().join("irq/16");
        fs::create_dir_all(irq.join("rtc-pl031")).unwrap();
        fs::write(irq.join("smp_affinity_list"), "0-1\n").unwrap();
        fs::create_dir_all(dir.path().join("irq/24/virtio0-config")).unwrap();
        fs::create_dir_all(dir.path().join("irq/24/virtio0-req")).unwrap();
        let mut tasks = ProcTasks::new(dir.path());
        assert_eq!(
            tasks.irq_action(16, "rtc-pl03").as_deref(),
            Some("rtc-pl031")
        );
        // Two actions the cut name could be: neither is guessed.
        assert_eq!(tasks.irq_action(24, "virtio0-"), None);
        assert_eq!(
            tasks.irq_action(24, "virtio0-req").as_deref(),
            Some("virtio0-req")
        );
        assert_eq!(tasks.irq_action(9, "acpi"), None);
    }

    #[test]
    fn tasks_are_read_from_proc_once_and_again_when_the_pid_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("77");
        std::fs::create_dir(&task).unwrap();
        std::fs::write(task.join("stat"), "77 (kthreadd) S 0 0 0 0 -1 2129984 0").unwrap();
        std::fs::write(task.join("cgroup"), "0::/\n").unwrap();
        let mut tasks = ProcTasks::new(dir.path());
        assert!(tasks.is_kernel_thread(77, b"kthreadd"));
        // Cached: the file changing does not matter for the same task...
        std::fs::write(task.join("stat"), "77 (rtapp) S 0 0 0 0 -1 0 0").unwrap();
        assert!(tasks.is_kernel_thread(77, b"kthreadd"));
        // ...but a new name on the pid is a new task.
        assert!(!tasks.is_kernel_thread(77, b"rtapp"));
        // A task gone (or hidden): a user task of no container, unless
        // its name is a kernel thread's.
        assert!(!tasks.is_kernel_thread(78, b"gone"));
        assert_eq!(tasks.container(78, b"gone"), "");
        assert!(tasks.is_kernel_thread(79, b"migration/3"));
        assert!(tasks.is_kernel_thread(80, b"irq/24-virtio0"));
        assert!(!tasks.is_kernel_thread(81, b"irqbalance"));
    }

    #[test]
    fn latencyds_own_threads_and_its_childrens_are_told_from_the_workload() {
        let dir = tempfile::tempdir().unwrap();
        let task = |tid: i32, comm: &str, tgid: i32, ppid: i32| {
            let path = dir.path().join(tid.to_string());
            std::fs::create_dir(&path).unwrap();
            let stat = format!("{tid} ({comm}) S {ppid} 0 0 0 -1 4194560 0");
            std::fs::write(path.join("stat"), stat).unwrap();
            let status = format!("Name:\t{comm}\nTgid:\t{tgid}\nPid:\t{tid}\nPPid:\t{ppid}\n");
            std::fs::write(path.join("status"), status).unwrap();
        };
        // latencyd is 500 (its parent systemd, 1); its poller, thread 503;
        // its timerlat workload, process 600 with thread 601; a workload
        // process 700, and its thread 701, started by systemd.
        task(503, "poll-cpu1", 500, 1);
        task(601, "timerlat-cpu1", 600, 500);
        task(700, "rtapp", 700, 1);
        task(701, "rtapp-worker", 700, 1);
        let mut tasks = ProcTasks::of(dir.path(), 500);
        assert!(tasks.is_own(503, b"poll-cpu1"));
        assert!(tasks.is_own(601, b"timerlat-cpu1"));
        assert!(!tasks.is_own(700, b"rtapp"));
        assert!(!tasks.is_own(701, b"rtapp-worker"));
        assert!(!tasks.is_own(999, b"gone"), "a task gone is not latencyd's");
        // The real /proc: this test's own thread is its process's.
        let tid = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse::<i32>().ok());
        if let Some(tid) = tid {
            let comm = std::fs::read(format!("/proc/{tid}/comm")).unwrap_or_default();
            let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
            assert!(ProcTasks::new(Path::new("/proc")).is_own(tid, comm));
        }
    }
}
