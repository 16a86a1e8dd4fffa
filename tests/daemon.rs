//! `latencyd run` as a process: real HTTP, the systemd
//! notification protocol over a socket the test owns, signals, and every
//! kind of bad configuration (promtool reads its exposition in
//! tests/full/daemon.rs).

mod common;

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::{Duration, Instant};

use common::daemon::*;
use common::*;
use serde_json::Value;

#[test]
fn systemd_hears_ready_then_watchdog_pings() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    let started = Instant::now();
    let daemon = Daemon::start(
        run_with(&config)
            .env("NOTIFY_SOCKET", &socket_path)
            .env("WATCHDOG_USEC", "300000"),
    );
    let mut messages = Vec::new();
    let mut buffer = [0u8; 4096];
    while started.elapsed() < Duration::from_secs(3) {
        if let Ok(n) = socket.recv(&mut buffer) {
            messages.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
        }
    }
    let ready = messages
        .iter()
        .position(|m| m.lines().any(|l| l == "READY=1"));
    let ready = ready.unwrap_or_else(|| panic!("no READY=1 in {messages:?}"));
    assert!(
        messages[ready].contains("STATUS=sampling CPUs"),
        "{messages:?}"
    );
    let pings = messages[ready..]
        .iter()
        .filter(|m| m.lines().any(|l| l == "WATCHDOG=1"))
        .count();
    // A 300 ms watchdog is pinged every 150 ms: well over 5 times in ~2.5 s.
    assert!(pings >= 5, "{pings} watchdog pings: {messages:?}");
    assert!(
        !messages[..ready].iter().any(|m| m.contains("WATCHDOG=1")),
        "no ping before READY"
    );
    drop(daemon);
}

#[test]
fn sigterm_stops_it_with_status_0_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(&mut run_with(&daemon_config(dir.path(), "", "", "")));
    wait_until(
        "health",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || daemon.get("/healthz").0 == 200,
    );
    let asked = Instant::now();
    daemon.signal(libc::SIGTERM);
    let status = daemon.child.wait().unwrap();
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(0), "{}", daemon.log_text());
    assert!(took < Duration::from_secs(1), "took {took:?}");
}

#[test]
fn sighup_applies_live_keys_and_survives_a_broken_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "max_window = \"60s\"", "");
    let daemon = Daemon::start(&mut run_with(&config));
    wait_until(
        "health",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || daemon.get("/healthz").0 == 200,
    );

    let good = std::fs::read_to_string(&config).unwrap();
    // Two mistakes: both are logged, as at start.
    std::fs::write(
        &config,
        "[measure]\ninterval = \"fast\"\n[export]\nmax_window = \"-1s\"\n",
    )
    .unwrap();
    daemon.signal(libc::SIGHUP);
    wait_until(
        "the failure to be counted",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || {
            metric_value(
                &daemon.get("/metrics").1,
                "latencyd_config_reload_failures_total",
            ) == Some(1.0)
        },
    );
    let scrape = daemon.get("/metrics").1;
    assert_eq!(
        metric_value(&scrape, "latencyd_config_last_reload_successful"),
        Some(0.0)
    );
    let loaded_at = metric_value(
        &scrape,
        "latencyd_config_last_reload_success_timestamp_seconds",
    )
    .unwrap();
    assert_eq!(
        daemon.get("/healthz").0,
        200,
        "still running on the old configuration"
    );
    let log = daemon.log_text();
    assert!(
        log.contains("(mistake 1 of 2)") && log.contains("measure.interval"),
        "{log}"
    );
    assert!(
        log.contains("(mistake 2 of 2)") && log.contains("export.max_window"),
        "{log}"
    );

    std::fs::write(
        &config,
        good.replace("max_window = \"60s\"", "max_window = \"5s\""),
    )
    .unwrap();
    daemon.signal(libc::SIGHUP);
    wait_until(
        "the new window",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || {
            let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
            status["config"]["max_window_ns"] == 5_000_000_000u64
        },
    );
    let scrape = daemon.get("/metrics").1;
    assert_eq!(
        metric_value(&scrape, "latencyd_config_reload_failures_total"),
        Some(1.0)
    );
    assert_eq!(
        metric_value(&scrape, "latencyd_config_last_reload_successful"),
        Some(1.0)
    );
    let reloaded_at = metric_value(
        &scrape,
        "latencyd_config_last_reload_success_timestamp_seconds",
    )
    .unwrap();
    assert!(reloaded_at > loaded_at, "{loaded_at} then {reloaded_at}");
}

