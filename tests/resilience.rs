//! The daemon under abuse that is not the samplers' fault: a storm of
//! SIGHUPs, scrapes racing a shutdown, logs that cannot be written (a full
//! disk, a reader that went away), a sampler's scheduling changed behind
//! its back. None of it may crash the daemon or lose its orderly exit, and
//! what was changed is said.

mod common;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;

#[test]
fn a_sighup_storm_neither_crashes_nor_stalls_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    let mut daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    // A change for the storm to pick up.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("[export]\n", "[export]\nmax_window = \"30s\"\n"),
    )
    .unwrap();
    let started = Instant::now();
    for _ in 0..2_000 {
        daemon.signal(libc::SIGHUP);
    }
    let sent_in = started.elapsed();
    wait_until(
        "the change to be applied",
        Duration::from_millis(50),
        Duration::from_secs(10),
        || {
            daemon
                .log_text()
                .contains("reload: applied export.max_window = \"30s\"")
        },
    );
    // Serving all along, and afterwards.
    let (status, _) = daemon.get("/metrics");
    assert_eq!(status, 200);
    wait_until(
        "healthz after the storm",
        Duration::from_millis(50),
        Duration::from_secs(10),
        || daemon.get("/healthz").0 == 200,
    );
    let metrics = daemon.get("/metrics").1;
    assert_eq!(
        metric_value(&metrics, "latencyd_config_reload_failures_total"),
        Some(0.0)
    );
    assert!(daemon.child.try_wait().unwrap().is_none(), "still running");
    daemon.signal(libc::SIGTERM);
    let (status, log) = daemon.wait_with_log();
    assert!(status.success(), "{status}: {log:?}");
    eprintln!("2000 SIGHUPs sent in {sent_in:?}; the daemon served throughout");
}

#[test]
fn scrapes_racing_a_shutdown_get_whole_answers_or_a_closed_connection() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start_with_export(dir.path(), "");
    let addr = daemon.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let whole = Arc::new(AtomicU64::new(0));
    let scrapers: Vec<_> = (0..8)
        .map(|_| {
            let stop = Arc::clone(&stop);
            let whole = Arc::clone(&whole);
            std::thread::spawn(move || {
                let mut torn = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    // Not one byte back is a connection the kernel
                    // accepted and the exiting daemon closed before it read
                    // the request: closed, not a torn answer.
                    let answer = http_get_raw(addr, "/metrics")
                        .map(|raw| (!raw.is_empty()).then(|| parse_response(&raw)));
                    match answer.and_then(|a| a.ok_or(std::io::ErrorKind::UnexpectedEof.into())) {
                        Ok((200, body)) => {
                            // A whole exposition ends with the build info's
                            // family or the process metrics, and a newline.
                            if body.ends_with('\n') && body.contains("latencyd_build_info") {
                                whole.fetch_add(1, Ordering::Relaxed);
                            } else {
                                torn.push(body.len());
                            }
                        }
                        Ok((status, _)) => torn.push(usize::from(status)),
                        Err(_) => {} // refused or closed: the daemon is going
                    }
                }
                torn
            })
        })
        .collect();
    wait_until(
        "scrapes to flow",
        Duration::from_millis(10),
        Duration::from_secs(10),
        || whole.load(Ordering::Relaxed) > 20,
    );
    daemon.signal(libc::SIGTERM);
    let (status, log) = daemon.wait_with_log();
    stop.store(true, Ordering::Relaxed);
    let torn: Vec<usize> = scrapers
        .into_iter()
        .flat_map(|s| s.join().unwrap())
        .collect();
    assert!(status.success(), "{status}: {log:?}");
    assert!(torn.is_empty(), "answers cut short: {torn:?}");
    assert!(!log.iter().any(|l| l.contains("panicked")), "{log:?}");
}

