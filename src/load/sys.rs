//! The kernel calls the load generators need (the one place outside
//! latencyd-rt's `sys/` with `unsafe` and `libc`): the generators must not outlive
//! latencyd, so they run in one process group led by a guard process, and
//! these calls put them there, move them off real-time scheduling, signal
//! the group and check that it is gone. Every child latencyd stops with a
//! signal (these, and qualify's tools) hears it (`hear_stop_signals`).

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::files::{MAX_KERNEL_FILE_BYTES, read_kernel_text};

/// Prepares `command` to start in the process group `group` (0: a new
/// group led by the child itself), on `cpus` only, under `SCHED_OTHER`
/// whatever the caller's policy (a harness may run latencyd under
/// `chrt`, and children inherit the policy).
pub fn prepare_child(command: &mut Command, group: i32, cpus: &[usize]) -> io::Result<()> {
    let set = crate::rt::sys::cpu_set_of(cpus)?;
    let any_cpu = !cpus.is_empty();
    command.process_group(group);
    hear_stop_signals(command);
    // SAFETY: the closure runs between fork and exec and calls only
    // async-signal-safe system calls on data prepared before the fork.
    unsafe {
        command.pre_exec(move || {
            if any_cpu
                && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if libc::sched_getscheduler(0) != libc::SCHED_OTHER {
                let param = libc::sched_param { sched_priority: 0 };
                if libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok(())
}

/// Prepares `command` so that its child hears the signals latencyd stops
/// children with: SIGINT and SIGQUIT back to their default action. A
/// latencyd started in the background by a script (`latencyd qualify &`:
/// both ignored) would otherwise hand them on ignored, and a child cannot
/// undo that everywhere: a shell script cannot trap a signal ignored on
/// entry, Python does not raise KeyboardInterrupt for one, and a program
/// without a handler never hears it. The stop would then wait for its
/// SIGKILL, and a tool killed so leaves what it set (a tracer) behind.
pub fn hear_stop_signals(command: &mut Command) {
    // SAFETY: the closure runs between fork and exec and calls only
    // signal(), which is async-signal-safe and takes no memory arguments.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
}

/// Sends `signal` to one process.
pub fn signal_process(pid: i32, signal: i32) -> io::Result<()> {
    // SAFETY: kill has no memory arguments.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `signal` to every process of the group `group`.
pub fn signal_group(group: i32, signal: i32) -> io::Result<()> {
    if group <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{group} is not a process group latencyd started"),
        ));
    }
    signal_process(-group, signal)
}

/// Whether any process (zombies included) is left in the group:
/// `kill(…, 0)` answers EPERM for processes that exist but are not ours
/// to signal, and ESRCH when there are none.
pub fn group_exists(group: i32) -> bool {
    if group <= 1 {
        return false;
    }
    match signal_process(-group, 0) {
        Ok(()) => true,
        Err(err) => err.raw_os_error() == Some(libc::EPERM),
    }
}

/// The processes whose `/proc/PID/stat` field `field` (counted after
/// the command name: 0 state, 1 ppid, 2 pgrp) is `value`.
fn processes_with_stat(field: usize, value: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            let stat = format!("/proc/{pid}/stat");
            read_kernel_text(Path::new(&stat), MAX_KERNEL_FILE_BYTES)
                .ok()
                .and_then(|stat| {
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace().nth(field)?.parse::<i32>().ok()
                })
                == Some(value)
        })
        .collect()
}

/// The process IDs whose process group is `group`, read from `/proc`
/// (for proofs and messages: which generators are still there).
pub fn group_members(group: i32) -> Vec<i32> {
    processes_with_stat(2, group)
}

/// The children of `pid` (its threads' children), read from `/proc`.
pub fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let listed: Vec<i32> = tasks
        .filter_map(Result::ok)
        .filter_map(|task| {
            read_kernel_text(&task.path().join("children"), MAX_KERNEL_FILE_BYTES).ok()
        })
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    if listed.is_empty() {
        // Without CONFIG_PROC_CHILDREN: every process whose parent it is.
        return processes_with_stat(1, pid);
    }
    listed
}

/// The guard's part (`latencyd load-guard`): refuses unless it leads its
/// own process group and its standard input is a pipe (so that it can
/// never take a shell's group down with it), then blocks until the pipe's
/// other end closes — latencyd stopped the load, or died, SIGKILL
/// included — runs `before_kill`, and kills its whole group, itself
/// last. Returns only on refusal.
pub fn guard_group(before_kill: impl FnOnce()) -> io::Error {
    // SAFETY: getpgrp and getpid have no arguments.
    let (group, pid) = unsafe { (libc::getpgrp(), libc::getpid()) };
    if group != pid {
        return io::Error::other(
            "load-guard must lead its own process group; latencyd starts it itself",
        );
    }
    // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `stat` is a valid out-buffer for fstat.
    let failed = unsafe { libc::fstat(0, &mut stat) } != 0;
    if failed || stat.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return io::Error::other("load-guard's standard input must be latencyd's pipe");
    }
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: `buf` is valid for its length.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 {
            break;
        }
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    before_kill();
    // SAFETY: kill has no memory arguments; 0 is the caller's own group.
    unsafe { libc::kill(0, libc::SIGKILL) };
    io::Error::other("load-guard: kill(0, SIGKILL) returned")
}

/// The signal numbers the load module uses, so that libc stays here.
pub const SIGINT: i32 = libc::SIGINT;
pub const SIGKILL: i32 = libc::SIGKILL;
pub const SIGSTOP: i32 = libc::SIGSTOP;

#[cfg(test)]
mod tests {
    use super::*;

    /// The `SigIgn` mask of a shell started by `command`, which first
    /// ignores SIGINT and SIGQUIT as a caller in the background hands
    /// them on (that is the inheritance, set in the child).
    fn ignored_in_child(hear: bool) -> u64 {
        let mut command = Command::new("sh");
        command.args(["-c", "grep SigIgn /proc/self/status"]);
        // SAFETY: signal() is async-signal-safe and takes no memory
        // arguments.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGQUIT, libc::SIG_IGN);
                Ok(())
            });
        }
        if hear {
            hear_stop_signals(&mut command);
        }
        let out = command.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mask = text.trim().trim_start_matches("SigIgn:").trim();
        u64::from_str_radix(mask, 16).unwrap()
    }

    #[test]
    fn a_child_hears_sigint_and_sigquit_even_when_they_reach_it_ignored() {
        let bits = (1 << (libc::SIGINT - 1)) | (1 << (libc::SIGQUIT - 1));
        assert_eq!(
            ignored_in_child(false) & bits,
            bits,
            "the inheritance as set up"
        );
        assert_eq!(
            ignored_in_child(true) & bits,
            0,
            "set back to their default"
        );
    }
}
