//! Background load (`measure --load`, the daemon's `[load]` windows) end
//! to end: the real binary starting the real generators (stress-ng,
//! rt-tests' hackbench; .ci/run installs both), where they run, that none
//! outlives latencyd (SIGINT, SIGKILL, a daemon's stop), what the output
//! says they achieved, the record split by load, and generators that are
//! missing or fail. Fake generators are small scripts put first on PATH.

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn require_generators() {
    require_tool("stress-ng", "--version", "stress-ng");
    // hackbench has no --version; its usage error still proves it runs.
    assert!(
        Command::new("hackbench").arg("--help").output().is_ok(),
        "hackbench is missing: install Debian's rt-tests package (.ci/run does)"
    );
}

/// A field of /proc/PID/stat after the command name (index 0 = state).
fn stat_field(pid: i32, index: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(index).map(str::to_string)
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Every process descended from `root`, not counting `root`.
fn descendants(root: i32) -> Vec<i32> {
    let all: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, stat_field(pid, 1)?.parse().ok()?)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(all.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    found.remove(0);
    found
}

/// The processes still running (not zombies) among `pids`.
fn alive(pids: &[i32]) -> Vec<(i32, String)> {
    pids.iter()
        .filter(|&&pid| stat_field(pid, 0).is_some_and(|state| state != "Z"))
        .map(|&pid| (pid, comm(pid)))
        .collect()
}

/// The members of the process groups `groups`, read from /proc.
fn members_of(groups: &BTreeSet<i32>) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            stat_field(pid, 2)
                .and_then(|g| g.parse::<i32>().ok())
                .is_some_and(|g| groups.contains(&g))
        })
        .collect()
}

/// Waits until the load's processes (comm stress-ng* or hackbench) run
/// under `root`; returns all of root's descendants then.
fn wait_for_load(root: i32, want_hackbench: bool) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let pids = descendants(root);
        let names: Vec<String> = pids.iter().map(|&p| comm(p)).collect();
        let stress = names.iter().any(|n| n.starts_with("stress-ng-"));
        let hackbench = names.iter().any(|n| n == "hackbench");
        if stress && (hackbench || !want_hackbench) {
            return pids;
        }
        assert!(
            Instant::now() < deadline,
            "the load's generators did not appear: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// No process of `groups` runs any more (zombies are being reaped by
/// init and do not run): waits up to 5 s.
fn assert_all_gone(groups: &BTreeSet<i32>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = alive(&members_of(groups));
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: load processes outlived latencyd: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The process groups of the generators among `pids` (a child caught
/// between fork and exec is still latencyd, in latencyd's group).
fn groups_of(pids: &[i32]) -> BTreeSet<i32> {
    pids.iter()
        .filter(|&&p| {
            let name = comm(p);
            name.starts_with("stress-ng") || name == "hackbench"
        })
        .filter_map(|&p| stat_field(p, 2)?.parse().ok())
        .collect()
}

fn scratch_dirs(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("latencyd-load-{pid}-")))
        })
        .collect()
}

