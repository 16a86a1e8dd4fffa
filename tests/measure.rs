//! `latencyd measure` end to end: the real binary, its text and JSON
//! output, signals, bad usage, and the real-time and non-real-time paths.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::cyclictest::{self};
use common::measure::*;
use common::*;
use serde_json::Value;

fn u(value: &Value, key: &str) -> u64 {
    value[key]
        .as_u64()
        .unwrap_or_else(|| panic!("'{key}' is not an unsigned integer in {value}"))
}

/// Checks one thread of a `--json` file against the schema and the
/// accounting invariants; returns its cycles + missed.
fn check_thread(thread: &Value, histogram_expected: bool) -> u64 {
    for key in [
        "histogram",
        "cycles",
        "min",
        "max",
        "avg",
        "cpu",
        "node",
        "missed",
        "overflows",
        "spikes",
        "p50",
        "p90",
        "p99",
        "p999",
        "p9999",
        "tid",
        "priority",
        "realtime",
    ] {
        assert!(thread.get(key).is_some(), "thread lacks '{key}': {thread}");
    }
    let cycles = u(thread, "cycles");
    let histogram = thread["histogram"].as_object().unwrap();
    let in_bins: u64 = histogram.values().map(|v| v.as_u64().unwrap()).sum();
    if histogram_expected {
        assert_eq!(
            in_bins + u(thread, "overflows"),
            cycles,
            "histogram + overflows must equal cycles: {thread}"
        );
        for bin in histogram.keys() {
            bin.parse::<u64>().expect("bins are numbered");
        }
    } else {
        assert!(histogram.is_empty(), "no -h, no bins (as cyclictest)");
    }
    let (min, max) = (u(thread, "min"), u(thread, "max"));
    let avg = thread["avg"].as_f64().unwrap();
    if cycles > 0 {
        assert!(min as f64 <= avg && avg <= max as f64 + 1.0, "{thread}");
        let mut previous = min;
        for p in ["p50", "p90", "p99", "p999", "p9999"] {
            let value = u(thread, p);
            assert!(
                previous <= value && value <= max,
                "{p} out of order: {thread}"
            );
            previous = value;
        }
    }
    cycles + u(thread, "missed")
}

/// `latencyd measure ARGS` with the run's flags, stdout and stderr piped,
/// for a test that signals it while it runs.
fn spawn_measure(args: &[&str]) -> std::process::Child {
    latencyd()
        .arg("measure")
        .args(args)
        .args(run_flags())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Sends `signal` to a child that is still running.
fn send(child: &std::process::Child, signal: i32) {
    // SAFETY: kill with a valid pid and signal.
    unsafe { libc::kill(child.id() as i32, signal) };
}

#[test]
fn json_follows_cyclictest_schema_and_accounts_for_every_period() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    // 1500 periods of 1 ms, so that every sampler's accounting is checked.
    run_ok(
        latencyd()
            .args([
                "measure", "-D", "1500ms", "-i", "1ms", "-q", "-h", "200", "--json",
            ])
            .arg(&json)
            .args(run_flags()),
    );
    let doc = json_of(&json);
    assert_eq!(doc["file_version"], 1);
    for key in [
        "cmdline:",
        "rt_test_version:",
        "start_time",
        "end_time",
        "return_code",
    ] {
        assert!(doc.get(key).is_some(), "missing '{key}'");
    }
    for key in [
        "sysname", "nodename", "release", "version", "machine", "realtime",
    ] {
        assert!(doc["sysinfo"].get(key).is_some(), "sysinfo lacks '{key}'");
    }
    assert_eq!(doc["resolution_in_ns"], 0);
    assert_eq!(doc["return_code"], 0);
    let threads = doc["thread"].as_object().unwrap();
    assert_eq!(u(&doc, "num_threads") as usize, threads.len());
    assert_eq!(threads.len(), usable_cpus());
    for (idx, thread) in threads {
        let periods = check_thread(thread, true);
        // The run is 1500 periods long; every one is a sample or a miss.
        assert_eq!(periods, 1500, "thread {idx}: cycles + missed: {thread}");
        assert_eq!(thread["realtime"].as_bool(), Some(privileged()));
    }
    assert_eq!(doc["latencyd"]["realtime"].as_bool(), Some(privileged()));
    if !privileged() {
        report_skip(
            "json_follows_cyclictest_schema_and_accounts_for_every_period",
            "not root: measured on the non-real-time path only",
        );
    }
}

