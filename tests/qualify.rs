//! `latencyd qualify` as a CI job runs it: a passing run (exit 0) with
//! its JUnit and JSON, a run that cannot measure (exit 2, and what), a
//! regression against a baseline (exit 1), mistakes refused before
//! anything is measured, cnf-tests' variables honoured, and the daemon
//! serving what `--record` wrote. The JUnit file read by a real JUnit
//! library and junit2html, and the HTML report in headless Chromium, are
//! tests/full/qualify.rs. The injected spike over a maximum is in tests/faults.rs.

mod common;

use common::qualify::*;
use common::{
    latencyd, one_at_a_time, privileged, report_skip, stderr_of, stdout_of, unprivileged_latencyd,
};
use serde_json::Value;

#[test]
fn a_passing_run_writes_its_verdict_as_junit_and_json_with_rtevals_statistics() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let output = latencyd().args(smoke(dir.path())).output().unwrap();
    let doc = check_passed(&output, dir.path());
    if !privileged() {
        report_skip(
            "qualify::a_passing_run",
            "not root: the phases ran without SCHED_FIFO (the smoke profile warns), hwlat and timerlat were skipped",
        );
        // The JSON says the phase was not real-time; each JUnit case of
        // the phase carries the profile's warning in its output.
        let idle = phase(&doc, "idle");
        assert_eq!(idle["realtime"], false, "{idle:#}");
        let junit = std::fs::read_to_string(dir.path().join("q.xml")).unwrap();
        let warned = junit
            .matches("warning: the samplers did not run SCHED_FIFO")
            .count();
        let cpus = idle["cpus"].as_array().unwrap().len();
        assert!(
            warned >= cpus,
            "{cpus} idle cases, {warned} warnings: {junit}"
        );
    }
}

#[test]
fn without_privileges_a_run_that_needs_them_cannot_measure_and_says_what() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let Some(mut cmd) = unprivileged_latencyd(dir.path(), false) else {
        unreachable!("without keep_sys_nice there is always a command");
    };
    // Where nobody may write the outputs.
    use std::os::unix::fs::PermissionsExt;
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    // The smoke profile only warns when the samplers cannot be real-time.
    let output = cmd.args(smoke(&out)).output().unwrap();
    check_passed(&output, &out);
    // cnf-tests' profile needs them: every phase but the facts could not
    // be measured, and each says why.
    let mut cmd = unprivileged_latencyd(dir.path(), false).unwrap();
    let mut args = smoke(&out);
    args[2] = "cnf-tests".into();
    let output = cmd.args(&args).output().unwrap();
    assert_eq!(
        code(&output),
        2,
        "{}\n{}",
        stdout_of(&output),
        stderr_of(&output)
    );
    let doc = document(&out);
    assert_eq!(doc["verdict"], "could-not-measure");
    let idle = phase(&doc, "idle");
    assert_eq!(idle["status"], "could-not-measure");
    assert!(
        idle["reason"]
            .as_str()
            .unwrap()
            .contains("cannot lock memory"),
        "{idle:#}"
    );
    let junit = std::fs::read_to_string(out.join("q.xml")).unwrap();
    assert!(
        junit.contains("<error message=") && junit.contains("failures=\"0\""),
        "{junit}"
    );
}

#[test]
fn a_regression_against_the_baseline_fails_and_names_both_maxima() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let output = latencyd().args(smoke(dir.path())).output().unwrap();
    let mut doc = check_passed(&output, dir.path());
    // The baseline: the same run with CPU maxima of 1 ns, and one of 10 s.
    for phase in doc["phases"].as_array_mut().unwrap() {
        let max: Value = if phase["name"] == "busypoll" {
            10e6
        } else {
            0.001
        }
        .into();
        for cpu in phase["cpus"].as_array_mut().into_iter().flatten() {
            cpu["stats"]["max"] = max.clone();
        }
    }
    let baseline = dir.path().join("baseline.json");
    std::fs::write(&baseline, doc.to_string()).unwrap();
    let mut args = smoke(dir.path());
    args.extend([
        "--baseline".into(),
        baseline.display().to_string(),
        "--regression-factor".into(),
        "2".into(),
    ]);
    let output = latencyd().args(&args).output().unwrap();
    assert_eq!(
        code(&output),
        1,
        "{}\n{}",
        stdout_of(&output),
        stderr_of(&output)
    );
    let after = document(dir.path());
    let idle = phase(&after, "idle");
    for cpu in idle["cpus"].as_array().unwrap() {
        let reason = cpu["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("regression: maximum")
                && reason.contains("the baseline's 0.001 µs (over 2)"),
            "{reason}"
        );
    }
    assert!(
        phase(&after, "busypoll")["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["verdict"] == "passed")
    );
    assert_eq!(after["baseline"]["factor"], 2.0);
    assert_eq!(
        after["baseline"]["fingerprint"],
        after["host"]["fingerprint"]
    );
    // Not a qualify document: refused by name before measuring.
    std::fs::write(&baseline, "{}").unwrap();
    let output = latencyd().args(&args).output().unwrap();
    assert_eq!(code(&output), 2);
    assert!(
        stderr_of(&output).contains("not a `latencyd qualify --json` document"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn mistakes_are_refused_before_anything_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (
            &["--junit", "/nonexistent/q.xml"],
            &[],
            "--junit /nonexistent/q.xml: cannot write it",
        ),
        (
            &[],
            &[("OSLAT_MAXIMUM_LATENCY", "20us")],
            "OSLAT_MAXIMUM_LATENCY \"20us\": give the maximum as a whole number",
        ),
        (
            &["--profile", "fast"],
            &[],
            "neither a ready profile (cnf-tests, smoke, certification-24h)",
        ),
        (&["--load", "cpu,bogus"], &[], "load profile \"bogus\""),
        (
            &["--regression-factor", "0.5", "--baseline", "x"],
            &[],
            "--regression-factor \"0.5\"",
        ),
    ];
    for (args, vars, want) in cases {
        let started = std::time::Instant::now();
        let output = latencyd()
            .arg("qualify")
            .args(args)
            .envs(vars.iter().copied())
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr_of(&output));
        assert!(
            stderr_of(&output).contains(want),
            "{args:?}: {}",
            stderr_of(&output)
        );
        assert!(
            started.elapsed().as_secs() < 5,
            "{args:?} measured before refusing"
        );
    }
}