#[test]
// Full tier: stress-ng and rt-tests' hackbench.
fn measure_load_runs_its_generators_in_their_own_group_on_its_cpus_and_reports_them() {
    require_generators();
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let last_cpu = usable_cpus() - 1;
    let load_cpus = last_cpu.to_string();
    let child = latencyd()
        .args(["measure", "-q", "-i", "1ms", "-D", "4", "--load", "rteval"])
        .args(["--load-cpus", &load_cpus, "--json"])
        .arg(&json)
        .args(run_flags())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let root = child.id() as i32;
    let pids = wait_for_load(root, true);
    let own_group: i32 = stat_field(root, 2).unwrap().parse().unwrap();
    let groups = groups_of(&pids);
    let show: Vec<(i32, String, Option<String>)> = pids
        .iter()
        .map(|&p| (p, comm(p), stat_field(p, 2)))
        .collect();
    assert_eq!(
        groups.len(),
        1,
        "one process group for the whole load: {show:?}"
    );
    assert!(!groups.contains(&own_group), "not latencyd's own group");
    let group = *groups.iter().next().unwrap();
    assert!(
        pids.contains(&group)
            && std::fs::read_to_string(format!("/proc/{group}/cmdline"))
                .unwrap()
                .contains("load-guard"),
        "the group is led by latencyd's guard"
    );
    for &pid in &pids {
        let name = comm(pid);
        if !(name.starts_with("stress-ng") || name == "hackbench") {
            continue;
        }
        // Field 39 (0-based after the command) is the policy: 0 is
        // SCHED_OTHER, whatever latencyd's own threads run at.
        if let Some(policy) = stat_field(pid, 38) {
            assert_eq!(policy, "0", "{name} ({pid}) runs at normal priority");
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if let Some(list) = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        {
            assert_eq!(list.trim(), load_cpus, "{name} ({pid}) runs on --load-cpus");
        }
    }
    let output = child.wait_with_output().unwrap();
    let text = stdout_of(&output);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_all_gone(&groups, "after the run's end");
    assert!(
        scratch_dirs(root as u32).is_empty(),
        "the scratch directory is removed"
    );
    // The text: cyclictest's lines, then the load's as comments.
    let parsed = common::cyclictest::parse(&text).unwrap();
    assert_eq!(parsed.threads.len(), usable_cpus());
    assert!(
        text.contains(&format!("# Load: rteval on CPUs {load_cpus} for ")),
        "{text}"
    );
    assert!(text.contains("#   hackbench"), "{text}");
    assert!(
        text.contains("stress-ng --cpu 1 --vm 1 --vm-bytes 64M"),
        "{text}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let load = &doc["latencyd"]["load"];
    assert_eq!(load["profile"], "rteval");
    assert_eq!(load["cpus"], load_cpus);
    assert_eq!(load["clean"], true, "{load}");
    let stress = load["generators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "stress-ng")
        .expect("stress-ng is listed");
    // Each stressor reports; on one CPU shared with hackbench's 240
    // processes a slow one may finish no bogo-op in 4 s, so only the
    // cpu stressor's rate is required to be positive.
    let listed: BTreeSet<&str> = stress["throughput"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["unit"] == "bogo-ops/s" && t["seconds"].as_f64().unwrap() > 0.0)
        .map(|t| t["what"].as_str().unwrap())
        .collect();
    assert_eq!(listed, BTreeSet::from(["cpu", "vm"]), "{stress}");
    assert!(
        stress["throughput"][0]["rate"].as_f64().unwrap() > 0.0,
        "{stress}"
    );
    let hackbench = &load["generators"][0];
    assert!(hackbench["name"].as_str().unwrap().starts_with("hackbench"));
    assert!(hackbench["starts"].as_u64().unwrap() >= 1, "{hackbench}");
}

#[test]
// Full tier: stress-ng and rt-tests' hackbench.
fn neither_sigint_nor_sigkill_of_measure_leaves_a_load_process_behind() {
    require_generators();
    let _turn = one_at_a_time();
    for signal in [libc::SIGINT, libc::SIGKILL] {
        let child = latencyd()
            .args([
                "measure", "-q", "-i", "1ms", "-D", "60", "--load", "rteval", "--json", "-",
            ])
            .args(run_flags())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let root = child.id() as i32;
        let pids = wait_for_load(root, true);
        let groups = groups_of(&pids);
        // SAFETY: kill with our child's pid and a valid signal.
        unsafe { libc::kill(root, signal) };
        let output = child.wait_with_output().unwrap();
        assert_all_gone(&groups, &format!("signal {signal}"));
        let dirs_deadline = Instant::now() + Duration::from_secs(5);
        while !scratch_dirs(root as u32).is_empty() && Instant::now() < dirs_deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            scratch_dirs(root as u32).is_empty(),
            "signal {signal}: the scratch directory is removed"
        );
        if signal == libc::SIGINT {
            assert!(output.status.success(), "{}", stderr_of(&output));
            let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
            let load = &doc["latencyd"]["load"];
            assert_eq!(load["clean"], true, "{load}");
            assert!(
                load["generators"][1]["throughput"][0]["rate"]
                    .as_f64()
                    .unwrap()
                    > 0.0,
                "stress-ng's metrics survive a SIGINT: {load}"
            );
        } else {
            assert_eq!(output.status.code(), None, "killed");
        }
    }
}

/// A directory with fake generators: `stress-ng` is `script`, and
/// `hackbench` exits 0 after printing a time.
fn fake_generators(dir: &Path, stress_ng: &str) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, text) in [
        ("stress-ng", stress_ng),
        ("hackbench", "#!/bin/sh\nsleep 0.2\necho 'Time: 0.200'\n"),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
// Full tier: stress-ng and rt-tests' hackbench.
fn a_generator_that_exits_early_is_said_counted_and_retried_and_the_samplers_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_generators(
        dir.path(),
        "#!/bin/sh\necho 'stress-ng: error: [1] out of resources' >&2\nexit 3\n",
    );
    let output = latencyd()
        .env("PATH", path)
        .args([
            "measure", "-q", "-i", "1ms", "-D", "2", "--load", "cpu", "--json", "-",
        ])
        .args(run_flags())
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("load generator stress-ng exited early: exit status: 3 (stress-ng: error: [1] out of resources)"),
        "{stderr}"
    );
    assert!(stderr.contains("the load did not run as asked"), "{stderr}");
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["return_code"], 1);
    let load = &doc["latencyd"]["load"];
    assert_eq!(load["clean"], false);
    assert!(
        load["generators"][0]["failures"].as_u64().unwrap() >= 1,
        "{load}"
    );
    for thread in doc["thread"].as_object().unwrap().values() {
        assert!(
            thread["cycles"].as_u64().unwrap() > 1_000,
            "the samplers went on: {thread}"
        );
    }
}

