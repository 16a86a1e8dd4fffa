//! Samplers starved by a real SCHED_FIFO spinner, and frozen, as root.
//! (tests/stall.rs holds the quick tier's.)

#[path = "../common/mod.rs"]
mod common;

use common::stall::*;
use common::*;
use std::path::Path;
use std::time::Duration;

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
// Full tier: root, a SCHED_FIFO spinner.
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

#[test]
// Full tier: root, the cgroup freezer.
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