/// Prometheus exporters' flags: repeated --web.listen-address gives one
/// listener each, --web.telemetry-path moves the metrics, --log.level.
#[test]
fn exporter_flags_serve_several_addresses_and_a_telemetry_path() {
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    let second = if ipv6 { "[::1]:0" } else { "127.0.0.2:0" };
    let daemon = Daemon::start(
        latencyd()
            .args(["run", "--config"])
            .arg(config)
            .args(["--web.listen-address", "127.0.0.1:0", "--listen", second])
            .args([
                "--web.telemetry-path",
                "/probe/metrics",
                "--log.level",
                "debug",
            ]),
    );
    let (status, body) = daemon.get("/api/v1/status");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let listen: Vec<std::net::SocketAddr> = v["listen"]
        .as_str()
        .unwrap()
        .split(", ")
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(listen.len(), 2, "{}", v["listen"]);
    assert_eq!(listen[0], daemon.addr);
    for addr in &listen {
        let (status, body) = common::http_get(*addr, "/probe/metrics").unwrap();
        assert_eq!(status, 200, "{addr}");
        assert!(
            body.contains("latencyd_wakeup_latency_max_seconds"),
            "{addr}"
        );
        assert_eq!(
            common::http_get(*addr, "/metrics").unwrap().0,
            404,
            "{addr}"
        );
    }
    assert_eq!(v["config"]["log_level"], "debug");
    assert_eq!(
        v["config"]["sources"]["log.level"],
        "command-line flag --log.level"
    );
    assert_eq!(
        v["config"]["sources"]["export.listen"],
        "command-line flag --web.listen-address"
    );
    // A telemetry path on one of latencyd's own routes is refused.
    let output = latencyd()
        .args(["check-config"])
        .arg(dir.path().join("latencyd.toml"))
        .env("LATENCYD_EXPORT__TELEMETRY_PATH", "/healthz")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78));
    assert!(stderr_of(&output).contains("one of latencyd's own routes"));
}

#[test]
fn check_config_prints_the_effective_configuration_with_sources() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.toml");
    std::fs::write(
        &path,
        "[measure]\ninterval = \"500us\"\n[realtime]\nrequired = false\n",
    )
    .unwrap();
    let output = run_ok(
        latencyd()
            .args(["check-config"])
            .arg(&path)
            .env("LATENCYD_LOG__LEVEL", "debug"),
    );
    let text = stdout_of(&output);
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("interval = \"500us\"").ends_with(&format!("# {}", path.display())),
        "{text}"
    );
    assert!(
        line("level = \"debug\"").ends_with("# environment variable LATENCYD_LOG__LEVEL"),
        "{text}"
    );
    assert!(
        line("listen = \"[::]:9479\"").ends_with("# built-in default"),
        "{text}"
    );

    std::fs::write(&path, "[measure]\ninterval = \"500\"\n").unwrap();
    let output = latencyd().arg("check-config").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(78));
    assert!(stderr_of(&output).contains("measure.interval"));

    // Five mistakes, two in one section: one run names them all, and
    // `run` refuses the same file with the same list.
    std::fs::write(
        &path,
        "[measure]\ninterval = \"500\"\npriority = 120\n[export]\nlisten = \"nowhere\"\n\
         [log]\nlevel = \"loud\"\n[colour]\nsky = \"blue\"\n",
    )
    .unwrap();
    let keys = [
        "measure.interval",
        "measure.priority",
        "export.listen",
        "log.level",
        "colour",
    ];
    for command in ["check-config", "run"] {
        let mut cmd = latencyd();
        match command {
            "run" => cmd.arg("run").arg("--config").arg(&path),
            _ => cmd.arg(command).arg(&path),
        };
        let output = cmd.output().unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(78), "{command}: {stderr}");
        assert!(
            stderr.contains("5 configuration errors:"),
            "{command}: {stderr}"
        );
        for key in keys {
            assert!(stderr.contains(key), "{command} names {key}: {stderr}");
        }
    }
}