#[test]
// Full tier: stress-ng and rt-tests' hackbench.
fn a_generator_that_cannot_start_is_said_and_retried_and_the_run_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // On PATH and executable, but the kernel cannot run it.
    let path = fake_generators(dir.path(), "#!/nonexistent/interpreter\n");
    let output = latencyd()
        .env("PATH", path)
        .args(["measure", "-q", "-i", "1ms", "-D", "2", "--load", "cpu"])
        .args(run_flags())
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("load generator stress-ng could not start (stress-ng --cpu"),
        "{stderr}"
    );
    assert!(stderr.contains("trying again in 5 s"), "{stderr}");
    let text = stdout_of(&output);
    assert!(text.contains("(NOT AS ASKED, see below)"), "{text}");
    assert_eq!(
        common::cyclictest::parse(&text).unwrap().threads.len(),
        usable_cpus(),
        "the results are printed"
    );
}

#[test]
// Full tier: stress-ng and rt-tests' hackbench.
fn a_missing_generator_is_refused_before_anything_starts_naming_its_package() {
    let dir = tempfile::tempdir().unwrap();
    let output = latencyd()
        .env("PATH", dir.path())
        .args(["measure", "-q", "-D", "1", "--load", "rteval"])
        .args(run_flags())
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "nothing started: {}",
        stdout_of(&output)
    );
    assert!(
        stderr.contains(
            "--load: the load profile 'rteval' runs hackbench and stress-ng, not found on PATH"
        ) && stderr.contains("apt-get install rt-tests stress-ng"),
        "{stderr}"
    );
    // The daemon refuses such a [load] at start, as a configuration error.
    let config = daemon_config(dir.path(), "", "", "[load]\nprofile = \"cpu\"\n");
    let output = latencyd()
        .env("PATH", dir.path())
        .args(["run", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78), "{}", stderr_of(&output));
    assert!(
        stderr_of(&output).contains("load.profile"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
// Full tier: stress-ng and rt-tests' hackbench.
fn bad_load_options_are_usage_errors_naming_what_is_accepted() {
    for (args, said) in [
        (
            vec!["--load", "heavy"],
            "'heavy' is not a load profile; choose one of rteval, cpu, memory, io, network, irq, all",
        ),
        (
            vec!["--load-cpus", "0"],
            "--load-cpus: says where a load runs; add --load PROFILE",
        ),
        (
            vec!["--load", "cpu", "--load-cpus", "1000"],
            "CPU 1000 is not usable here",
        ),
    ] {
        let output = latencyd().arg("measure").args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr_of(&output).contains(said),
            "{args:?}: {}",
            stderr_of(&output)
        );
    }
}

/// A daemon with a short window (4 s every 10 s): the metric flips, the
/// status says until when, the record splits, `report --by-load` and its
/// plot show both, and nothing outlives the daemon's stop.
#[test]
// Full tier: stress-ng and rt-tests' hackbench.
fn the_daemons_load_window_flips_the_metric_splits_the_record_and_stops_clean() {
    require_generators();
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record");
    let sections = format!(
        "[record]\nenabled = true\ndir = \"{}\"\ninterval = \"1s\"\n\
         [load]\nprofile = \"cpu\"\nevery = \"10s\"\nat = \"0s\"\nduration = \"4s\"\n",
        record.display()
    );
    let config = daemon_config(dir.path(), "", "", &sections);
    let mut daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    let active = |d: &Daemon| {
        metric_value(
            &d.get("/metrics").1,
            "latencyd_load_active{profile=\"cpu\"}",
        )
    };
    // Some idle time first, whatever the phase.
    let wait = |d: &Daemon, want: f64, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(15);
        while active(d) != Some(want) {
            assert!(Instant::now() < deadline, "{what}: {}", d.log_text());
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait(&daemon, 0.0, "idle");
    wait(&daemon, 1.0, "the window starts");
    let pids = wait_for_load(daemon.child.id() as i32, false);
    let groups = groups_of(&pids);
    let (_, status) = daemon.get("/api/v1/status");
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["load"]["active"], true, "{}", status["load"]);
    assert!(status["load"]["until"].as_str().unwrap().ends_with('Z'));
    let (_, page) = daemon.get("/");
    assert!(
        page.contains("<span class=\"bad\">Under load</span>: the cpu load runs on CPUs all until"),
        "{page}"
    );
    wait(&daemon, 0.0, "the window ends");
    assert_all_gone(&groups, "after the window");
    let scrape = daemon.get("/metrics").1;
    assert!(
        metric_value(&scrape, "latencyd_load_throughput{generator=\"stress-ng\",profile=\"cpu\",unit=\"bogo-ops/s\",what=\"cpu\"}")
            .is_some_and(|rate| rate > 0.0),
        "{scrape}"
    );
    assert_eq!(
        metric_value(&scrape, "latencyd_load_windows_total{profile=\"cpu\"}"),
        Some(1.0)
    );
    // A second window, stopped by the daemon's own stop.
    wait(&daemon, 1.0, "the next window starts");
    let pids = wait_for_load(daemon.child.id() as i32, false);
    let groups = groups_of(&pids);
    daemon.signal(libc::SIGTERM);
    let (status, log) = daemon.wait_with_log();
    assert!(status.success(), "{log:?}");
    assert_all_gone(&groups, "after the daemon's stop");
    let log = log.join("\n");
    assert!(log.contains("load window: cpu on CPUs"), "{log}");
    assert!(log.contains("load window ended: cpu"), "{log}");

    let report = latencyd()
        .args(["report", "--by-load", "--json", "--plot"])
        .arg(dir.path().join("by-load.svg"))
        .arg(&record)
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", stderr_of(&report));
    let doc: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(doc["a_range"], "idle");
    assert_eq!(doc["b_range"], "under load cpu");
    let samples = |part: &Value| part["samples"].as_u64().unwrap_or(0);
    assert!(samples(&doc["a"]) > 0 && samples(&doc["b"]) > 0, "{doc}");
    let svg = std::fs::read_to_string(dir.path().join("by-load.svg")).unwrap();
    assert_eq!(polylines_of_series(&svg), 2, "two lines on one plot");
    assert!(svg.contains("idle") && svg.contains("under load cpu"));
    // The same two lines from `latencyd plot`.
    let plotted = latencyd()
        .args(["plot", "--by-load", "-o"])
        .arg(dir.path().join("plot-by-load.svg"))
        .arg(&record)
        .output()
        .unwrap();
    assert!(plotted.status.success(), "{}", stderr_of(&plotted));
    let svg = std::fs::read_to_string(dir.path().join("plot-by-load.svg")).unwrap();
    assert_eq!(polylines_of_series(&svg), 2, "two lines on one plot");
    assert!(svg.contains("under load cpu"), "{svg}");
    // A record without a load says what --by-load needs.
    let idle_only = tempfile::tempdir().unwrap();
    let log = idle_only.path().join("idle.hlog");
    run_ok(
        latencyd()
            .args(["measure", "-q", "-D", "2", "--log"])
            .arg(&log)
            .args(run_flags()),
    );
    let unused = idle_only.path().join("never.svg");
    let unused = unused.to_str().unwrap();
    for args in [
        vec!["report", "--by-load"],
        vec!["plot", "--by-load", "-o", unused],
    ] {
        let output = latencyd().args(&args).arg(&log).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(
            stderr_of(&output).contains("--by-load needs")
                || stderr_of(&output).contains("no interval measured under load"),
            "{args:?}: {}",
            stderr_of(&output)
        );
    }
}

/// A window whose generator keeps failing: logged, counted per generator,
/// and the samplers keep sampling (the daemon stays healthy).
#[test]
// Full tier: stress-ng and rt-tests' hackbench.
fn a_failing_generator_in_a_window_is_logged_and_counted_and_sampling_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_generators(dir.path(), "#!/bin/sh\necho 'no luck' >&2\nexit 1\n");
    let config = daemon_config(
        dir.path(),
        "",
        "",
        "[load]\nprofile = \"cpu\"\nevery = \"20s\"\nat = \"0s\"\nduration = \"19s\"\n",
    );
    // Started inside a window (19 s of every 20 s), so it runs at once.
    let mut cmd = latencyd();
    cmd.env("PATH", path).args(["run", "--config"]).arg(&config);
    let daemon = Daemon::start(&mut cmd);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let scrape = daemon.get("/metrics").1;
        let failures = metric_value(
            &scrape,
            "latencyd_load_failures_total{generator=\"stress-ng\",profile=\"cpu\"}",
        );
        if failures.is_some_and(|n| n >= 1.0) {
            break;
        }
        assert!(Instant::now() < deadline, "no failure counted: {scrape}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(daemon.get("/healthz").0, 200, "the samplers go on");
    assert!(
        daemon
            .log_text()
            .contains("load generator stress-ng exited early: exit status: 1 (no luck)"),
        "{}",
        daemon.log_text()
    );
}
