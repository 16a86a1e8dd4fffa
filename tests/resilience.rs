//! The daemon under abuse that is not the samplers' fault: a storm of
//! SIGHUPs, scrapes racing a shutdown, logs that cannot be written (a full
//! disk, a reader that went away). None of it may crash the daemon or
//! lose its orderly exit.

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
                    match http_get(addr, "/metrics") {
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
