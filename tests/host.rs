//! The host's fingerprint on a running daemon: facts changed on this
//! machine at runtime (an idle state disabled, `/dev/cpu_dma_latency`
//! held by another process, an IRQ moved) are seen in `/api/v1/host`'s
//! history, the metrics, the log and the record, and so is their revert.
//! Changing them needs root; without it the test checks what a reader of
//! the API sees and says what it skipped.

mod common;

use std::io::Write as _;
use std::time::{Duration, Instant};

use common::{
    Daemon, daemon_config, latencyd, metric_value, one_at_a_time, report_skip, wait_until,
};
use serde_json::Value;

/// What the facts are read at: often enough that a test waits seconds.
const REREAD: &str = "1s";
/// The promise: a change is seen within a minute.
const SEEN_WITHIN: Duration = Duration::from_secs(60);

fn host(daemon: &Daemon) -> Value {
    let (status, body) = daemon.get("/api/v1/host");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn fact(host: &Value, name: &str) -> Option<String> {
    host["facts"][name]["value"].as_str().map(String::from)
}

/// Waits until `/api/v1/host` lists a change of `name` after the first
/// `after` changes, and checks the metrics and the log agree. Returns the
/// change.
fn wait_for_change(daemon: &Daemon, name: &str, after: usize, what: &str) -> Value {
    let started = Instant::now();
    let mut found = Value::Null;
    wait_until(what, Duration::from_millis(200), SEEN_WITHIN, || {
        let h = host(daemon);
        let changes = h["changes"].as_array().cloned().unwrap_or_default();
        if let Some(c) = changes
            .iter()
            .skip(after)
            .find(|c| !c["facts"][name].is_null())
        {
            found = c.clone();
            true
        } else {
            false
        }
    });
    eprintln!("{what}: seen after {:?}", started.elapsed());
    let (_, scrape) = daemon.get("/metrics");
    let total = metric_value(&scrape, "latencyd_host_fingerprint_changes_total").unwrap();
    assert!(total >= (after + 1) as f64, "{scrape}");
    let id = found["to"].as_str().unwrap();
    assert!(
        scrape.contains(&format!("fingerprint=\"{id}\"")) || host(daemon)["fingerprint"] != id,
        "the info metric names the new identifier {id}"
    );
    let family = name.split('[').next().unwrap();
    assert!(
        scrape.contains(&format!(
            "latencyd_host_fact_changed_timestamp_seconds{{fact=\"{family}\"}}"
        )),
        "{scrape}"
    );
    wait_until(
        "the change in the log",
        Duration::from_millis(100),
        Duration::from_secs(5),
        || daemon.log_text().contains(&format!("{name}: ")),
    );
    found
}

fn changes(daemon: &Daemon) -> usize {
    host(daemon)["changes"].as_array().map_or(0, Vec::len)
}

#[test]
fn runtime_changes_of_the_host_are_seen_reverted_logged_and_recorded() {
    // It changes the host's facts: no other test of this file watches
    // them meanwhile.
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record");
    let config = daemon_config(
        dir.path(),
        "",
        "",
        &format!(
            "[host]\nreread_interval = \"{REREAD}\"\n[record]\nenabled = true\ndir = \"{}\"\ninterval = \"1s\"\n",
            record.display()
        ),
    );
    let mut daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    let first = host(&daemon);
    let id = first["fingerprint"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 12);
    assert!(fact(&first, "kernel.release").is_some());
    assert!(!first["cpus"].as_array().unwrap().is_empty());
    let (_, status) = daemon.get("/api/v1/status");
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["fingerprint"], id.as_str());
    assert_eq!(status["topology"], first["cpus"]);

    // The identifier the test's own changes start from and return to:
    // read once the record has filed an interval, so that a change made by
    // something else at the daemon's start (seen here when this ran right
    // after tests/full/e2e_prometheus.rs) is behind it.
    wait_until(
        "the record's first interval",
        Duration::from_millis(100),
        Duration::from_secs(10),
        || {
            std::fs::read_dir(&record).is_ok_and(|files| {
                files.filter_map(Result::ok).any(|f| {
                    std::fs::read_to_string(f.path()).is_ok_and(|t| t.contains("\nTag=cpu"))
                })
            })
        },
    );
    let baseline = host(&daemon)["fingerprint"].as_str().unwrap().to_string();
    if baseline != id {
        eprintln!(
            "the host changed at the daemon's start, not by this test: {}",
            host(&daemon)["changes"]
        );
    }
    let mut exercised = Vec::new();
    if !common::privileged() {
        report_skip(
            "runtime_changes_of_the_host_are_seen_reverted_logged_and_recorded",
            "not root: no idle state, PM QoS value or IRQ affinity can be changed; only the \
             facts as read were checked",
        );
    } else {
        exercised.extend(idle_state_change(&daemon));
        exercised.extend(pm_qos_change(&daemon));
        exercised.extend(irq_change(&daemon));
    }

    // Every change is in the record: a host facts line for each identifier
    // the daemon went through, and the entries carry the identifier.
    std::thread::sleep(Duration::from_millis(1_500));
    let history = host(&daemon)["changes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    daemon.signal(libc::SIGTERM);
    let (exit, _) = daemon.wait_with_log();
    assert!(exit.success());
    let mut text = String::new();
    for entry in std::fs::read_dir(&record).unwrap() {
        text.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    let host_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("#[latencyd host "))
        .collect();
    assert!(!host_lines.is_empty(), "no host facts line: {text}");
    // The record starts with the facts of its first interval's end: the
    // first read's, unless something else on the host changed before it,
    // and every facts line it has is of an identifier the daemon went
    // through.
    let went_through: Vec<String> = std::iter::once(id.clone())
        .chain(
            history
                .iter()
                .flat_map(|c| [&c["from"], &c["to"]].map(|v| v.as_str().unwrap().to_string())),
        )
        .collect();
    for line in &host_lines {
        let line_id = line.split(' ').nth(2).unwrap();
        assert!(
            went_through.iter().any(|i| i == line_id),
            "{line_id} is none of {went_through:?}: {text}"
        );
    }
    assert!(
        text.contains(&format!(" fingerprint={baseline}]")),
        "{text}"
    );
    for to in &exercised {
        assert!(
            host_lines
                .iter()
                .any(|l| l.starts_with(&format!("#[latencyd host {to} "))),
            "the record has no facts line for {to}: {host_lines:#?}"
        );
    }
    report_by_fingerprint_and_compare(&record, &host_lines, !exercised.is_empty());
    // Changed and reverted: back at the first identifier, which the record
    // writes again.
    if !exercised.is_empty() {
        assert!(host_lines.len() >= 3, "{host_lines:#?}");
        assert_eq!(
            host_lines.last().unwrap().split(' ').nth(2),
            Some(baseline.as_str()),
            "the host is back as it was"
        );
    }
}

/// Disables the deepest idle state of the last CPU, then enables it again.
fn idle_state_change(daemon: &Daemon) -> Vec<String> {
    let cpu = common::usable_cpus() - 1;
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
    let Some(state) = std::fs::read_dir(&dir).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("disable").exists())
            .max()
    }) else {
        report_skip("idle_state_change", &format!("{dir} has no idle states"));
        return Vec::new();
    };
    let disable = state.join("disable");
    let before = std::fs::read_to_string(&disable).unwrap();
    let name = format!("cpuidle.states[cpu{cpu}]");
    let n = changes(daemon);
    if std::fs::write(&disable, "1").is_err() {
        report_skip(
            "idle_state_change",
            &format!("{} is not writable", disable.display()),
        );
        return Vec::new();
    }
    let changed = wait_for_change(daemon, &name, n, "an idle state disabled");
    let _ = std::fs::write(&disable, before.trim());
    let reverted = wait_for_change(daemon, &name, n + 1, "the idle state enabled again");
    assert_eq!(
        changed["facts"][&name]["to"],
        reverted["facts"][&name]["from"]
    );
    assert_eq!(
        changed["facts"][&name]["from"],
        reverted["facts"][&name]["to"]
    );
    assert_eq!(
        reverted["to"], changed["from"],
        "back to the first identifier"
    );
    vec![changed["to"].as_str().unwrap().to_string()]
}

