//! Plots of what the real cyclictest and jitterdebugger write now.
//! (tests/plot.rs holds the quick tier's.)

#[path = "../common/mod.rs"]
mod common;

use common::plot::*;
use common::*;
use std::process::Command;

/// Real cyclictest and jitterdebugger, run now (root only: both need
/// real-time scheduling).
#[test]
// Full tier: the real cyclictest and jitterdebugger.
fn plots_what_real_cyclictest_and_jitterdebugger_write_now() {
    if !privileged() {
        report_skip(
            "plots_what_real_cyclictest_and_jitterdebugger_write_now",
            "not root: cyclictest and jitterdebugger need real-time privileges (checked-in captures were plotted instead)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ct.json");
    run_ok(
        Command::new("cyclictest")
            .args(["-q", "-m", "-S", "-p80", "-i1000", "-l", "300", "-h", "100"])
            .arg(format!("--json={}", json.display())),
    );
    // Both tools run a thread on every CPU here.
    let labels: Vec<String> = (0..usable_cpus()).map(|c| format!("CPU {c}")).collect();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    let svg = dir.path().join("ct.svg");
    assert!(plot(&json, &svg).status.success());
    check_plot_svg(&std::fs::read_to_string(&svg).unwrap(), &labels);

    let found = Command::new("jitterdebugger").arg("--version").output();
    assert!(
        found.is_ok(),
        "jitterdebugger is missing: install Debian's jitterdebugger (.ci/run does)"
    );
    let out = dir.path().join("jd");
    run_ok(
        Command::new("jitterdebugger")
            .args(["-D", "1s", "-o"])
            .arg(&out)
            .current_dir(dir.path()),
    );
    let svg = dir.path().join("jd.svg");
    let output = plot(&out.join("results.json"), &svg);
    assert!(output.status.success(), "{}", stderr_of(&output));
    check_plot_svg(&std::fs::read_to_string(&svg).unwrap(), &labels);
}