/// As a user without real-time privileges: refused with the fix named, or
/// run degraded and reported as such when allowed.
#[test]
fn without_privileges_it_refuses_or_runs_degraded_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("run.toml");
    std::fs::write(
        &config,
        "[measure]\nwarmup = \"0s\"\n[export]\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();

    // RLIMIT_RTPRIO 0: the configured priority is refused before start.
    let output = unprivileged_latencyd(dir.path(), false)
        .unwrap()
        .arg("run")
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("measure.priority") && stderr.contains("LimitRTPRIO=80"),
        "{stderr}"
    );

    // The priority is allowed (CAP_SYS_NICE) but memory cannot be locked:
    // EX_NOPERM, with the fix named.
    match unprivileged_latencyd(dir.path(), true) {
        Some(mut cmd) => {
            let output = cmd
                .arg("run")
                .arg("--config")
                .arg(&config)
                .output()
                .unwrap();
            let stderr = stderr_of(&output);
            assert_eq!(output.status.code(), Some(77), "{stderr}");
            assert!(stderr.contains("LimitMEMLOCK=infinity"), "{stderr}");
        }
        None => report_skip(
            "without_privileges_it_refuses_or_runs_degraded_when_allowed",
            "not root: cannot keep CAP_SYS_NICE alone to reach the memory-locking refusal (exit 77)",
        ),
    }

    // Allowed to run degraded: it serves, and says it is not real-time.
    let daemon = Daemon::start(
        unprivileged_latencyd(dir.path(), false)
            .unwrap()
            .arg("run")
            .arg("--config")
            .arg(&config)
            .env("LATENCYD_REALTIME__REQUIRED", "false"),
    );
    wait_until(
        "a first interval",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || {
            daemon
                .get("/metrics")
                .1
                .contains("latencyd_wakeup_latency_seconds_count")
        },
    );
    let scrape = daemon.get("/metrics").1;
    assert_eq!(
        metric_value(
            &scrape,
            "latencyd_sampler_realtime{cpu=\"0\",policy=\"fifo\"}"
        ),
        Some(0.0),
        "{scrape}"
    );
    let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    assert_eq!(status["realtime"], false);
    assert!(!status["non_rt_reasons"].as_array().unwrap().is_empty());
    assert!(
        daemon.log_text().contains("without real-time guarantees"),
        "{}",
        daemon.log_text()
    );
}

#[test]
fn the_exporter_thread_can_be_pinned_to_housekeeping_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let housekeeping = usable_cpus() - 1;
    let config = daemon_config(dir.path(), "", &format!("cpus = \"{housekeeping}\""), "");
    let daemon = Daemon::start(&mut run_with(&config));
    let pid = daemon.child.id();
    // The main thread (tid == pid) runs the exporter.
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status")).unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(allowed, housekeeping.to_string());
    assert!(
        daemon.log_text().contains("exporter pinned"),
        "{}",
        daemon.log_text()
    );
    assert_eq!(daemon.get("/healthz").0, 200);
}

#[test]
fn a_cpu_outside_the_affinity_mask_is_reported_unmeasured_with_its_reason() {
    let usable = latencyd::rt::sys::process_affinity().unwrap();
    let online = latencyd::rt::sys::online_cpus().unwrap_or_default();
    let usable: Vec<usize> = usable.into_iter().filter(|c| online.contains(c)).collect();
    if usable.len() < 2 {
        common::report_skip(
            "a_cpu_outside_the_affinity_mask_is_reported_unmeasured_with_its_reason",
            "one usable CPU: none can be left out of the mask",
        );
        return;
    }
    common::require_tool("taskset", "--version", "util-linux");
    let (kept, left_out) = (usable[0], *usable.last().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    // What `taskset`, systemd's CPUAffinity= or a container runtime's
    // cpuset do to a process: "all" then means the CPUs it may use.
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", &kept.to_string(), env!("CARGO_BIN_EXE_latencyd")])
        .args(["run", "--config"])
        .arg(&config);
    let daemon = Daemon::start(&mut cmd);

    let (code, body) = daemon.get("/api/v1/status");
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["config"]["cpus"], serde_json::json!([kept]));
    let entry = status["unmeasured_cpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cpu"] == left_out)
        .unwrap_or_else(|| panic!("CPU {left_out} is not reported: {body}"));
    // It was in this test's own mask, so inside the cgroup's cpuset: the
    // mask is the reason (or isolcpus=, where the CPU is isolated).
    let isolated = std::fs::read_to_string("/sys/devices/system/cpu/isolated")
        .ok()
        .and_then(|s| latencyd::cpulist::parse_cpu_list(&s).ok())
        .unwrap_or_default();
    let reason = if isolated.contains(&left_out) {
        "isolated"
    } else {
        "affinity"
    };
    assert_eq!(entry["reason"], reason, "{body}");
    assert!(
        entry["explanation"]
            .as_str()
            .unwrap()
            .contains("affinity mask")
    );
    let (_, scrape) = daemon.get("/metrics");
    let series = format!("latencyd_cpu_unmeasured{{cpu=\"{left_out}\",reason=\"{reason}\"}}");
    assert_eq!(
        common::metric_value(&scrape, &series),
        Some(1.0),
        "{scrape}"
    );
    assert!(!scrape.contains(&format!("latencyd_cpu_unmeasured{{cpu=\"{kept}\"")));
    let (_, page) = daemon.get("/");
    assert!(
        page.contains(&format!("Not measured: CPU {left_out}")),
        "{page}"
    );
    assert!(
        daemon
            .log_text()
            .contains(&format!("CPU {left_out} is not measured")),
        "{}",
        daemon.log_text()
    );
}