/// Holds a PM QoS request of 7 µs from this process, then lets it go.
fn pm_qos_change(daemon: &Daemon) -> Vec<String> {
    let now = fact(&host(daemon), "pm_qos.cpu_dma_latency_us");
    if now
        .as_deref()
        .and_then(|v| v.parse::<i32>().ok())
        .is_some_and(|v| v <= 7)
    {
        report_skip(
            "pm_qos_change",
            &format!("another process already holds {now:?} µs: a 7 µs request changes nothing"),
        );
        return Vec::new();
    }
    let n = changes(daemon);
    let mut hold = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .unwrap();
    hold.write_all(&7i32.to_ne_bytes()).unwrap();
    let changed = wait_for_change(
        daemon,
        "pm_qos.cpu_dma_latency_us",
        n,
        "a PM QoS request held",
    );
    assert_eq!(changed["facts"]["pm_qos.cpu_dma_latency_us"]["to"], "7");
    let holders = fact(&host(daemon), "pm_qos.holders").unwrap_or_default();
    assert!(
        holders.contains(&format!("({})", std::process::id())),
        "the holder is this test process: {holders}"
    );
    drop(hold);
    let reverted = wait_for_change(
        daemon,
        "pm_qos.cpu_dma_latency_us",
        n + 1,
        "the request let go",
    );
    assert_eq!(reverted["facts"]["pm_qos.cpu_dma_latency_us"]["from"], "7");
    vec![changed["to"].as_str().unwrap().to_string()]
}

