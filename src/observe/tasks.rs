//! Who a task is, from `/proc`: whether it is a kernel thread (its
//! `PF_KTHREAD` flag), and the container or systemd unit its cgroup path
//! names. Read once per task on the observer thread and cached; a task
//! gone before it is read is taken for a user task of no container. And
//! which tasks are runnable on a CPU now (`runnable_on`), to say what
//! holds a CPU whose sampler stalled.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::tally::{Comm, TaskKinds};
use crate::files::{MAX_KERNEL_FILE_BYTES, read_kernel_text};

/// A task found runnable on a CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runnable {
    pub pid: i32,
    pub comm: String,
    /// `SCHED_FIFO`, `SCHED_RR`, `SCHED_OTHER`, ...
    pub policy: &'static str,
    /// Its real-time priority (0 for the normal policies).
    pub rt_priority: u32,
}

impl Runnable {
    /// `SCHED_FIFO 90 task spin (pid 1234)`.
    pub fn describe(&self) -> String {
        if self.rt_priority > 0 {
            format!(
                "{} {} task {} (pid {})",
                self.policy, self.rt_priority, self.comm, self.pid
            )
        } else {
            format!("{} task {} (pid {})", self.policy, self.comm, self.pid)
        }
    }
}

/// The tasks under `root` (`/proc`) that are runnable (state `R`) and
/// last ran on `cpu`, highest real-time priority first, but for `skip`
/// (the stalled sampler itself). Reads every task's `stat`: a few ms on a
/// busy host; for the blocking pool, when a sampler has stalled.
pub fn runnable_on(root: &Path, cpu: usize, skip: i32) -> Vec<Runnable> {
    let mut found = Vec::new();
    let Ok(processes) = fs::read_dir(root) else {
        return found;
    };
    for process in processes.flatten() {
        let Ok(tasks) = fs::read_dir(process.path().join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(stat) = read_kernel_text(&task.path().join("stat"), MAX_KERNEL_FILE_BYTES)
            else {
                continue;
            };
            if let Some(runnable) = parse_runnable(&stat, cpu)
                && runnable.pid != skip
            {
                found.push(runnable);
            }
        }
    }
    found.sort_by(|a, b| b.rt_priority.cmp(&a.rt_priority).then(a.pid.cmp(&b.pid)));
    found
}

/// A `stat` line's task if it is runnable and last ran on `cpu`: fields
/// 3 (state), 39 (processor), 40 (rt_priority), 41 (policy).
pub(crate) fn parse_runnable(stat: &str, cpu: usize) -> Option<Runnable> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let pid = stat[..open].trim().parse().ok()?;
    let comm = stat.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // fields[0] is field 3.
    let field = |n: usize| fields.get(n - 3).copied();
    if field(3)? != "R" || field(39)?.parse::<usize>().ok()? != cpu {
        return None;
    }
    let policy = match field(41)?.parse::<u32>().ok()? {
        0 => "SCHED_OTHER",
        1 => "SCHED_FIFO",
        2 => "SCHED_RR",
        3 => "SCHED_BATCH",
        5 => "SCHED_IDLE",
        6 => "SCHED_DEADLINE",
        _ => "SCHED_?",
    };
    Some(Runnable {
        pid,
        comm,
        policy,
        rt_priority: field(40)?.parse().ok()?,
    })
}

/// `PF_KTHREAD` in `/proc/PID/stat`'s flags (field 9).
const PF_KTHREAD: u64 = 0x0020_0000;
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

/// A number field of `/proc/PID/status` (`Tgid:`), when it has one.
fn status_field(status: &str, name: &str) -> Option<i32> {
    let line = status.lines().find(|line| line.starts_with(name))?;
    line[name.len()..].trim().parse().ok()
}

/// The flags field of `/proc/PID/stat` (after the parenthesised name,
/// which may itself hold spaces and parentheses).
fn stat_flags(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // state ppid pgrp session tty_nr tpgid flags
    rest.split_whitespace().nth(6)?.parse().ok()
}