#[test]
fn text_output_parses_like_cyclictests_and_agrees_with_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    // A cyclictest command line as people type it, unchanged.
    let output = run_ok(
        latencyd()
            .args([
                "measure", "-m", "-S", "-p80", "-i1000", "-l", "300", "-q", "-h", "50",
            ])
            .arg(format!("--json={}", json.display()))
            .args(run_flags()),
    );
    let text = stdout_of(&output);
    let parsed = cyclictest::parse(&text).unwrap();
    let doc = json_of(&json);
    let histogram = parsed.histogram.as_ref().expect("a histogram block");
    // cyclictest prints no summary lines with -q -h: only the histogram.
    assert!(parsed.threads.is_empty(), "{text}");
    assert_eq!(histogram.rows.len(), 50);
    let n = usable_cpus();
    for footer in [
        "Total",
        "Min Latencies",
        "Avg Latencies",
        "Max Latencies",
        "Histogram Overflows",
    ] {
        assert_eq!(histogram.footers[footer].len(), n, "{footer}: {text}");
    }
    assert_eq!(histogram.overflow_samples.len(), n);
    for i in 0..n {
        let thread = &doc["thread"][i.to_string()];
        assert_eq!(u(thread, "cycles"), 300);
        let column: u64 = histogram.rows.values().map(|row| row[i]).sum();
        assert_eq!(column, histogram.footers["Total"][i]);
        assert_eq!(
            histogram.footers["Total"][i] + histogram.footers["Histogram Overflows"][i],
            300
        );
        assert_eq!(histogram.footers["Min Latencies"][i], u(thread, "min"));
        assert_eq!(histogram.footers["Max Latencies"][i], u(thread, "max"));
        assert_eq!(
            histogram.footers["Histogram Overflows"][i],
            u(thread, "overflows")
        );
        let (listed, others) = &histogram.overflow_samples[i];
        assert_eq!(listed.len() as u64 + others, u(thread, "overflows"));
        assert!(listed.windows(2).all(|w| w[0] < w[1]) && listed.iter().all(|&c| c < 300));
        for (bin, count) in thread["histogram"].as_object().unwrap() {
            let bin: u64 = bin.parse().unwrap();
            assert_eq!(histogram.rows[&bin][i], count.as_u64().unwrap());
        }
    }

    // Without -h, -q gives exactly one summary line per thread.
    let output = run_ok(
        latencyd()
            .args(["measure", "-q", "-l", "100", "-i", "500"])
            .args(run_flags()),
    );
    let parsed = cyclictest::parse(&stdout_of(&output)).unwrap();
    assert_eq!(parsed.threads.len(), n);
    for (idx, line) in parsed.threads.values().enumerate() {
        // Each further thread 500 µs slower, as cyclictest spaces them.
        assert_eq!(
            (line.cycles, line.interval_us, line.priority),
            (100, 500 + 500 * idx as u64, 80)
        );
        assert!(line.min <= line.avg && line.avg <= line.max && line.act <= line.max);
        assert!(line.tid > 0);
    }
}

#[test]
fn histofall_adds_an_all_threads_column() {
    let output = run_ok(
        latencyd()
            .args(["measure", "-q", "-l", "100", "-H", "30"])
            .args(run_flags()),
    );
    let parsed = cyclictest::parse(&stdout_of(&output)).unwrap();
    let block = parsed.histogram.unwrap();
    let n = usable_cpus();
    let columns = if n > 1 { n + 1 } else { n };
    assert!(block.rows.values().all(|row| row.len() == columns));
    assert_eq!(block.footers["Total"].len(), columns);
    assert_eq!(block.footers["Min Latencies"].len(), n);
    if n > 1 {
        let total = &block.footers["Total"];
        assert_eq!(total[..n].iter().sum::<u64>(), total[n]);
        for row in block.rows.values() {
            assert_eq!(row[..n].iter().sum::<u64>(), row[n]);
        }
    }
}

#[test]
fn the_checked_in_real_cyclictest_outputs_parse() {
    let read =
        |name: &str| std::fs::read_to_string(data_path(&format!("cyclictest/{name}"))).unwrap();
    // Captured from cyclictest 2.40: `cyclictest -q -m -S -p80 -i1000 -l 200 …`.
    let quiet = cyclictest::parse(&read("quiet.txt")).unwrap();
    assert_eq!(quiet.threads.len(), 2);
    assert_eq!(quiet.threads[&0].cycles, 200);
    assert_eq!(
        quiet.comments,
        vec!["# /dev/cpu_dma_latency set to 0us".to_string()]
    );
    let live = cyclictest::parse(&read("live.txt")).unwrap();
    assert_eq!(live.threads[&0].cycles, 200, "the last live line wins");
    let histogram = cyclictest::parse(&read("histogram.txt")).unwrap();
    let block = histogram.histogram.unwrap();
    assert_eq!(block.rows.len(), 20);
    assert_eq!(
        block.footers["Total"][0] + block.footers["Histogram Overflows"][0],
        200
    );
    let histofall = cyclictest::parse(&read("histofall.txt"))
        .unwrap()
        .histogram
        .unwrap();
    assert_eq!(histofall.footers["Total"].len(), 3);
    let nsecs = cyclictest::parse(&read("nsecs.txt")).unwrap();
    assert!(nsecs.threads[&0].min > 1000);
    let json: Value = serde_json::from_str(&read("run.json")).unwrap();
    assert_eq!(json["thread"]["0"]["cycles"], 200);
}

