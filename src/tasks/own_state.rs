//! Why a stalled sampler did not run, from its own thread first: stopped
//! (`SIGSTOP`, a debugger), frozen by the cgroup freezer, demoted to a
//! normal policy, or moved off its CPU. Only when none of these holds is
//! another task on the CPU named (`tasks::runnable_on`): a normal task
//! cannot hold a FIFO 80 thread, and naming one would mislead.

use std::fs;
use std::io::Read;
use std::path::Path;

/// The most of a `stat` or `cgroup` file read.
const MAX_BYTES: u64 = 64 * 1024;

fn read_small(path: &Path) -> Option<String> {
    let mut text = String::new();
    fs::File::open(path)
        .ok()?
        .take(MAX_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// What keeps thread `tid` (a sampler pinned to `cpu`, real-time when
/// `realtime`) from running, by its own state under `proc` (`/proc`) and
/// the cgroup tree under `cgroup_root` (`/sys/fs/cgroup`); `None` when its
/// own state explains nothing (or cannot be read).
pub fn own_state(
    proc: &Path,
    cgroup_root: &Path,
    tid: i32,
    cpu: usize,
    realtime: bool,
) -> Option<String> {
    if tid <= 0 {
        return None;
    }
    let stat = read_small(&proc.join(tid.to_string()).join("stat"))?;
    let close = stat.rfind(')')?;
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // fields[0] is field 3.
    let field = |n: usize| fields.get(n - 3).copied();
    match field(3)? {
        "T" => return Some("its own thread is stopped (SIGSTOP or a job-control stop)".into()),
        "t" => return Some("its own thread is stopped by a tracer (a debugger or strace)".into()),
        "Z" | "X" => return Some("its own thread has exited".into()),
        _ => {}
    }
    if let Some(frozen) = frozen_cgroup(proc, cgroup_root, tid) {
        return Some(format!(
            "its own thread is frozen by the cgroup freezer ({frozen})"
        ));
    }
    let on: usize = field(39)?.parse().ok()?;
    if on != cpu {
        return Some(format!(
            "its own thread was moved off CPU {cpu} to CPU {on}"
        ));
    }
    let rt_priority: u32 = field(40)?.parse().ok()?;
    let policy: u32 = field(41)?.parse().ok()?;
    if realtime && (rt_priority == 0 || !matches!(policy, 1 | 2)) {
        return Some(format!(
            "its own thread was demoted to {} (policy {policy})",
            if rt_priority == 0 {
                "a normal policy"
            } else {
                "another policy"
            }
        ));
    }
    None
}

/// The cgroup of `tid` that is frozen, if one is: the v1 freezer
/// hierarchy (`freezer.state` FROZEN or FREEZING, under
/// `cgroup_root/freezer`), or cgroup v2 (`frozen 1` in `cgroup.events`,
/// the cgroup's own or one above it, under `cgroup_root` or, on a hybrid
/// host, `cgroup_root/unified`).
fn frozen_cgroup(proc: &Path, cgroup_root: &Path, tid: i32) -> Option<String> {
    let cgroups = read_small(&proc.join(tid.to_string()).join("cgroup"))?;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?.trim());
        let relative = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "freezer") {
            let state = read_small(
                &cgroup_root
                    .join("freezer")
                    .join(relative)
                    .join("freezer.state"),
            );
            if state.is_some_and(|s| matches!(s.trim(), "FROZEN" | "FREEZING")) {
                return Some(format!("freezer {path}"));
            }
        } else if controllers.is_empty() {
            for base in [cgroup_root.to_path_buf(), cgroup_root.join("unified")] {
                if frozen_v2(&base, relative) {
                    return Some(path.to_string());
                }
            }
        }
    }
    None
}

/// Whether the v2 cgroup `relative` under `base`, or one above it, is
/// frozen.
fn frozen_v2(base: &Path, relative: &str) -> bool {
    let mut dir = base.join(relative);
    loop {
        if read_small(&dir.join("cgroup.events"))
            .is_some_and(|events| events.lines().any(|l| l.trim() == "frozen 1"))
        {
            return true;
        }
        if dir == base || !dir.pop() {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's `stat` with its state, CPU, priority and policy.
    fn stat(tid: i32, state: &str, cpu: u32, prio: u32, policy: u32) -> String {
        let mut fields = vec!["0".to_string(); 50];
        fields[0] = state.to_string();
        fields[36] = cpu.to_string();
        fields[37] = prio.to_string();
        fields[38] = policy.to_string();
        format!("{tid} (sampler-cpu1) {}", fields.join(" "))
    }

    #[test]
    fn a_stalled_samplers_own_state_is_said_before_any_other_task() {
        let root = tempfile::tempdir().unwrap();
        let (proc, cgroups) = (root.path().join("proc"), root.path().join("cgroup"));
        let thread = proc.join("77");
        fs::create_dir_all(&thread).unwrap();
        fs::create_dir_all(cgroups.join("system.slice/latencyd.service")).unwrap();
        fs::write(thread.join("cgroup"), "0::/system.slice/latencyd.service\n").unwrap();
        let said = |line: String| {
            fs::write(thread.join("stat"), line).unwrap();
            own_state(&proc, &cgroups, 77, 1, true)
        };
        assert_eq!(
            said(stat(77, "R", 1, 80, 1)),
            None,
            "runnable as set: not its own doing"
        );
        assert!(
            said(stat(77, "T", 1, 80, 1))
                .unwrap()
                .contains("stopped (SIGSTOP")
        );
        assert!(
            said(stat(77, "t", 1, 80, 1))
                .unwrap()
                .contains("by a tracer")
        );
        assert!(
            said(stat(77, "R", 0, 80, 1))
                .unwrap()
                .contains("moved off CPU 1 to CPU 0")
        );
        assert!(said(stat(77, "R", 1, 0, 0)).unwrap().contains("demoted"));
        // Frozen above its own cgroup.
        fs::write(
            cgroups.join("system.slice/cgroup.events"),
            "populated 1\nfrozen 1\n",
        )
        .unwrap();
        let frozen = said(stat(77, "S", 1, 80, 1)).unwrap();
        assert!(
            frozen.contains("frozen by the cgroup freezer (/system.slice/latencyd.service)"),
            "{frozen}"
        );
        // The v1 freezer hierarchy.
        fs::write(cgroups.join("system.slice/cgroup.events"), "frozen 0\n").unwrap();
        fs::create_dir_all(cgroups.join("freezer/lat")).unwrap();
        fs::write(cgroups.join("freezer/lat/freezer.state"), "FROZEN\n").unwrap();
        fs::write(thread.join("cgroup"), "6:freezer:/lat\n0::/\n").unwrap();
        let frozen = said(stat(77, "D", 1, 80, 1)).unwrap();
        assert!(frozen.contains("(freezer /lat)"), "{frozen}");
        fs::write(cgroups.join("freezer/lat/freezer.state"), "THAWED\n").unwrap();
        assert_eq!(said(stat(77, "R", 1, 80, 1)), None);
        assert_eq!(
            own_state(&proc, &cgroups, 78, 1, true),
            None,
            "gone: unknown"
        );
    }
}