/// What a cgroup path says the task runs in: a Kubernetes pod's container
/// (`pod<uid>/<container id, 12 characters>`), a container engine's
/// scope (`docker-<id>`, `libpod-<id>`, 12 characters of the id), or a
/// systemd service (`name.service`); empty for anything else (a login
/// session, the root cgroup).
pub fn container_of(cgroup: &str) -> String {
    // cgroup v2's line `0::/path`, else the first v1 hierarchy's path.
    let path = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .or_else(|| cgroup.lines().find_map(|l| l.splitn(3, ':').nth(2)))
        .unwrap_or("");
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let short = |id: &str| id.chars().take(12).collect::<String>();
    let container_id = |part: &str| -> Option<String> {
        let id = part.strip_suffix(".scope").unwrap_or(part);
        let id = id.rsplit_once('-').map_or(id, |(_, id)| id);
        (id.len() >= 12 && id.chars().all(|c| c.is_ascii_hexdigit())).then(|| short(id))
    };
    if let Some(at) = parts
        .iter()
        .position(|p| p.starts_with("pod") || p.contains("-pod"))
    {
        let pod = parts[at];
        // systemd driver: kubepods-besteffort-pod<uid with _>.slice;
        // cgroupfs driver: pod<uid>.
        let uid = pod
            .strip_suffix(".slice")
            .unwrap_or(pod)
            .rsplit_once("pod")
            .map_or(pod, |(_, uid)| uid)
            .replace('_', "-");
        if !uid.is_empty() && parts[0].starts_with("kubepods") {
            return match parts.get(at + 1).and_then(|p| container_id(p)) {
                Some(id) => format!("pod{uid}/{id}"),
                None => format!("pod{uid}"),
            };
        }
    }
    if let Some(last) = parts.last() {
        for engine in ["docker-", "libpod-", "cri-containerd-", "crio-"] {
            if last.starts_with(engine)
                && let Some(id) = container_id(last)
            {
                return format!("{}{id}", engine);
            }
        }
        if last.ends_with(".service") {
            return last.to_string();
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runnable_task_on_the_cpu_is_found_with_its_policy() {
        let stat = |pid: i32, comm: &str, state: &str, cpu: u32, prio: u32, policy: u32| {
            let mut fields = vec!["0".to_string(); 50];
            fields[0] = state.to_string();
            fields[36] = cpu.to_string();
            fields[37] = prio.to_string();
            fields[38] = policy.to_string();
            format!("{pid} ({comm}) {}", fields.join(" "))
        };
        let spin = parse_runnable(&stat(42, "rt spin) x", "R", 1, 90, 1), 1).unwrap();
        assert_eq!(spin.describe(), "SCHED_FIFO 90 task rt spin) x (pid 42)");
        assert!(
            parse_runnable(&stat(42, "spin", "S", 1, 90, 1), 1).is_none(),
            "sleeping"
        );
        assert!(
            parse_runnable(&stat(42, "spin", "R", 0, 90, 1), 1).is_none(),
            "other CPU"
        );
        let other = parse_runnable(&stat(7, "make", "R", 1, 0, 0), 1).unwrap();
        assert_eq!(other.describe(), "SCHED_OTHER task make (pid 7)");
        // A directory standing for /proc.
        let root = tempfile::tempdir().unwrap();
        for (pid, line) in [
            (42, stat(42, "spin", "R", 1, 90, 1)),
            (7, stat(7, "make", "R", 1, 0, 0)),
        ] {
            let dir = root.path().join(format!("{pid}/task/{pid}"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("stat"), line).unwrap();
        }
        let found: Vec<i32> = runnable_on(root.path(), 1, 0)
            .iter()
            .map(|r| r.pid)
            .collect();
        assert_eq!(found, vec![42, 7], "highest priority first");
        assert_eq!(
            runnable_on(root.path(), 1, 42).len(),
            1,
            "the sampler itself skipped"
        );
    }

    #[test]
    fn cgroup_paths_name_pods_engines_and_units() {
        assert_eq!(
            container_of(
                "0::/kubepods.slice/kubepods-pod1234abcd_5678_90ab_cdef_001122334455.slice/\
                 cri-containerd-0123456789abcdef0123.scope\n"
            ),
            "pod1234abcd-5678-90ab-cdef-001122334455/0123456789ab"
        );
        assert_eq!(
            container_of("0::/kubepods/burstable/podaaaa-bbbb/fedcba9876543210fedc\n"),
            "podaaaa-bbbb/fedcba987654"
        );
        assert_eq!(
            container_of("0::/system.slice/docker-0123456789abcdef99.scope\n"),
            "docker-0123456789ab"
        );
        assert_eq!(
            container_of("0::/system.slice/latencyd.service\n"),
            "latencyd.service"
        );
        assert_eq!(
            container_of("0::/user.slice/user-0.slice/session-3.scope\n"),
            ""
        );
        assert_eq!(
            container_of("12:cpuset:/system.slice/rtapp.service\n"),
            "rtapp.service"
        );
        assert_eq!(container_of(""), "");
    }

    #[test]
    fn stat_flags_are_read_past_a_name_with_spaces_and_parentheses() {
        // A kworker's flags, as a 6.18 guest kernel shows them.
        let stat = "42 (kworker/1:1 (x)) I 2 0 0 0 -1 69238880 0 0";
        let flags = stat_flags(stat).unwrap();
        assert_eq!(flags, 69_238_880);
        assert_ne!(flags & PF_KTHREAD, 0);
        assert_eq!(stat_flags("garbage"), None);
    }

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
