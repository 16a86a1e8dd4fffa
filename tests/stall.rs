//! A starved sampler is said: found while the stall lasts (a warn line
//! naming what held the CPU, `latencyd_sampler_stalls_total`, /healthz
//! 503), said again when it ends, listed under `gaps` in the status and
//! on the page, and filed in the record as a gap that `report` lists and
//! `plot --over-time` shades instead of bridging.
//!
//! As root a SCHED_FIFO thread above the samplers spins on one CPU; for
//! anyone, with the test-only fault injection, one sleep of a sampler
//! lasts 2 s longer (the same silence, without a culprit to name).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// The daemon: 1 ms sampling at priority 80, stalls from 500 ms, the
/// record written every second into `dir/record`.
fn daemon(dir: &Path, faults: Option<&str>) -> Daemon {
    let config = daemon_config(
        dir,
        "priority = 80\nstall_threshold = \"500ms\"",
        "",
        &format!(
            "[record]\nenabled = true\ndir = \"{}\"\ninterval = \"1s\"\n",
            dir.join("record").display()
        ),
    );
    let mut cmd = latencyd();
    cmd.args(["run", "--config"]).arg(config);
    if let Some(spec) = faults {
        cmd.env("FAULT_INJECTION_LATENCYD", spec);
    }
    Daemon::start(&mut cmd)
}

