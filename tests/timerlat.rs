//! `latencyd measure --timerlat` on this machine's kernel: bad settings
//! refused by name, and a kernel or a user without the tracer told why,
//! before any sampler starts. The tracer itself runs in the kernel
//! matrix's PREEMPT_RT guests (`scripts/kernel-matrix`), where the split
//! of a spinner's delay, the counts and the return-to-user context are
//! checked; here, where the kernel has it, one short run is checked too.

mod common;

use common::*;

fn kernel_has_timerlat() -> Option<bool> {
    std::fs::read_to_string("/sys/kernel/tracing/available_tracers")
        .ok()
        .map(|t| t.split_whitespace().any(|name| name == "timerlat"))
}

#[test]
fn bad_timerlat_settings_are_refused_by_name() {
    for (args, says) in [
        (["--timerlat-period", "50us"], "--timerlat-period"),
        (["--timerlat-period", "1500ns"], "--timerlat-period"),
        (["--timerlat-priority", "0"], "--timerlat-priority"),
    ] {
        let output = latencyd()
            .args(["measure", "--timerlat", "-l", "5"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let err = stderr_of(&output);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn without_the_tracer_it_says_why_and_measures_nothing() {
    let has = kernel_has_timerlat();
    if has == Some(true) && privileged() {
        let output = run_ok(
            latencyd()
                .args([
                    "measure",
                    "--timerlat",
                    "-q",
                    "-D",
                    "2",
                    "-h",
                    "50",
                    "--json",
                    "-",
                ])
                .args(run_flags()),
        );
        let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let cpus = doc["latencyd"]["timerlat"]["cpus"].as_object().unwrap();
        assert!(
            cpus.values().all(|c| c["irq"]["count"].as_u64() > Some(0)),
            "{doc}"
        );
        report_skip(
            "without_the_tracer_it_says_why_and_measures_nothing",
            "this kernel has timerlat: one run was checked instead of the refusal",
        );
        return;
    }
    let output = latencyd()
        .args(["measure", "--timerlat", "-q", "-l", "100"])
        .args(run_flags())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    let err = stderr_of(&output);
    let why = if has == Some(false) {
        "no timerlat tracer"
    } else {
        // No tracefs, or no permission to it.
        "tracefs"
    };
    assert!(err.contains("--timerlat:") && err.contains(why), "{err}");
    assert!(!stdout_of(&output).contains("T: 0"), "no sampler ran");
}

/// A stand-in for tracefs whose `timerlat_fd` of CPU 0 is a FIFO that a
/// thread here feeds one byte every 10 ms, as the kernel's file returns
/// once a period; the thread stops when `stop` is set.
fn fake_timerlat_fd(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (tempfile::TempDir, std::thread::JoinHandle<()>) {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let cpu0 = dir.path().join("osnoise/per_cpu/cpu0");
    std::fs::create_dir_all(&cpu0).unwrap();
    let fifo = cpu0.join("timerlat_fd");
    latencyd::rt::sys::make_fifo(&fifo).unwrap();
    let feeder = std::thread::spawn(move || {
        // Blocks until the workload opens its end.
        let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if writer.write_all(b"x").is_err() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    });
    (dir, feeder)
}

/// The kernel ends a user-space timerlat workload with SIGKILL when
/// another program writes osnoise/cpus or osnoise/options: latencyd's
/// threads live in a child process, so the kill ends the child, which
/// latencyd notices and explains, and never latencyd itself. A stop asked
/// for ends the child cleanly.
#[test]
fn the_workload_process_takes_the_kernels_kill_and_stops_when_asked() {
    use latencyd::instruments::timerlat::workload::Workload;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_latencyd"));
    let missing = tempfile::tempdir().unwrap();
    let err = Workload::start(bin, missing.path(), &[0], 1).err().unwrap();
    assert!(
        err.contains("cannot open") && err.contains("timerlat_fd"),
        "{err}"
    );
    if !privileged() {
        // The file opens; the policy is refused, and said.
        let stop = Arc::new(AtomicBool::new(false));
        let (dir, feeder) = fake_timerlat_fd(Arc::clone(&stop));
        let err = Workload::start(bin, dir.path(), &[0], 1).err().unwrap();
        assert!(err.contains("SCHED_FIFO"), "{err}");
        stop.store(true, Ordering::Relaxed);
        feeder.join().unwrap();
        report_skip(
            "the_workload_process_takes_the_kernels_kill_and_stops_when_asked",
            "SCHED_FIFO needs root: the refusals were checked, not the kill and the stop",
        );
        return;
    }
    // A read that fails (here a directory in the file's place; on a host,
    // the CPU gone offline) ends the child, and latencyd hears why.
    let gone = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(gone.path().join("osnoise/per_cpu/cpu0/timerlat_fd")).unwrap();
    // It may end before it says it is ready: then the start says why.
    let said = match Workload::start(bin, gone.path(), &[0], 1) {
        Err(why) => why,
        Ok(mut workload) => {
            let mut said = String::new();
            wait_until(
                "the child to end on its failed read",
                std::time::Duration::from_millis(20),
                std::time::Duration::from_secs(5),
                || {
                    workload.ended().is_some_and(|why| {
                        said = why;
                        true
                    })
                },
            );
            said
        }
    };
    assert!(
        said.contains("could not read its CPU's timerlat_fd"),
        "{said}"
    );
    for kill in [true, false] {
        let stop = Arc::new(AtomicBool::new(false));
        let (dir, feeder) = fake_timerlat_fd(Arc::clone(&stop));
        let mut workload = Workload::start(bin, dir.path(), &[0], 1).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(workload.ended(), None, "it runs");
        if kill {
            // What the kernel does to the workload's threads.
            // SAFETY: kill with the child's pid and a valid signal.
            unsafe { libc::kill(workload.pid() as i32, libc::SIGKILL) };
            wait_until(
                "the child to be seen gone",
                std::time::Duration::from_millis(20),
                std::time::Duration::from_secs(5),
                || {
                    workload.ended().is_some_and(|why| {
                        assert!(
                            why.contains("SIGKILL") && why.contains("osnoise/cpus"),
                            "{why}"
                        );
                        true
                    })
                },
            );
            assert_eq!(workload.ended(), None, "said once");
        } else {
            assert_eq!(workload.stop(), None, "a clean stop when asked");
        }
        stop.store(true, Ordering::Relaxed);
        drop(workload);
        feeder.join().unwrap();
    }
}

/// `[timerlat]` on a kernel without the tracer (this machine's) or a user
/// without tracefs: the daemon runs and measures as without it, says why
/// at warn, and the API, the status and the availability gauge say so.
#[test]
fn the_daemon_runs_without_the_tracer_and_says_why() {
    if kernel_has_timerlat() == Some(true) {
        report_skip(
            "the_daemon_runs_without_the_tracer_and_says_why",
            "this kernel has timerlat; the kernel matrix checks the daemon's timerlat",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(daemon_config(
        dir.path(),
        "",
        "",
        "[timerlat]\nenabled = true\n",
    )));
    let (code, body) = daemon.get("/api/v1/timerlat");
    assert_eq!(code, 200);
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (doc["enabled"].as_bool(), doc["available"].as_bool()),
        (Some(true), Some(false))
    );
    let reason = doc["reason"].as_str().unwrap();
    assert!(
        reason.contains("timerlat") || reason.contains("tracefs"),
        "{reason}"
    );
    let (_, status) = daemon.get("/api/v1/status");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["timerlat"]["reason"], doc["reason"], "{status}");
    let (_, metrics) = daemon.get("/metrics");
    assert_eq!(
        metric_value(&metrics, "latencyd_timerlat_available"),
        Some(0.0)
    );
    assert!(
        !metrics.contains("latencyd_timerlat_latency_seconds"),
        "no series without samples"
    );
    assert_eq!(
        daemon.get("/healthz").0,
        200,
        "the samplers run as without it"
    );
    assert!(
        daemon
            .log_text()
            .contains("timerlat is enabled but unavailable"),
        "{}",
        daemon.log_text()
    );
}

#[test]
fn hwlat_knobs_are_checked_and_a_kernel_without_it_is_told_why() {
    for (args, says) in [
        (
            vec!["--hwlat-width", "1s", "--hwlat-window", "1s"],
            "--hwlat-width",
        ),
        (vec!["--hwlat-threshold", "0"], "--hwlat-threshold"),
        (vec!["--timerlat"], "--hwlat"),
    ] {
        let output = latencyd()
            .args(["measure", "--hwlat", "-D", "1"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr_of(&output).contains(says),
            "{args:?}: {}",
            stderr_of(&output)
        );
    }
    let has = std::fs::read_to_string("/sys/kernel/tracing/available_tracers")
        .ok()
        .map(|t| t.split_whitespace().any(|name| name == "hwlat"));
    if has == Some(true) {
        report_skip(
            "hwlat_knobs_are_checked_and_a_kernel_without_it_is_told_why",
            "this kernel has hwlat: the kernel matrix runs it",
        );
        return;
    }
    let output = latencyd()
        .args(["measure", "--hwlat", "-D", "1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    let err = stderr_of(&output);
    let why = if has == Some(false) {
        "no hwlat tracer"
    } else {
        "tracefs"
    };
    assert!(err.contains("--hwlat:") && err.contains(why), "{err}");
}

/// `[hwnoise]` beside another program that runs hwlat (a stand-in
/// tracefs whose instance `rtla` has it): every window is skipped as
/// busy, counted, logged and filed in the record, nothing of latencyd's is
/// made, and the samplers run on. Needs no privileges and no hwlat.
#[test]
fn a_hwnoise_window_beside_another_hwlat_user_is_skipped_counted_and_filed() {
    let dir = tempfile::tempdir().unwrap();
    let tracefs = dir.path().join("tracefs");
    std::fs::create_dir_all(tracefs.join("instances/rtla")).unwrap();
    std::fs::write(tracefs.join("available_tracers"), "hwlat nop\n").unwrap();
    std::fs::write(tracefs.join("instances/rtla/current_tracer"), "hwlat\n").unwrap();
    let record = dir.path().join("record");
    let sections = format!(
        "[forensics]\ntracefs = \"{}\"\n[record]\nenabled = true\ndir = \"{}\"\n\
         interval = \"1s\"\n[hwnoise]\nenabled = true\nevery = \"2s\"\nat = \"0s\"\n\
         duration = \"1s\"\nwidth = \"100ms\"\nwindow = \"200ms\"\n",
        tracefs.display(),
        record.display()
    );
    let mut daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(daemon_config(
        dir.path(),
        "",
        "",
        &sections,
    )));
    let busy = "latencyd_hwnoise_windows_skipped_total{reason=\"busy\"}";
    let began = std::time::Instant::now();
    let mut metrics = String::new();
    while began.elapsed() < std::time::Duration::from_secs(15) {
        metrics = daemon.get("/metrics").1;
        if metric_value(&metrics, busy).unwrap_or(0.0) >= 2.0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(
        metric_value(&metrics, busy).unwrap_or(0.0) >= 2.0,
        "two windows in 15 s:\n{metrics}"
    );
    assert_eq!(
        metric_value(&metrics, "latencyd_hwnoise_windows_total"),
        Some(0.0)
    );
    assert_eq!(metric_value(&metrics, "latencyd_hwnoise_active"), Some(0.0));
    assert!(
        !metrics.contains("latencyd_hwnoise_kept_apart_total{"),
        "{metrics}"
    );
    let (_, status) = daemon.get("/api/v1/status");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let last = &status["hwnoise"]["last_window"];
    assert_eq!(last["outcome"], "skipped", "{status}");
    assert_eq!(last["reason"], "busy");
    assert!(
        last["why"]
            .as_str()
            .unwrap()
            .contains("instance rtla (hwlat)"),
        "{last}"
    );
    assert_eq!(daemon.get("/healthz").0, 200, "the samplers run on");
    let instances: Vec<_> = std::fs::read_dir(tracefs.join("instances"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(instances, vec!["rtla"], "latencyd made nothing");
    daemon.signal(libc::SIGTERM);
    let (exit, log) = daemon.wait_with_log();
    assert!(exit.success(), "{exit}: {log:?}");
    assert!(
        log.iter()
            .any(|l| l.contains("hwnoise window skipped (busy)")),
        "{log:?}"
    );
    let mut filed = 0;
    for file in std::fs::read_dir(&record).unwrap() {
        let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
        filed += text
            .lines()
            .filter(|l| l.starts_with("#[latencyd hwnoise ") && l.ends_with("reason=busy]"))
            .count();
    }
    assert!(filed >= 2, "the record files each skipped window");
}