/// Moves an IRQ that reaches a measured CPU onto one CPU, then puts its
/// affinity back.
fn irq_change(daemon: &Daemon) -> Vec<String> {
    let facts = host(daemon)["facts"].as_object().cloned().unwrap();
    let cpus = common::usable_cpus();
    for (name, _) in facts.iter().filter(|(n, _)| n.starts_with("irq[")) {
        let irq = &name[4..name.len() - 1];
        let path = format!("/proc/irq/{irq}/smp_affinity_list");
        let Ok(before) = std::fs::read_to_string(&path) else {
            continue;
        };
        let effective = std::fs::read_to_string(format!("/proc/irq/{irq}/effective_affinity_list"))
            .unwrap_or_default();
        let target = (0..cpus)
            .map(|c| c.to_string())
            .find(|c| *c != effective.trim() && *c != before.trim());
        let Some(target) = target else { continue };
        let n = changes(daemon);
        if std::fs::write(&path, &target).is_err() {
            continue;
        }
        let changed = wait_for_change(daemon, name, n, "an IRQ moved");
        let _ = std::fs::write(&path, before.trim());
        wait_for_change(daemon, name, n + 1, "the IRQ's affinity put back");
        return vec![changed["to"].as_str().unwrap().to_string()];
    }
    report_skip(
        "irq_change",
        "no IRQ reaching a measured CPU accepts a new affinity here",
    );
    Vec::new()
}

/// `latencyd report --by-fingerprint` and `--compare` on the record the
/// daemon wrote across the changes.
fn report_by_fingerprint_and_compare(record: &std::path::Path, host_lines: &[&str], changed: bool) {
    let out = common::run_ok(latencyd().arg("report").arg("--by-fingerprint").arg(record));
    let text = common::stdout_of(&out);
    let epochs = text.lines().filter(|l| l.starts_with("epoch ")).count();
    // One epoch per run of intervals under one identifier: as many as the
    // record's facts lines say (the first file's, then one per change).
    assert_eq!(epochs, host_lines.len(), "{text}\n{host_lines:#?}");
    let out = common::run_ok(
        latencyd()
            .args(["report", "--by-fingerprint", "--json"])
            .arg(record),
    );
    let json: Value = serde_json::from_str(&common::stdout_of(&out)).unwrap();
    let parts = json["epochs"].as_array().unwrap();
    assert_eq!(parts.len(), epochs);
    if !changed {
        return;
    }
    assert!(text.contains("changed: "), "{text}");
    // The first epoch against the second: what the change was, with both
    // distributions, in text, JSON and a plot.
    let range = |p: &Value| {
        format!(
            "{}..{}",
            p["from"].as_str().unwrap(),
            p["to"].as_str().unwrap()
        )
    };
    let (a, b) = (range(&parts[0]), range(&parts[1]));
    let plot = record.with_file_name("compare.svg");
    let out = common::run_ok(
        latencyd()
            .arg("report")
            .arg(record)
            .args(["--compare", &a, &b, "--plot"])
            .arg(&plot),
    );
    let compared = common::stdout_of(&out);
    let first_change = parts[1]["changed"].as_object().unwrap();
    assert!(!first_change.is_empty(), "{json}");
    for name in first_change.keys() {
        assert!(
            compared.contains(&format!("changed: {name}: ")),
            "{compared}"
        );
    }
    assert!(compared.contains("p99.99"), "{compared}");
    common::check_plot_svg(
        &std::fs::read_to_string(&plot).unwrap(),
        &[&format!("A {a}"), &format!("B {b}")],
    );
    let out =
        common::run_ok(
            latencyd()
                .arg("report")
                .arg(record)
                .args(["--compare", &a, &b, "--json"]),
        );
    let json: Value = serde_json::from_str(&common::stdout_of(&out)).unwrap();
    assert_eq!(
        json["b"]["changed"].as_object().unwrap().len(),
        first_change.len()
    );
    assert!(json["a"]["samples"].as_u64().unwrap() > 0);
}