/// Waits for the stall of `cpu` to be found: the warn line, the counter,
/// /healthz 503 and the open gap. Returns the warn line.
fn found_while_it_lasts(daemon: &Daemon, cpu: usize) -> String {
    let said = format!("CPU {cpu}'s sampler has not run for");
    wait_until(
        "the stall to be said",
        Duration::from_millis(20),
        Duration::from_secs(3),
        || daemon.log_text().contains(&said),
    );
    let (code, body) = daemon.get("/healthz");
    assert_eq!(
        code, 503,
        "a stalled sampler is unhealthy while it lasts: {body}"
    );
    let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    let open = status["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["cpu"] == cpu && g["reason"] == "stalled")
        .cloned()
        .unwrap_or_else(|| panic!("no open gap: {}", status["gaps"]));
    assert_eq!(open["end"], Value::Null, "{open}");
    assert!(daemon.get("/").1.contains("Gaps in the measurement"));
    let log = daemon.log_text();
    log.lines().find(|l| l.contains(&said)).unwrap().to_string()
}

/// After the stall: said as over, counted once, listed with its end, and
/// in the record as a gap that report lists and the plot shades.
fn said_everywhere_after(mut daemon: Daemon, dir: &Path, cpu: usize) -> Value {
    wait_until(
        "the end of the stall to be said",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || daemon.log_text().contains("runs again after a stall of"),
    );
    let metrics = daemon.get("/metrics").1;
    assert_eq!(
        metric_value(
            &metrics,
            &format!("latencyd_sampler_stalls_total{{cpu=\"{cpu}\"}}")
        ),
        Some(1.0),
        "one stall, counted once"
    );
    let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    let gap = status["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["cpu"] == cpu && g["reason"] == "stalled")
        .cloned()
        .unwrap();
    let lasted = gap["duration_ns"].as_u64().unwrap();
    assert!(gap["end"].is_string() && lasted >= 500_000_000, "{gap}");
    assert_eq!(daemon.get("/healthz").0, 200, "healthy again");
    // Past the record's interval, then stopped: the gap is in the file.
    std::thread::sleep(Duration::from_millis(1200));
    daemon.signal(libc::SIGTERM);
    let (exit, log) = daemon.wait_with_log();
    assert!(exit.success(), "{log:?}");
    let record = dir.join("record");
    let written: String = std::fs::read_dir(&record)
        .unwrap()
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
        .collect();
    assert!(
        written.contains(&format!("#[latencyd gap cpu{cpu} start="))
            && written.contains("reason=stalled]"),
        "the record files the gap:\n{written}"
    );
    let report = run_ok(
        latencyd()
            .arg("report")
            .arg(&record)
            .args(["--from", "-10m"]),
    );
    let report = stdout_of(&report);
    assert!(
        report.contains(&format!("# Gap: CPU {cpu}: no samples from"))
            && report.contains("(stalled,"),
        "{report}"
    );
    let svg = dir.join("over-time.svg");
    let plotted = Command::new(env!("CARGO_BIN_EXE_latencyd"))
        .arg("plot")
        .arg(&record)
        .args(["--over-time", "-o"])
        .arg(&svg)
        .output()
        .unwrap();
    if plotted.status.success() {
        let svg = std::fs::read_to_string(&svg).unwrap();
        assert!(
            svg.contains("no samples: stalled"),
            "the plot marks the gap"
        );
    } else {
        // Only a missing font may stop the plot (fonts-dejavu-core).
        assert!(
            stderr_of(&plotted).contains("TrueType font"),
            "{}",
            stderr_of(&plotted)
        );
        report_skip(
            "tests/stall.rs",
            "no font: the over-time plot was not drawn",
        );
    }
    gap
}

#[test]
#[ignore = "full tier: root, a SCHED_FIFO spinner"]
fn a_starved_sampler_is_said_counted_and_recorded_as_a_gap() {
    let _turn = one_at_a_time();
    let test = "a_starved_sampler_is_said_counted_and_recorded_as_a_gap";
    if !privileged() {
        report_skip(
            test,
            "not root: no SCHED_FIFO spinner (the fault-injection test covers the rest)",
        );
        return;
    }
    let cpu = usable_cpus() - 1;
    let dir = tempfile::tempdir().unwrap();
    let daemon = daemon(dir.path(), None);
    std::thread::sleep(Duration::from_millis(500));
    let spinner = std::thread::spawn(move || {
        busy_named_thread(cpu, 90, Duration::from_millis(2500), "lat-starver")
    });
    let line = found_while_it_lasts(&daemon, cpu);
    let tid = spinner.join().unwrap();
    assert!(
        line.contains(&format!(
            "held by SCHED_FIFO 90 task lat-starver (pid {tid})"
        )),
        "the line names what held the CPU: {line}"
    );
    let gap = said_everywhere_after(daemon, dir.path(), cpu);
    assert!(
        gap["held_by"]
            .as_str()
            .is_some_and(|h| h.contains("lat-starver")),
        "{gap}"
    );
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_sampler_that_does_not_run_for_two_seconds_is_said_without_root() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // CPU 0's sampler: one sleep, 300 ms after its start, 2 s too long.
    let daemon = daemon(dir.path(), Some("spike:0:300:2000000"));
    found_while_it_lasts(&daemon, 0);
    said_everywhere_after(daemon, dir.path(), 0);
}

#[cfg(not(feature = "fault-injection"))]
#[test]
#[ignore = "needs --features fault-injection (scripts/test passes it)"]
fn a_stall_without_root_needs_the_fault_injection_build() {}

/// A v1 freezer cgroup of this test's own, removed when dropped (its
/// tasks thawed and moved back to the root first).
struct Freezer(std::path::PathBuf);

impl Freezer {
    fn new() -> Option<Freezer> {
        let root = Path::new("/sys/fs/cgroup/freezer");
        let dir = root.join(format!("latencyd-test-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        Some(Freezer(dir))
    }

    fn write(&self, file: &str, text: &str) {
        std::fs::write(self.0.join(file), text)
            .unwrap_or_else(|e| panic!("{}/{file}: {e}", self.0.display()));
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("freezer.state"), "THAWED");
        let tasks = std::fs::read_to_string(self.0.join("tasks")).unwrap_or_default();
        for tid in tasks.lines() {
            let _ = std::fs::write("/sys/fs/cgroup/freezer/tasks", tid);
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
#[ignore = "full tier: root, the cgroup freezer"]
fn a_frozen_sampler_is_said_frozen_not_held_by_another_task() {
    let _turn = one_at_a_time();
    let test = "a_frozen_sampler_is_said_frozen_not_held_by_another_task";
    if !privileged() {
        report_skip(test, "not root: no cgroup to freeze the sampler in");
        return;
    }
    let Some(freezer) = Freezer::new() else {
        report_skip(
            test,
            "no writable v1 freezer hierarchy at /sys/fs/cgroup/freezer (the own-state \
             reader's unit tests cover cgroup v2)",
        );
        return;
    };
    let cpu = usable_cpus() - 1;
    let dir = tempfile::tempdir().unwrap();
    let daemon = daemon(dir.path(), None);
    std::thread::sleep(Duration::from_millis(500));
    let tid = sampler_status(&daemon, cpu)["tid"].as_i64().unwrap();
    freezer.write("tasks", &tid.to_string());
    freezer.write("freezer.state", "FROZEN");
    let said = format!("CPU {cpu}'s sampler has not run for");
    wait_until(
        "the stall to be said",
        Duration::from_millis(20),
        Duration::from_secs(4),
        || daemon.log_text().contains(&said),
    );
    freezer.write("freezer.state", "THAWED");
    let log = daemon.log_text();
    let line = log.lines().find(|l| l.contains(&said)).unwrap();
    assert!(
        line.contains("its own thread is frozen by the cgroup freezer (freezer /latencyd-test-"),
        "the sampler's own state is said first: {line}"
    );
    assert!(!line.contains("held by"), "{line}");
    drop(freezer);
    wait_until(
        "the end of the stall",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || daemon.log_text().contains("runs again after a stall of"),
    );
}
