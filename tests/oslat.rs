//! `latencyd oslat` beside the real oslat (Debian's rt-tests; full tier):
//! the same command line gives the same rows, the same JSON keys, and
//! what scripts read from them (jq over `.thread[].max`, as CI jobs gate
//! on it) reads alike. Quick tier: `-T` stops, marks and says so; bad
//! values name their fix; a user without real-time privileges gets the
//! non-real-time path.

mod common;

use std::process::{Command, Output};

use common::{
    latencyd, one_at_a_time, privileged, report_skip, require_tool, stderr_of, stdout_of,
};

/// One CPU to poll on: the last this process may use (the first often
/// carries housekeeping).
fn poll_cpu() -> String {
    let cpus = latencyd::host::HostInfo::detect().usable_cpus;
    cpus.last().copied().unwrap_or(0).to_string()
}

/// The label of each summary row (what precedes ":\t") and how many
/// values it carries, with its ending; the header lines as they are.
fn shape(text: &str) -> Vec<String> {
    text.lines()
        .skip(1) // the version line
        .map(|line| match line.split_once(":\t") {
            Some((label, values)) => {
                let words: Vec<&str> = values.split_whitespace().collect();
                let numbers = words
                    .iter()
                    .take_while(|w| w.parse::<f64>().is_ok())
                    .count();
                format!("{label}: {numbers} values {}", words[numbers..].join(" "))
            }
            None => line.to_string(),
        })
        .collect()
}

fn real_oslat(args: &[&str]) -> Option<Output> {
    require_tool("oslat", "--help", "rt-tests");
    let output = Command::new("oslat")
        .args(args)
        .output()
        .expect("oslat starts");
    if !output.status.success() {
        report_skip(
            "oslat::beside_the_real_oslat",
            &format!(
                "the real oslat did not run here ({}): {}",
                output.status,
                stdout_of(&output).lines().last().unwrap_or("")
            ),
        );
        return None;
    }
    Some(output)
}

fn oslat_has_bucket_width() -> bool {
    require_tool("oslat", "--help", "rt-tests");
    let help = Command::new("oslat")
        .arg("--help")
        .output()
        .expect("oslat starts");
    stdout_of(&help).contains("--bucket-width")
}

fn jq(filter: &str, file: &std::path::Path) -> String {
    require_tool("jq", "--version", "jq");
    let output = Command::new("jq")
        .args(["-c", filter])
        .arg(file)
        .output()
        .expect("jq starts");
    assert!(
        output.status.success(),
        "jq {filter}: {}",
        stderr_of(&output)
    );
    stdout_of(&output).trim().to_string()
}

#[test]
#[ignore = "full tier: the real oslat and jq beside latencyd oslat; about 10 s"]
fn beside_the_real_oslat_the_rows_and_json_keys_are_the_same() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let cpu = poll_cpu();
    for extra in [
        &["-b", "8"][..],
        &["-W", "500", "-b", "16", "-w", "memmove", "-m", "4K"][..],
    ] {
        if extra.contains(&"-W") && !oslat_has_bucket_width() {
            // Debian 12's oslat 2.4 has no -W (it came with 2.5).
            report_skip(
                "oslat::beside_the_real_oslat",
                "this oslat has no -W (rt-tests before 2.5): ns buckets compared with nothing",
            );
            continue;
        }
        let ours_json = dir.path().join("ours.json");
        let theirs_json = dir.path().join("theirs.json");
        let mut args = vec!["-c", &cpu, "-D", "1"];
        args.extend_from_slice(extra);
        let ours = latencyd()
            .arg("oslat")
            .args(&args)
            .arg(format!("--json={}", ours_json.display()))
            .output()
            .unwrap();
        assert!(ours.status.success(), "{}", stderr_of(&ours));
        let Some(theirs) = real_oslat(
            &[
                &args[..],
                &[&format!("--json={}", theirs_json.display())[..]],
            ]
            .concat(),
        ) else {
            return;
        };
        let (ours_text, theirs_text) = (stdout_of(&ours), stdout_of(&theirs));
        assert_eq!(
            shape(&ours_text),
            shape(&theirs_text),
            "{args:?}\nours:\n{ours_text}\ntheirs:\n{theirs_text}"
        );
        assert!(
            ours_text.starts_with("oslat V 2.40 (latencyd "),
            "{ours_text}"
        );
        for filter in [
            "keys",
            ".thread | keys",
            ".thread[] | keys",
            ".sysinfo | keys",
        ] {
            let (a, b) = (jq(filter, &ours_json), jq(filter, &theirs_json));
            let b_keys: Vec<String> = serde_json::from_str(&b).unwrap();
            let a_keys: Vec<String> = serde_json::from_str(&a).unwrap();
            let missing: Vec<&String> = b_keys.iter().filter(|k| !a_keys.contains(k)).collect();
            assert!(missing.is_empty(), "{filter}: ours lacks {missing:?}");
        }
        // What a CI job gates on: the largest maximum, an integer.
        let max: u64 = jq("[.thread[].max] | max", &ours_json).parse().unwrap();
        let ours_max = ours_text
            .lines()
            .find_map(|l| l.strip_prefix("     Maximum:\t "))
            .and_then(|v| v.split_whitespace().next())
            .unwrap();
        let scale = if extra.contains(&"-W") { 1_000.0 } else { 1.0 };
        assert_eq!(
            max as f64,
            ours_max.parse::<f64>().unwrap() * scale,
            "{ours_text}"
        );
        let samples: u64 = jq("[.latencyd.threads[].samples] | add", &ours_json)
            .parse()
            .unwrap();
        let histogram: u64 = jq("[.thread[].histogram[]] | add", &ours_json)
            .parse()
            .unwrap();
        assert_eq!(samples, histogram, "every gap is in the histogram");
    }
}

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
    let says = format!("Trace threshold (1 us) triggered on cpu {cpu} with 1 us!");
    assert!(stderr_of(&output).contains(&says), "{}", stderr_of(&output));
    assert!(
        stdout_of(&output).contains("     Maximum:\t 1 (us)"),
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
