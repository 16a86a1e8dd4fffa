//! `latencyd oslat` (beside the real oslat in tests/full/oslat.rs): `-T`
//! stops, marks and says so; bad values name their fix; a user without
//! real-time privileges gets the non-real-time path.

mod common;

use common::oslat::*;
use common::{latencyd, one_at_a_time, privileged, report_skip, stderr_of, stdout_of};

#[test]
fn a_trace_threshold_stops_the_run_says_where_and_keeps_the_summary() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tripped.json");
    let cpu = poll_cpu();
    let output = latencyd()
        .args(["oslat", "-c", &cpu, "-D", "30", "-T", "1", "-q"])
        .arg(format!("--json={}", json.display()))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    // The gap that tripped it is whatever this machine gave first above
    // 1 us; the run stops there, so it is also the maximum.
    let stderr = stderr_of(&output);
    let says = format!("Trace threshold (1 us) triggered on cpu {cpu} with ");
    let gap: u64 = stderr
        .split_once(&says)
        .and_then(|(_, rest)| rest.split_once(" us!"))
        .and_then(|(us, _)| us.parse().ok())
        .unwrap_or_else(|| panic!("no '{says}<N> us!' in: {stderr}"));
    assert!(gap >= 1, "{stderr}");
    assert!(
        stdout_of(&output).contains(&format!("     Maximum:\t {gap} (us)")),
        "{}",
        stdout_of(&output)
    );
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(document["return_code"], 1);
    assert_eq!(document["latencyd"]["tripped"]["cpu"].to_string(), cpu);
}

