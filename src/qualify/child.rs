//! A phase's tool in a child process, kept to its time: it runs in a
//! process group of its own (a terminal's Ctrl-C reaches qualify alone),
//! qualify's first stop signal is passed on to it once (it ends with what
//! it measured), and a child that has not ended well past its duration
//! (a tracer that does not let go, a task stuck in the kernel) is asked
//! to stop, then killed with everything it started: a qualification in a
//! pipeline ends, and says which phase held it.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::load::{hear_stop_signals, signal_group, signal_process};

/// How often a running child is looked at.
const WAIT_STEP: Duration = Duration::from_millis(50);

/// How long a child told to stop (SIGINT) has to end before it is killed.
pub const KILL_AFTER: Duration = Duration::from_secs(10);

/// How long a tool measuring for `runtime_s` may take in all: its
/// duration, one minute to start and end (tracers set up and set back,
/// captures read, the JSON written), and 1 % of the duration for a long
/// run's own drift.
pub fn allowance(runtime_s: u64) -> Duration {
    Duration::from_secs(runtime_s + 60 + runtime_s / 100)
}

/// How a child ended.
#[derive(Debug)]
pub enum Ended {
    /// On its own, or on the stop signal passed on to it.
    Exited(ExitStatus),
    /// Still running at its allowance: stopped, and killed if need be.
    Overran { killed: bool },
}

/// Runs `exe` with `args`, its output into `log`, until it ends, at most
/// `allowance` (then `kill_after` more after a SIGINT, [`KILL_AFTER`] in
/// qualify, then SIGKILL to its group).
pub fn run(
    exe: &Path,
    args: &[String],
    log: &Path,
    (allowance, kill_after): (Duration, Duration),
    stop: &AtomicBool,
) -> std::io::Result<Ended> {
    let out = std::fs::File::create(log)?;
    let mut command = Command::new(exe);
    (command.args(args).stdin(Stdio::null()))
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0);
    // It is stopped with SIGINT, whatever latencyd was started with.
    hear_stop_signals(&mut command);
    let mut child = command.spawn()?;
    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    let began = Instant::now();
    let mut passed_on = false;
    let mut told_at: Option<Instant> = None;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(match told_at {
                Some(_) => Ended::Overran { killed: false },
                None => Ended::Exited(status),
            });
        }
        if !passed_on && told_at.is_none() && stop.load(Ordering::Relaxed) {
            passed_on = true;
            signal_process(pid, signal_hook::consts::SIGINT)?;
        }
        match told_at {
            None if began.elapsed() >= allowance => {
                told_at = Some(Instant::now());
                signal_process(pid, signal_hook::consts::SIGINT)?;
            }
            Some(at) if at.elapsed() >= kill_after => {
                // The group: what the tool started (load generators, its
                // workload process) goes with it.
                let _ = signal_group(pid, signal_hook::consts::SIGKILL);
                child.wait()?;
                return Ok(Ended::Overran { killed: true });
            }
            _ => {}
        }
        std::thread::sleep(WAIT_STEP);
    }
}

/// What happened, for the phase's "could not measure".
pub fn overran(what: &str, allowance: Duration, killed: bool) -> String {
    format!(
        "{what} had not ended {} s after it started (its duration and a minute): it was \
         stopped ({}); the phase could not measure. Its log says where it was",
        allowance.as_secs(),
        if killed {
            format!(
                "SIGINT, then SIGKILL to its process group {} s later",
                KILL_AFTER.as_secs()
            )
        } else {
            "SIGINT".to_string()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, body: &str) -> std::path::PathBuf {
        let path = dir.join("tool");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn a_tool_that_ends_in_time_gives_its_status() {
        let dir = tempfile::tempdir().unwrap();
        let exe = script(dir.path(), "echo measured; exit 3");
        let log = dir.path().join("log");
        let stop = AtomicBool::new(false);
        let ended = run(
            &exe,
            &[],
            &log,
            (Duration::from_secs(30), KILL_AFTER),
            &stop,
        )
        .unwrap();
        assert!(
            matches!(&ended, Ended::Exited(s) if s.code() == Some(3)),
            "{ended:?}"
        );
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "measured\n");
    }

    #[test]
    fn a_tool_past_its_allowance_is_stopped_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        // Ends on SIGINT, as latencyd's tools do.
        let exe = script(
            dir.path(),
            "trap 'echo stopped; exit 0' INT\nsleep 30 & wait",
        );
        let log = dir.path().join("log");
        let stop = AtomicBool::new(false);
        let began = Instant::now();
        let limits = (Duration::from_millis(300), Duration::from_secs(20));
        let ended = run(&exe, &[], &log, limits, &stop).unwrap();
        assert!(
            matches!(ended, Ended::Overran { killed: false }),
            "{ended:?}"
        );
        assert!(began.elapsed() < limits.1, "{:?}", began.elapsed());
        assert!(std::fs::read_to_string(&log).unwrap().contains("stopped"));
    }

    #[test]
    fn a_tool_that_ignores_the_stop_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        let exe = script(
            dir.path(),
            &format!(
                "trap '' INT\nsleep 300 &\necho $! > {}\nwait",
                pid_file.display()
            ),
        );
        let log = dir.path().join("log");
        let stop = AtomicBool::new(false);
        let limits = (Duration::from_millis(200), Duration::from_millis(500));
        let ended = run(&exe, &[], &log, limits, &stop).unwrap();
        assert!(
            matches!(ended, Ended::Overran { killed: true }),
            "{ended:?}"
        );
        let grandchild: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed with the group, then reaped by init: gone within moments.
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::path::Path::new(&format!("/proc/{grandchild}")).exists()
            && std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .is_ok_and(|s| !s.contains(") Z "))
        {
            assert!(
                Instant::now() < deadline,
                "the tool's own child {grandchild} outlived it"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let said = overran("latencyd measure -D 1", Duration::from_secs(61), true);
        assert!(
            said.contains("61 s") && said.contains("SIGKILL to its process group 10 s"),
            "{said}"
        );
    }

    #[test]
    fn the_allowance_is_the_duration_a_minute_and_one_percent() {
        assert_eq!(allowance(300), Duration::from_secs(363));
        assert_eq!(allowance(86_400), Duration::from_secs(86_400 + 60 + 864));
    }
}
