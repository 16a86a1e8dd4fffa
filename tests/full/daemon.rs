//! The daemon's exposition read by promtool, its counters growing and
//! agreeing with the JSON API.
//! (tests/daemon.rs holds the quick tier's.)

#[path = "../common/mod.rs"]
mod common;

use common::daemon::*;
use common::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
// Full tier: promtool.
fn metrics_pass_promtool_and_counts_grow_and_agree_with_the_api() {
    require_tool("promtool", "--version", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(&mut run_with(&daemon_config(dir.path(), "", "", "")));
    wait_until(
        "a first interval",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || {
            daemon
                .get("/metrics")
                .1
                .contains("latencyd_wakeup_latency_seconds_count{cpu=\"0\"}")
        },
    );

    let first = daemon.get("/metrics").1;
    let (status, api) = daemon.get("/api/v1/latency");
    assert_eq!(status, 200);
    std::thread::sleep(Duration::from_millis(1_500));
    let (status, second) = daemon.get("/metrics");
    assert_eq!(status, 200);

    let api: Value = serde_json::from_str(&api).unwrap();
    let cpus = api["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), usable_cpus());
    for cpu in cpus {
        let id = cpu["cpu"].as_u64().unwrap();
        let (before, after) = (count_of(&first, id), count_of(&second, id));
        let between = cpu["count"].as_u64().unwrap() as f64;
        assert!(
            after > before,
            "CPU {id}: samples grow: {before} then {after}"
        );
        assert!(
            before <= between && between <= after,
            "CPU {id}: {before} <= {between} <= {after}"
        );
        let realtime = format!("latencyd_sampler_realtime{{cpu=\"{id}\",policy=\"fifo\"}}");
        assert_eq!(
            metric_value(&second, &realtime),
            Some(f64::from(u8::from(privileged())))
        );
    }
    assert!(
        second.contains("process_resident_memory_bytes"),
        "process metrics are served"
    );

    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    check
        .stdin
        .take()
        .unwrap()
        .write_all(second.as_bytes())
        .unwrap();
    let output = check.wait_with_output().unwrap();
    let said = format!("{}{}", stdout_of(&output), stderr_of(&output));
    assert!(
        output.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}"
    );
    if !privileged() {
        report_skip(
            "metrics_pass_promtool_and_counts_grow_and_agree_with_the_api",
            "not root: the daemon ran degraded (realtime.required = false)",
        );
    }
}

fn count_of(scrape: &str, cpu: u64) -> f64 {
    metric_value(
        scrape,
        &format!("latencyd_wakeup_latency_seconds_count{{cpu=\"{cpu}\"}}"),
    )
    .unwrap_or_else(|| panic!("no count for CPU {cpu} in:\n{scrape}"))
}