#[test]
fn cnf_tests_variables_set_the_plan_as_cnf_tests_reads_them() {
    let output = latencyd()
        .args(["qualify", "--dry-run"])
        .envs([
            ("MAXIMUM_LATENCY", "40"),
            ("HWLATDETECT_MAXIMUM_LATENCY", "15"),
            ("OSLAT_MAXIMUM_LATENCY", "12"),
            ("LATENCY_TEST_RUNTIME", "600"),
            ("LATENCY_TEST_CPUS", "1"),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&output), 0, "{}", stderr_of(&output));
    let plan = stdout_of(&output);
    let line = |phase: &str| {
        plan.lines()
            .find(|l| l.trim_start().starts_with(phase))
            .unwrap_or_else(|| panic!("{plan}"))
    };
    assert!(
        line("hwlat").contains("600 s")
            && line("hwlat").contains("maximum 15 µs from HWLATDETECT_MAXIMUM_LATENCY"),
        "{plan}"
    );
    assert!(
        line("idle").contains("maximum 40 µs from MAXIMUM_LATENCY"),
        "{plan}"
    );
    assert!(
        line("busypoll").contains("maximum 12 µs from OSLAT_MAXIMUM_LATENCY"),
        "{plan}"
    );
    assert!(plan.contains("(LATENCY_TEST_CPUS)"), "{plan}");
}

/// Written into the record while the daemon runs (as `qualify --record`
/// writes it: a whole file renamed into place), the qualification is
/// served within the daemon's next look (every 5 s), without a restart.
#[test]
fn the_daemon_serves_the_qualification_written_into_its_record() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (staged, record) = (dir.path().join("staged"), dir.path().join("record"));
    std::fs::create_dir_all(&record).unwrap();
    let mut args = smoke(dir.path());
    args.extend(["--record".into(), staged.display().to_string()]);
    let output = latencyd().args(&args).output().unwrap();
    let doc = check_passed(&output, dir.path());
    let sections = format!(
        "[record]\nenabled = false\ndir = {:?}\n",
        record.display().to_string()
    );
    let daemon = common::Daemon::start(
        latencyd()
            .args(["run", "--config"])
            .arg(common::daemon_config(dir.path(), "", "", &sections)),
    );
    let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    let none = status["qualification"]["none"].as_str().unwrap_or_default();
    assert!(
        none.contains("latencyd qualify --record writes it"),
        "{status:#}"
    );
    std::fs::copy(staged.join("qualification.json"), dir.path().join("q.tmp")).unwrap();
    std::fs::rename(dir.path().join("q.tmp"), record.join("qualification.json")).unwrap();
    let started = std::time::Instant::now();
    let scrape = loop {
        let (_, scrape) = daemon.get("/metrics");
        if scrape.contains("latencyd_qualification_info{") {
            break scrape;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "not served 60 s after it was written: {scrape}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    for cpu in phase(&doc, "idle")["cpus"].as_array().unwrap() {
        let series = format!(
            "latencyd_qualified_max_seconds{{cpu=\"{}\",phase=\"idle\"}}",
            cpu["cpu"]
        );
        let served =
            common::metric_value(&scrape, &series).unwrap_or_else(|| panic!("{series}: {scrape}"));
        assert!(
            (served - cpu["stats"]["max"].as_f64().unwrap() / 1e6).abs() < 1e-12,
            "{series} {served}"
        );
    }
    let info = format!(
        "latencyd_qualification_info{{fingerprint=\"{}\",profile=\"smoke\",verdict=\"passed\"}}",
        doc["host"]["fingerprint"].as_str().unwrap()
    );
    assert_eq!(common::metric_value(&scrape, &info), Some(1.0), "{scrape}");
    let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    let q = &status["qualification"];
    assert_eq!(
        (q["profile"].as_str(), q["ended"].as_str()),
        (Some("smoke"), doc["ended"].as_str()),
        "{q:#}"
    );
    let (_, page) = daemon.get("/");
    assert!(page.contains("with profile smoke: passed"), "{page}");
}

#[test]
fn a_stop_signal_ends_the_running_phase_with_its_figures_and_runs_no_other() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut args = smoke(dir.path());
    args[4] = "60".into();
    // One SIGINT to qualify alone (as `kill` or systemd sends it), 2 s
    // into its first measuring phase: that phase ends with what it
    // measured, the rest are not run, and qualify says so (exit 2).
    let mut child = latencyd()
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let asked = std::time::Instant::now();
    // SAFETY: kill has no memory arguments.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    assert!(
        asked.elapsed().as_secs() < 20,
        "the stop took {:?}",
        asked.elapsed()
    );
    assert_eq!(status.code(), Some(2));
    let doc = document(dir.path());
    let measured: Vec<&Value> = doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["status"] == "measured")
        .collect();
    assert_eq!(measured.len(), 1, "{doc:#}");
    assert!(measured[0]["seconds"].as_f64().unwrap() < 30.0, "{doc:#}");
    let stopped = doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["reason"] == "stopped by a signal before it ran")
        .count();
    assert!(stopped >= 1, "{doc:#}");
}