#[test]
fn bad_values_exit_2_naming_the_option_and_its_fix() {
    for (args, says) in [
        (
            &["-b", "2000"][..],
            "-b/--bucket-size \"2000\": give a number of buckets from 4 to 1024",
        ),
        (
            &["-D", "5x"][..],
            "-D/--duration \"5x\": give a time above 0",
        ),
        (
            &["-c", "1000"][..],
            "CPU 1000 is not one this process may use",
        ),
        (
            &["--rtprio=0"][..],
            "-f/--rtprio \"0\": give a priority from 1 to 99",
        ),
    ] {
        let output = latencyd().arg("oslat").args(args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr_of(&output)
        );
        assert!(
            stderr_of(&output).contains(says),
            "{args:?}: {}",
            stderr_of(&output)
        );
    }
    // getopt's forms: joined letters and an abbreviated long name.
    let output = latencyd()
        .args(["oslat", "-qzv", "--bucket-s=8"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        stdout_of(&output).lines().count(),
        1,
        "-v prints the version only"
    );
}

#[test]
fn without_real_time_privileges_it_polls_and_refuses_fifo_by_name() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let Some(mut cmd) = common::unprivileged_latencyd(dir.path(), false) else {
        unreachable!("without keep_sys_nice there is always a command");
    };
    let cpu = poll_cpu();
    let output = cmd
        .args(["oslat", "-c", &cpu, "-D", "1", "-q"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(
        stdout_of(&output).contains("     Maximum:\t "),
        "{}",
        stdout_of(&output)
    );
    let Some(mut cmd) = common::unprivileged_latencyd(dir.path(), false) else {
        unreachable!();
    };
    let output = cmd
        .args(["oslat", "-c", &cpu, "-D", "1", "-f", "1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stdout_of(&output));
    let says = format!("CPU {cpu}: setting SCHED_FIFO:");
    assert!(stderr_of(&output).contains(&says), "{}", stderr_of(&output));
    if !privileged() {
        report_skip(
            "oslat::without_real_time_privileges",
            "not root: SCHED_FIFO polling was not tried with privileges",
        );
        return;
    }
    // With privileges the same -f 1 polls under SCHED_FIFO and says so.
    let output = latencyd()
        .args(["oslat", "-c", &cpu, "-D", "1", "-f", "1"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(
        stdout_of(&output).contains("Thread priority: \tSCHED_FIFO:1\n"),
        "{}",
        stdout_of(&output)
    );
    assert!(
        stdout_of(&output).contains("     Maximum:\t "),
        "{}",
        stdout_of(&output)
    );
}

/// The daemon's `[busypoll]` windows on a CPU no sampler measures: a
/// window polls, its longest gap and its gaps arrive in the families, the
/// status and the page, and the next window is announced. Needs two
/// usable CPUs (one sampled, one polled).
#[test]
fn the_daemons_busy_poll_windows_poll_a_cpu_no_sampler_measures() {
    let _one = one_at_a_time();
    let usable = latencyd::host::HostInfo::detect().usable_cpus;
    let (Some(&sampled), Some(&polled)) = (usable.first(), usable.last()) else {
        unreachable!("a process has a CPU");
    };
    if sampled == polled {
        report_skip(
            "the_daemons_busy_poll_windows_poll_a_cpu_no_sampler_measures",
            "one usable CPU: none is left to poll beside the sampler",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = common::daemon_config(
        dir.path(),
        &format!("cpus = \"{sampled}\""),
        "",
        &format!(
            "[busypoll]\nenabled = true\ncpus = \"{polled}\"\nevery = \"3s\"\nat = \"0s\"\n\
             duration = \"1s\"\nthreshold = \"1us\"\n"
        ),
    );
    let daemon = common::Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    let windows = |scrape: &str| common::metric_value(scrape, "latencyd_busypoll_windows_total");
    let mut scrape = String::new();
    common::wait_until(
        "a busy-poll window",
        std::time::Duration::from_millis(200),
        std::time::Duration::from_secs(15),
        || {
            scrape = daemon.get("/metrics").1;
            windows(&scrape).is_some_and(|n| n >= 1.0)
        },
    );
    let cpu = format!("{{cpu=\"{polled}\"}}");
    let max = common::metric_value(&scrape, &format!("latencyd_busypoll_gap_max_seconds{cpu}"))
        .expect("the longest gap of the polled CPU");
    let count = common::metric_value(
        &scrape,
        &format!("latencyd_busypoll_gap_seconds_count{cpu}"),
    )
    .expect("the polled CPU's gaps");
    assert!(max > 0.0 && count > 1_000.0, "{max} {count}");
    assert!(!scrape.contains(&format!(
        "latencyd_busypoll_gap_max_seconds{{cpu=\"{sampled}\"}}"
    )));
    assert_eq!(
        common::metric_value(&scrape, "latencyd_busypoll_threshold_seconds"),
        Some(0.000001)
    );
    let (_, status) = daemon.get("/api/v1/status");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let busypoll = &status["busypoll"];
    let last = &busypoll["last_window"]["cpus"][polled.to_string()];
    assert!(last["gaps"].as_u64().unwrap() > 1_000, "{busypoll}");
    assert_eq!(
        last["max_ns"].as_f64().unwrap() / 1e9,
        max,
        "the status and the metric give the same longest gap"
    );
    assert!(busypoll["next_start"].is_string(), "{busypoll}");
    let (_, page) = daemon.get("/");
    assert!(
        page.contains(&format!("Busy-poll windows on CPUs {polled}")),
        "{page}"
    );
    daemon.signal(libc::SIGTERM);
    let mut daemon = daemon;
    let (exit, log) = daemon.wait_with_log();
    assert!(exit.success(), "{exit}: {log:?}");
    assert!(
        log.iter().any(|l| l.contains("busypoll: window ended")),
        "{log:?}"
    );
}

/// A poller moved off its CPU mid-run (what the kernel does when the CPU
/// goes offline) is said on stderr and in the JSON, not passed off as
/// that CPU's figures. Needs two usable CPUs.
#[test]
fn a_poller_moved_off_its_cpu_is_said_not_passed_off() {
    let _one = one_at_a_time();
    let usable = latencyd::host::HostInfo::detect().usable_cpus;
    let (Some(&other), Some(&polled)) = (usable.first(), usable.last()) else {
        unreachable!("a process has a CPU");
    };
    if other == polled {
        report_skip(
            "a_poller_moved_off_its_cpu_is_said_not_passed_off",
            "one usable CPU: nowhere to move the poller",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("oslat.json");
    let child = latencyd()
        .args([
            "oslat",
            "-q",
            "-D",
            "3",
            "-c",
            &polled.to_string(),
            "-C",
            &other.to_string(),
        ])
        .arg(format!("--json={}", json.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Every poller thread of the CPU (the 1 s preheat's, then the run's),
    // moved to the other CPU as it appears, until the run ends.
    let name = format!("poll-cpu{polled}");
    let mut moved = std::collections::BTreeSet::new();
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(10)
        && std::path::Path::new(&format!("/proc/{}/task", child.id())).exists()
        && moved.len() < 2
    {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id()));
        for task in tasks.into_iter().flatten().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let Ok(tid) = task.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if comm.trim() == name && moved.insert(tid) {
                std::thread::sleep(std::time::Duration::from_millis(300));
                // SAFETY: cpu_set_t is plain data; `tid` is the child's poller.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(other, &mut set);
                    libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let err = stderr_of(&output);
    assert!(output.status.success(), "{err}");
    assert!(
        err.contains(&format!("CPU {polled}: the poller ended off its CPU")),
        "{err}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["latencyd"]["threads"]["0"]["moved"], true, "{doc}");
}