/// The file descriptors `pid` has open now.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

fn prlimit_nofile(pid: u32, limit: &str) {
    let out = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={limit}")])
        .output()
        .expect("prlimit runs (util-linux)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn facts_that_cannot_be_read_for_want_of_file_descriptors_are_not_a_host_change() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(
        dir.path(),
        "",
        "",
        &format!("[host]\nreread_interval = \"{REREAD}\"\n"),
    );
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    let before = host(&daemon);
    let pid = daemon.pid();
    // Fewer descriptors than it holds (the soft limit only, so that it
    // can be raised again): every open fails with EMFILE until then.
    std::thread::sleep(Duration::from_millis(300));
    let held = open_fds(pid);
    let soft = |line: &str| line.split_whitespace().nth(3).unwrap_or("1024").to_string();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let was = soft(
        limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap(),
    );
    prlimit_nofile(pid, &format!("{}:", held - 1));
    wait_until(
        "the unreadable facts to be said",
        Duration::from_millis(100),
        Duration::from_secs(10),
        || daemon.log_text().contains("could not be read this time"),
    );
    std::thread::sleep(Duration::from_secs(2));
    prlimit_nofile(pid, &format!("{was}:"));
    wait_until(
        "the facts to be read again",
        Duration::from_millis(100),
        Duration::from_secs(10),
        || {
            daemon
                .log_text()
                .contains("the host's facts are all read again")
        },
    );
    let log = daemon.log_text();
    let said = log
        .lines()
        .find(|l| l.contains("could not be read this time"))
        .unwrap();
    assert!(said.contains("Too many open files"), "{said}");
    assert!(
        !log.contains("the host's configuration changed"),
        "a want of descriptors was taken for a host change: {log}"
    );
    let after = host(&daemon);
    assert_eq!(after["fingerprint"], before["fingerprint"], "{after}");
    assert_eq!(after["changes_total"], 0, "{after}");
    assert_eq!(after["unreadable"], serde_json::json!([]), "{after}");
    let scrape = daemon.get("/metrics").1;
    assert_eq!(
        metric_value(&scrape, "latencyd_host_fingerprint_changes_total"),
        Some(0.0)
    );
    assert_eq!(daemon.get("/healthz").0, 200);
}

/// `host.reread_interval` is applied on reload: facts read once at start
/// are read again every second from the reload on.
#[test]
fn a_reload_puts_a_new_reread_interval_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "[host]\nreread_interval = \"0s\"\n");
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    let first = host(&daemon);
    assert_eq!(first["reread_interval_ns"], 0, "{first}");
    std::thread::sleep(Duration::from_millis(1_500));
    let later = host(&daemon);
    assert_eq!(
        later["read_unix_ns"], first["read_unix_ns"],
        "read once only"
    );
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("reread_interval = \"0s\"", "reread_interval = \"1s\""),
    )
    .unwrap();
    daemon.signal(libc::SIGHUP);
    wait_until(
        "a read after the reload",
        Duration::from_millis(100),
        Duration::from_secs(10),
        || host(&daemon)["read_unix_ns"] != first["read_unix_ns"],
    );
    assert_eq!(host(&daemon)["reread_interval_ns"], 1_000_000_000u64);
    let log = daemon.log_text();
    assert!(
        log.contains("reload: applied host.reread_interval = \"1s\""),
        "{log}"
    );
}