#[test]
fn sigint_ends_the_run_and_still_prints_the_results() {
    let child = spawn_measure(&["-q", "-i", "1ms"]);
    std::thread::sleep(Duration::from_millis(700));
    send(&child, libc::SIGINT);
    let started = Instant::now();
    let output = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(output.status.success(), "{}", stderr_of(&output));
    let parsed = cyclictest::parse(&stdout_of(&output)).unwrap();
    assert_eq!(parsed.threads.len(), usable_cpus());
    assert!(parsed.threads.values().all(|t| t.cycles > 0), "{parsed:?}");
}

#[test]
fn sigusr1_prints_the_current_status_on_stderr_and_the_run_goes_on() {
    // cyclictest's status block: a harness that asks for it must not end
    // the run (SIGUSR1's default action would).
    let child = spawn_measure(&["-q", "-i", "1ms", "-D", "2"]);
    std::thread::sleep(Duration::from_millis(900));
    send(&child, libc::SIGUSR1);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let stderr = stderr_of(&output);
    let block = stderr
        .split("# cyclictest current status:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no status block on stderr:\n{stderr}"));
    let status = cyclictest::parse(block.split("#---").next().unwrap()).unwrap();
    let end = cyclictest::parse(&stdout_of(&output)).unwrap();
    assert_eq!(status.threads.len(), usable_cpus(), "{stderr}");
    for (idx, now) in &status.threads {
        // Taken mid-run: some samples, fewer than the whole run's.
        let total = end.threads[idx].cycles;
        assert!(now.cycles > 0 && now.cycles < total, "{now:?} vs {total}");
    }
}

#[test]
fn threads_without_samples_still_give_valid_json() {
    // Stopped during the warm-up: every thread has zero samples, where
    // cyclictest would write "avg": -nan.
    let child = spawn_measure(&["-q", "--warmup", "30s", "-h", "10", "--json", "-"]);
    std::thread::sleep(Duration::from_millis(500));
    send(&child, libc::SIGTERM);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let doc: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON only ({e}): {}", stdout_of(&output)));
    for thread in doc["thread"].as_object().unwrap().values() {
        assert_eq!(u(thread, "cycles"), 0);
        assert_eq!(thread["avg"].as_f64(), Some(0.0));
        check_thread(thread, true);
    }
}

#[test]
fn nanosecond_mode_reports_nanoseconds() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ns.json");
    let output = run_ok(
        latencyd()
            .args(["measure", "-q", "-N", "-l", "50", "--json"])
            .arg(&json)
            .args(run_flags()),
    );
    let doc = json_of(&json);
    assert_eq!(doc["resolution_in_ns"], 1);
    assert_eq!(doc["latencyd"]["unit"], "ns");
    let parsed = cyclictest::parse(&stdout_of(&output)).unwrap();
    for (idx, line) in &parsed.threads {
        let thread = &doc["thread"][idx.to_string()];
        check_thread(thread, false);
        assert_eq!((line.min, line.max), (u(thread, "min"), u(thread, "max")));
    }
}

#[test]
fn bad_usage_names_the_option_and_exits_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["-i", "0"], "--interval"),
        (&["-i", "fast"], "--interval"),
        (&["-i", "2h"], "--interval"),
        (&["-D", "1.5s"], "--duration"),
        (&["-D", "10us", "-i", "1ms"], "--duration"),
        (&["--cpus", "0-"], "--cpus"),
        (&["--cpus", "4095"], "--cpus"),
        (&["--cpus", "1000"], "--cpus"),
        (&["--cpus", "0,0"], "--cpus"),
        (&["-p", "100"], "--priority"),
        (&["-p", "-3"], "--priority"),
        (&["-i", "-5"], "--interval"),
        (&["-h", "0"], "--histogram"),
        (&["--warmup", "soon"], "--warmup"),
        (&["--spike-threshold=-1"], "--spike-threshold"),
        (&["--spike-threshold", "5 parsecs"], "--spike-threshold"),
    ];
    for (args, option) in cases {
        let output = latencyd().arg("measure").args(*args).output().unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(option),
            "{args:?} should name {option}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{args:?} printed results");
    }
    // getopt's own errors (unknown or ambiguous options, a missing value)
    // and values with no number exit 2 as well.
    for args in [
        &["--bogus"][..],
        &["-l", "many"],
        &["--prio=5"],
        &["-e"],
        &["-p"],
    ] {
        let output = latencyd().arg("measure").args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stderr_of(&output).contains("measure"), "{args:?}");
    }
}