#[test]
fn logs_that_cannot_be_written_do_not_stop_the_daemon() {
    // /dev/full: every write fails with ENOSPC, as on a full disk.
    let dev_full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "[log]\nlevel = \"debug\"\n");
    // The address cannot come from the log: pick a free port up front.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    for (what, stderr) in [
        ("a full disk", Stdio::from(dev_full)),
        ("a closed pipe", Stdio::piped()),
    ] {
        let mut child = latencyd()
            .args(["run", "--config"])
            .arg(&config)
            .args(["--listen", &addr.to_string()])
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        // The reader goes away before the daemon writes its first line.
        drop(child.stderr.take());
        wait_until(
            &format!("the daemon to serve with {what} for logs"),
            Duration::from_millis(50),
            Duration::from_secs(15),
            || http_get(addr, "/healthz").is_ok_and(|(status, _)| status == 200),
        );
        // Reloads and errors log; each write fails.
        for _ in 0..20 {
            // SAFETY: kill with our child's pid and a valid signal.
            unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
            let _ = http_get(addr, "/api/v1/latency/999");
        }
        std::thread::sleep(Duration::from_millis(300));
        let (status, _) = http_get(addr, "/metrics").unwrap();
        assert_eq!(status, 200, "{what}");
        assert!(child.try_wait().unwrap().is_none(), "{what}: it died");
        // SAFETY: as above.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        assert!(status.success(), "{what}: {status}");
    }
}

/// The sampler's status once the collector has read its scheduling (what
/// an unprivileged sampler runs as is learnt at that first read).
fn read_once(daemon: &Daemon, cpu: usize) -> serde_json::Value {
    wait_until(
        "the first read of the sampler's scheduling",
        Duration::from_millis(20),
        Duration::from_secs(2),
        || !sampler_status(daemon, cpu)["running"].is_null(),
    );
    sampler_status(daemon, cpu)
}

/// `chrt` on a running sampler's thread, as a tuned profile or an operator
/// would do it.
fn chrt(args: &[&str], tid: i64) {
    require_tool("chrt", "--version", "util-linux");
    let out = std::process::Command::new("chrt")
        .args(args)
        .arg(tid.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chrt {args:?} {tid}: {}",
        stderr_of(&out)
    );
}

#[test]
fn a_sampler_demoted_behind_latencyds_back_is_said_and_left_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    // daemon_config writes [realtime] only for an unprivileged user.
    let mut text = std::fs::read_to_string(&config).unwrap();
    if text.contains("[realtime]") {
        text = text.replace("[realtime]\n", "[realtime]\nrestore = false\n");
    } else {
        text.push_str("[realtime]\nrestore = false\n");
    }
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    let cpu = usable_cpus() - 1;
    let before = read_once(&daemon, cpu);
    let tid = before["tid"].as_i64().unwrap();
    assert_eq!(before["scheduling_changed"], false, "{before}");
    let series = format!("latencyd_sampler_scheduling_changes_total{{cpu=\"{cpu}\"}}");
    assert_eq!(metric_value(&daemon.get("/metrics").1, &series), Some(0.0));
    // SCHED_BATCH: a demotion for a FIFO sampler, and a change any user
    // may make to a thread of their own.
    chrt(&["-b", "-p", "0"], tid);
    wait_until(
        "the change to be found",
        Duration::from_millis(50),
        Duration::from_secs(4),
        || sampler_status(&daemon, cpu)["scheduling_changed"] == true,
    );
    let after = sampler_status(&daemon, cpu);
    assert_eq!(after["running"]["policy"], "batch", "{after}");
    assert_eq!(after["realtime"], false, "{after}");
    let scrape = daemon.get("/metrics").1;
    assert_eq!(metric_value(&scrape, &series), Some(1.0), "{scrape}");
    let gauge = format!("latencyd_sampler_realtime{{cpu=\"{cpu}\",policy=\"fifo\"}}");
    assert_eq!(metric_value(&scrape, &gauge), Some(0.0), "{scrape}");
    let log = daemon.log_text();
    assert!(
        log.contains(&format!(
            "CPU {cpu}: the sampler's scheduling was changed behind latencyd's back"
        )) && log.contains("to batch 0 on CPU")
            && log.contains("left so"),
        "{log}"
    );
    assert!(
        daemon
            .get("/")
            .1
            .contains("changed behind latencyd&#x27;s back")
            || daemon.get("/").1.contains("changed behind latencyd's back")
    );
    // Left so: still batch a second later.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(sampler_status(&daemon, cpu)["running"]["policy"], "batch");
    if !privileged() {
        report_skip(
            "a_sampler_demoted_behind_latencyds_back_is_said_and_left_when_asked",
            "not root: a lowered FIFO priority (chrt -f -p 1) was not tried",
        );
        return;
    }
    // A lowered priority is a change too.
    chrt(&["-f", "-p", "1"], tid);
    wait_until(
        "the lowered priority to be found",
        Duration::from_millis(50),
        Duration::from_secs(4),
        || sampler_status(&daemon, cpu)["running"]["priority"] == 1,
    );
    let scrape = daemon.get("/metrics").1;
    assert_eq!(metric_value(&scrape, &series), Some(2.0), "{scrape}");
    assert_eq!(metric_value(&scrape, &gauge), Some(0.0), "{scrape}");
}

