//! `latencyd plot` and `measure --plot`: the three input formats (real
//! cyclictest and jitterdebugger output, captured and, as root, produced
//! here), and the structure of the SVG: a series per CPU, axis labels,
//! each maximum marked.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

fn plot(input: &Path, output: &Path) -> std::process::Output {
    latencyd()
        .arg("plot")
        .arg(input)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap()
}

#[test]
fn plots_cyclictest_latencyd_and_jitterdebugger_files() {
    let dir = tempfile::tempdir().unwrap();
    for (input, cpus) in [
        (data_path("cyclictest/run.json"), vec!["CPU 0", "CPU 1"]),
        (
            data_path("jitterdebugger/results.json"),
            vec!["CPU 0", "CPU 1"],
        ),
    ] {
        let svg = dir.path().join("out.svg");
        let output = plot(&input, &svg);
        assert!(
            output.status.success(),
            "{}: {}",
            input.display(),
            stderr_of(&output)
        );
        check_plot_svg(&std::fs::read_to_string(&svg).unwrap(), &cpus);
        let png = dir.path().join("out.png");
        let output = plot(&input, &png);
        assert!(output.status.success(), "{}", stderr_of(&output));
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG file");
    }

    // latencyd's own --json, and --plot at the end of a run.
    let json = dir.path().join("run.json");
    let direct = dir.path().join("direct.svg");
    run_ok(
        latencyd()
            .args(["measure", "-q", "-l", "300", "-h", "100", "--json"])
            .arg(&json)
            .arg("--plot")
            .arg(&direct)
            .args(run_flags()),
    );
    let labels: Vec<String> = (0..usable_cpus()).map(|c| format!("CPU {c}")).collect();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    check_plot_svg(&std::fs::read_to_string(&direct).unwrap(), &labels);
    let from_file = dir.path().join("from-file.svg");
    let output = plot(&json, &from_file);
    assert!(output.status.success(), "{}", stderr_of(&output));
    let svg = std::fs::read_to_string(&from_file).unwrap();
    check_plot_svg(&svg, &labels);
    assert!(svg.contains("(latencyd)"), "the title names the tool");
}

/// Real cyclictest and jitterdebugger, run now (root only: both need
/// real-time scheduling).
#[test]
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

#[test]
fn bad_inputs_and_outputs_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("x.json");
    std::fs::write(&not_json, "T: 0 ( 1) P:80").unwrap();
    let cases = [
        (not_json.clone(), "out.svg", "not JSON"),
        (
            data_path("cyclictest/run-no-histogram.json"),
            "out.svg",
            "-h",
        ),
        (data_path("cyclictest/run.json"), "out.gif", ".svg or .png"),
        (dir.path().join("absent.json"), "out.svg", "cannot read"),
    ];
    for (input, output, message) in cases {
        let result = plot(&input, &dir.path().join(output));
        let stderr = stderr_of(&result);
        assert_eq!(result.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(message), "{}: {stderr}", input.display());
    }
    let output = latencyd()
        .args(["measure", "--plot", "x.jpg"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("--plot"));
}
