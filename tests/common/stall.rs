//! What tests/stall.rs and tests/full/stall.rs share.

use super::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The daemon: 1 ms sampling at priority 80, stalls from 500 ms, the
/// record written every second into `dir/record`.
pub fn daemon(dir: &Path, faults: Option<&str>) -> Daemon {
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
pub fn found_while_it_lasts(daemon: &Daemon, cpu: usize) -> String {
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
pub fn said_everywhere_after(mut daemon: Daemon, dir: &Path, cpu: usize) -> Value {
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