#[test]
fn values_cyclictest_runs_with_run_here_too_and_what_changed_is_said() {
    // cyclictest switches a priority without a real-time policy to
    // SCHED_FIFO, falls back to SCHED_OTHER for a policy it does not know,
    // cuts -h to 1000000 bins, holds a negative --latency as 0, and reads
    // "90x" as 90: each runs, and each change is a note on stderr.
    let cases: &[(&[&str], &str)] = &[
        (&["--policy", "other", "-p", "10"], "SCHED_FIFO at 10"),
        (&["--policy", "deadline"], "not a policy"),
        (&["-h", "99999999", "-q"], "cut to 1000000"),
        (&["--latency", "-5"], "held as 0"),
        (&["-p", "90x"], "'x' ignored"),
        (&["-q", "stray"], "ignoring 'stray'"),
    ];
    for (args, said) in cases {
        let output = latencyd()
            .args([
                "measure",
                "-l",
                "3",
                "-i",
                "1ms",
                "-a",
                "0",
                "--allow-non-rt",
            ])
            .args(*args)
            .output()
            .unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            stderr.contains(said),
            "{args:?} should say {said:?}: {stderr}"
        );
    }
}

#[test]
fn without_privileges_it_refuses_unless_allowed_and_then_marks_results() {
    let dir = tempfile::tempdir().unwrap();
    let output = unprivileged_latencyd(dir.path(), false)
        .unwrap()
        .args(["measure", "-q", "-l", "20", "--default-system"])
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "no results without RT: {}",
        stdout_of(&output)
    );
    assert!(
        stderr.contains("--allow-non-rt")
            && (stderr.contains("CAP_IPC_LOCK") || stderr.contains("CAP_SYS_NICE")),
        "the error says how to fix it: {stderr}"
    );

    let output = unprivileged_latencyd(dir.path(), false)
        .unwrap()
        .args([
            "measure",
            "-q",
            "-l",
            "20",
            "--default-system",
            "--allow-non-rt",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["latencyd"]["realtime"], false);
    for thread in doc["thread"].as_object().unwrap().values() {
        assert_eq!(thread["realtime"], false);
        assert_eq!(u(thread, "cycles"), 20);
    }
    assert!(stderr_of(&output).contains("not real-time"));

    let output = unprivileged_latencyd(dir.path(), false)
        .unwrap()
        .args([
            "measure",
            "-q",
            "-l",
            "20",
            "--default-system",
            "--allow-non-rt",
        ])
        .output()
        .unwrap();
    let text = stdout_of(&output);
    assert!(text.starts_with("# latencyd: NOT REAL-TIME"), "{text}");
    assert_eq!(
        cyclictest::parse(&text).unwrap().threads.len(),
        usable_cpus()
    );
}

/// While a run is going, every sampler thread must be pinned to its CPU
/// and scheduled SCHED_FIFO at the requested priority, as the kernel
/// itself reports it in /proc.
#[test]
fn samplers_run_pinned_at_the_requested_policy_and_priority() {
    if !privileged() {
        report_skip(
            "samplers_run_pinned_at_the_requested_policy_and_priority",
            "not root: SCHED_FIFO is not available to check",
        );
        return;
    }
    let mut child = latencyd()
        .args(["measure", "-q", "-D", "3s", "-p", "71"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap();
    let mut seen = Vec::new();
    for task in tasks {
        let path = task.unwrap().path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap();
        let Some(cpu) = comm.trim().strip_prefix("sampler-cpu") else {
            continue;
        };
        let stat = std::fs::read_to_string(path.join("stat")).unwrap();
        // Fields after the ")" that ends comm: rt_priority is field 40 and
        // policy field 41 of the whole line.
        let after_comm: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let (rt_priority, policy) = (after_comm[37], after_comm[38]);
        assert_eq!(
            (policy, rt_priority),
            ("1", "71"),
            "CPU {cpu}: SCHED_FIFO 71"
        );
        let status = std::fs::read_to_string(path.join("status")).unwrap();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_string();
        assert_eq!(allowed, cpu, "sampler-cpu{cpu} is pinned to its CPU");
        seen.push(cpu.to_string());
    }
    assert_eq!(seen.len(), usable_cpus(), "one sampler per CPU");
    send(&child, libc::SIGINT);
    assert!(child.wait().unwrap().success());
}