#[test]
fn logs_are_json_lines_or_text_without_timestamps_under_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    let mut daemon = Daemon::start(run_with(&config).args(["--log-format", "json"]));
    daemon.signal(libc::SIGTERM);
    let (status, lines) = daemon.wait_with_log();
    assert_eq!(status.code(), Some(0), "{lines:?}");
    assert!(lines.len() >= 2, "{lines:?}");
    for line in &lines {
        let record: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            record["level"].is_string() && record["fields"]["message"].is_string(),
            "{line}"
        );
    }

    // Under systemd's journal (JOURNAL_STREAM set) the journal stamps each
    // line, so latencyd does not: lines start with the level.
    let daemon = Daemon::start(run_with(&config).env("JOURNAL_STREAM", "8:12345"));
    let first = daemon.log.lock().unwrap()[0].clone();
    let level = first.split_whitespace().next().unwrap_or_default();
    assert!(
        ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level),
        "{first}"
    );
    let daemon = Daemon::start(&mut run_with(&config));
    let first = daemon.log.lock().unwrap()[0].clone();
    assert!(
        first.starts_with("20"),
        "a timestamp outside the journal: {first}"
    );
}

#[test]
fn samplers_without_a_real_time_policy_sleep_with_a_1ns_timer_slack() {
    // The default slack (50 µs) would be measured as latency by a sampler
    // under SCHED_OTHER; each sampler sets its own to 1 ns.
    // Reading another process's /proc/TID/timerslack_ns needs
    // CAP_SYS_NICE; without it, rt::sys's unit test covers the call.
    if !privileged() {
        report_skip(
            "tests/daemon.rs samplers_without_a_real_time_policy_sleep_with_a_1ns_timer_slack",
            "not root: the daemon's timer slack cannot be read without CAP_SYS_NICE",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(
        dir.path(),
        "policy = \"other\"\npriority = 0\n",
        "",
        "[realtime]\nrequired = false\n",
    );
    let mut daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    let samplers = status["samplers"].as_array().unwrap();
    assert!(!samplers.is_empty());
    for sampler in samplers {
        let tid = sampler["tid"].as_i64().unwrap();
        let slack = std::fs::read_to_string(format!("/proc/{tid}/timerslack_ns")).unwrap();
        assert_eq!(slack.trim(), "1", "sampler {sampler}");
    }
    // The daemon's other threads keep the default.
    let pid = daemon.child.id();
    let slack = std::fs::read_to_string(format!("/proc/{pid}/timerslack_ns")).unwrap();
    assert_ne!(slack.trim(), "1");
    daemon.signal(libc::SIGTERM);
    let (exit, log) = daemon.wait_with_log();
    assert!(exit.success(), "{exit}: {log:?}");
}

#[test]
fn the_runtime_thread_wakes_once_per_collector_tick() {
    // The collector ticks every 200 ms on a timerfd, once more 100 ms later
    // when a sampler's interval was not there yet (rare: its wake-up after
    // the boundary came over 5 ms late). With tokio's own interval the
    // runtime thread woke twice per tick (its timer wheel moves a deadline
    // past 64 ms down a level before it is due): ~10 voluntary switches a
    // second instead of ~5, and ~20 when it ticked every 100 ms.
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    let mut daemon = Daemon::start(&mut run_with(&config));
    assert_eq!(daemon.get("/healthz").0, 200);
    let per_second =
        runtime_thread_wakeups_per_second(daemon.child.id(), std::time::Duration::from_secs(3));
    // 5 ticks a second, a few catch-ups, the 10 s status refresh, nothing
    // else while no one scrapes; a late tick is merged into the next,
    // never added.
    assert!(
        (3.0..=8.0).contains(&per_second),
        "the runtime thread switched {per_second:.1} times a second"
    );
    daemon.signal(libc::SIGTERM);
    let (exit, log) = daemon.wait_with_log();
    assert!(exit.success(), "{exit}: {log:?}");
}

/// The rows of docs/metrics.md's "Every family" table: name -> (type,
/// label names). The type is the cell's first word ("gauge (1)" is a
/// gauge); labels are the backquoted identifiers of the labels cell.
fn documented_families() -> std::collections::BTreeMap<String, (String, Vec<String>)> {
    let mut rows = std::collections::BTreeMap::new();
    for cells in doc_table_rows("docs/metrics.md", "Every family") {
        let kind = cells[1].split_whitespace().next().unwrap_or("").to_string();
        let labels = cells[2]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|t| t.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .map(str::to_string)
            .collect();
        rows.insert(cells[0].clone(), (kind, labels));
    }
    rows
}

#[test]
fn docs_metrics_md_lists_every_family_the_daemon_can_serve_with_its_type_and_labels() {
    let documented = documented_families();
    let mut problems = Vec::new();
    // Every family of the catalogue, also those that have no series yet
    // (forensics, the record, a PM QoS hold), as it declares them.
    for family in latencyd::daemon::render::catalog::families() {
        let (name, labels) = (family.name, family.labels);
        let kind = format!("{:?}", family.kind).to_lowercase();
        match documented.get(name) {
            None => problems.push(format!("{name} ({kind}) is not in docs/metrics.md")),
            Some((doc_kind, doc_labels)) => {
                if *doc_kind != kind {
                    problems.push(format!("{name}: documented as {doc_kind}, is {kind}"));
                }
                let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
                if *doc_labels != labels {
                    problems.push(format!(
                        "{name}: documented labels {doc_labels:?}, has {labels:?}"
                    ));
                }
            }
        }
    }
    // And what a running daemon serves: every family it exposes, by its
    // # TYPE line, with the label names its series carry.
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    let mut daemon = Daemon::start(&mut run_with(&config));
    std::thread::sleep(Duration::from_millis(1500));
    let (status, scrape) = daemon.get("/metrics");
    assert_eq!(status, 200);
    let mut served = std::collections::BTreeSet::new();
    for line in scrape.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            served.insert(name.to_string());
            if name.starts_with("process_") {
                if !documented.contains_key("process_*") {
                    problems.push(format!(
                        "{name} is served; docs/metrics.md has no process_* row"
                    ));
                }
                continue;
            }
            match documented.get(name) {
                None => problems.push(format!("{name} is served but not in docs/metrics.md")),
                Some((doc_kind, _)) if doc_kind != kind => problems.push(format!(
                    "{name}: documented as {doc_kind}, served as {kind}"
                )),
                Some(_) => {}
            }
        } else if !line.starts_with('#') && !line.starts_with("process_") {
            let Some((series, _)) = line.split_once(' ') else {
                continue;
            };
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| documented.contains_key(*f)))
                .unwrap_or(name);
            let Some((_, doc_labels)) = documented.get(family) else {
                continue;
            };
            for pair in labels
                .trim_end_matches('}')
                .split(',')
                .filter(|p| !p.is_empty())
            {
                let label = pair.split('=').next().unwrap();
                if label != "le" && !doc_labels.iter().any(|l| l == label) {
                    problems.push(format!(
                        "{family} is served with label {label}, not documented"
                    ));
                }
            }
        }
    }
    // No row for a family that does not exist.
    for name in documented.keys() {
        let known = name == "process_*"
            || served.contains(name)
            || latencyd::daemon::render::catalog::families().any(|f| f.name == name);
        if !known {
            problems.push(format!(
                "docs/metrics.md documents {name}, which latencyd does not serve"
            ));
        }
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "docs/metrics.md has drifted:\n{}",
        problems.join("\n")
    );
    daemon.signal(libc::SIGTERM);
    let (exit, log) = daemon.wait_with_log();
    assert!(exit.success(), "{exit}: {log:?}");
}