#[test]
fn a_sampler_demoted_behind_latencyds_back_is_set_back() {
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    let cpu = usable_cpus() - 1;
    let before = read_once(&daemon, cpu);
    let tid = before["tid"].as_i64().unwrap();
    let policy = before["running"]["policy"].clone();
    assert_eq!(
        policy,
        if privileged() { "fifo" } else { "other" },
        "{before}"
    );
    chrt(&["-b", "-p", "0"], tid);
    wait_until(
        "the sampler to be set back",
        Duration::from_millis(50),
        Duration::from_secs(4),
        || {
            daemon
                .log_text()
                .contains("set back (realtime.restore = true)")
        },
    );
    wait_until(
        "the status to show it set back",
        Duration::from_millis(50),
        Duration::from_secs(2),
        || {
            let now = sampler_status(&daemon, cpu);
            now["scheduling_changed"] == false && now["running"]["policy"] == policy
        },
    );
    let out = std::process::Command::new("chrt")
        .args(["-p", &tid.to_string()])
        .output()
        .unwrap();
    let expected = if privileged() {
        "SCHED_FIFO"
    } else {
        "SCHED_OTHER"
    };
    assert!(stdout_of(&out).contains(expected), "{}", stdout_of(&out));
    let series = format!("latencyd_sampler_scheduling_changes_total{{cpu=\"{cpu}\"}}");
    assert_eq!(metric_value(&daemon.get("/metrics").1, &series), Some(1.0));
    assert_eq!(sampler_status(&daemon, cpu)["realtime"], privileged());
}

#[test]
fn a_configuration_file_replaced_by_a_fifo_is_refused_at_reload_without_a_freeze() {
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "");
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(&config));
    std::fs::remove_file(&config).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&config)
        .status()
        .unwrap();
    assert!(made.success());
    daemon.signal(libc::SIGHUP);
    wait_until(
        "the reload to be refused",
        Duration::from_millis(50),
        Duration::from_secs(3),
        || daemon.log_text().contains("configuration reload refused"),
    );
    let log = daemon.log_text();
    assert!(log.contains("is not a regular file"), "{log}");
    let scrape = daemon.get("/metrics").1;
    assert_eq!(
        metric_value(&scrape, "latencyd_config_last_reload_successful"),
        Some(0.0)
    );
    assert_eq!(daemon.get("/healthz").0, 200);
    // Nothing was ever written into the FIFO: the daemon still stops.
    daemon.signal(libc::SIGTERM);
    let mut daemon = daemon;
    let (exit, log) = daemon.wait_with_log();
    assert!(exit.success(), "{log:?}");
}
