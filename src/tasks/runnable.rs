//! Which tasks are runnable on a CPU now, read from every task's `stat`:
//! what holds a CPU whose sampler stalled (the daemon's gap explainer).

use std::fs;
use std::path::Path;

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
}
