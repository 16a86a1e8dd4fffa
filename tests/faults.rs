//! What happens around a broken sampler, with the test-only fault
//! injection (`--features fault-injection`, which scripts/test enables): a
//! sampler that dies turns /healthz to 503 and the daemon exits non-zero
//! so systemd restarts it; a sampler that is stuck stops the watchdog
//! pings and turns /healthz to 503, does not hold up shutdown, and makes
//! the collector look again once per period, not more; a sampler whose
//! restart is slow never holds up `/metrics`.
//!
//! Cargo builds this file only with the feature (`required-features` in
//! Cargo.toml); tests/tidy.rs says so when it is off.

mod common;

mod with_faults {
    use std::os::unix::net::UnixDatagram;
    use std::time::{Duration, Instant};

    use super::common::*;

    /// `latencyd run` on the test configuration in `dir`, with the faults
    /// of `spec` (`kind:cpu:after_ms`, comma-separated) injected.
    fn run_with_faults(dir: &std::path::Path, spec: &str) -> std::process::Command {
        let config = daemon_config(dir, "", "", "");
        let mut cmd = latencyd();
        cmd.args(["run", "--config"])
            .arg(&config)
            .env("FAULT_INJECTION_LATENCYD", spec);
        cmd
    }

    #[test]
    fn a_fault_injection_build_says_so_in_its_version_and_the_benches_refuse_it() {
        let out =
            run_ok(std::process::Command::new(env!("CARGO_BIN_EXE_latencyd")).arg("--version"));
        assert!(
            stdout_of(&out).contains("(fault-injection test build)"),
            "{}",
            stdout_of(&out)
        );
        // footprint.sh reads the version before anything that needs root.
        let bench = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/footprint.sh");
        let out = std::process::Command::new(bench)
            .env("LATENCYD", env!("CARGO_BIN_EXE_latencyd"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(stderr_of(&out).contains("fault-injection test build"));
    }

    #[test]
    fn a_dead_sampler_turns_healthz_to_503_and_the_daemon_exits_1() {
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = Daemon::start(&mut run_with_faults(dir.path(), "die:0:700"));
        assert_eq!(daemon.get("/healthz").0, 200);
        let mut saw_503 = false;
        wait_until(
            "the daemon to exit",
            Duration::from_millis(20),
            Duration::from_secs(10),
            || {
                if let Ok((503, body)) = http_get(daemon.addr, "/healthz") {
                    saw_503 |= body.contains("\"cpu\":0");
                }
                daemon.child.try_wait().unwrap().is_some()
            },
        );
        let status = daemon.child.wait().unwrap();
        assert_eq!(status.code(), Some(1), "{}", daemon.log_text());
        assert!(saw_503, "/healthz showed the dead sampler before the exit");
        assert!(
            daemon
                .log_text()
                .contains("CPU 0 has died (clock_nanosleep failed: Input/output error"),
            "{}",
            daemon.log_text()
        );
    }

    #[test]
    fn a_clock_that_fails_at_once_is_a_clear_error_and_exit_1() {
        let dir = tempfile::tempdir().unwrap();
        let output = run_with_faults(dir.path(), "die:0:0").output().unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        // Whether the failure is seen while starting or just after, the
        // message names the CPU, the call and the error.
        assert!(
            stderr.contains("the sampler on CPU 0")
                && stderr.contains("clock_nanosleep")
                && stderr.contains("Input/output error"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }

    #[test]
    fn a_stuck_sampler_stops_the_watchdog_and_does_not_block_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let socket_path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&socket_path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut daemon = Daemon::start(
            run_with_faults(dir.path(), "stall:0:500")
                .env("NOTIFY_SOCKET", &socket_path)
                .env("WATCHDOG_USEC", "300000"),
        );
        // Pings (every 150 ms) arrive while the sampler is alive, then stop
        // once its heartbeat is older than the 2 s staleness limit.
        let started = Instant::now();
        let mut pings = Vec::new();
        let mut buffer = [0u8; 4096];
        while started.elapsed() < Duration::from_secs(5) {
            if let Ok(n) = socket.recv(&mut buffer)
                && String::from_utf8_lossy(&buffer[..n])
                    .lines()
                    .any(|l| l == "WATCHDOG=1")
            {
                pings.push(started.elapsed());
            }
        }
        let early = pings
            .iter()
            .filter(|t| **t < Duration::from_millis(1_500))
            .count();
        let late = pings
            .iter()
            .filter(|t| **t > Duration::from_millis(3_500))
            .count();
        assert!(early >= 3, "pings while healthy: {pings:?}");
        assert_eq!(late, 0, "no pings once the sampler is stale: {pings:?}");
        let (status, body) = daemon.get("/healthz");
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("\"cpu\":0"), "{body}");

        let asked = Instant::now();
        daemon.signal(libc::SIGTERM);
        let status = daemon.child.wait().unwrap();
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "took {:?}",
            asked.elapsed()
        );
        assert_eq!(status.code(), Some(0));
        assert!(
            daemon.log_text().contains("CPU 0 did not stop"),
            "{}",
            daemon.log_text()
        );
    }

    #[test]
    fn a_silent_sampler_brings_one_catch_up_tick_per_period_not_more() {
        // The collector ticks every 200 ms; a tick that finds a running
        // sampler's interval missing looks again 100 ms later, once. A
        // sampler stuck in its sleep is missing at every tick: 5 regular
        // and 5 catch-up ticks a second. Healthy, ~5 (tests/daemon.rs,
        // the_runtime_thread_wakes_once_per_collector_tick).
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = Daemon::start(&mut run_with_faults(dir.path(), "stall:0:200"));
        std::thread::sleep(Duration::from_millis(500));
        let per_second =
            runtime_thread_wakeups_per_second(daemon.child.id(), Duration::from_secs(3));
        assert!(
            (8.5..=13.0).contains(&per_second),
            "the runtime thread switched {per_second:.1} times a second"
        );
        daemon.signal(libc::SIGTERM);
        assert_eq!(daemon.child.wait().unwrap().code(), Some(0));
    }

    #[test]
    fn a_slow_sampler_restart_never_holds_up_metrics() {
        // CPU 0's sampler finds itself displaced (as when its CPU goes
        // offline) after 500 ms; its restart then takes 2 s to report
        // running, and the cycle repeats. /metrics must answer promptly
        // throughout, and the CPU must come back.
        let dir = tempfile::tempdir().unwrap();
        let daemon = Daemon::start(&mut run_with_faults(
            dir.path(),
            "displace:0:500,slowstart:0:2000",
        ));
        let started = Instant::now();
        let mut slowest = Duration::ZERO;
        let mut answers = 0;
        while started.elapsed() < Duration::from_secs(6) {
            let asked = Instant::now();
            let (status, body) = daemon.get("/metrics");
            let took = asked.elapsed();
            assert_eq!(status, 200, "{body}");
            slowest = slowest.max(took);
            answers += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("/metrics during slow restarts: {answers} answers, slowest {slowest:?}");
        assert!(
            slowest < Duration::from_millis(100),
            "a /metrics answer took {slowest:?} while a sampler restarted (it waits 2 s)"
        );
        let log = daemon.log_text();
        assert!(log.contains("CPU 0 went offline"), "{log}");
        assert!(log.contains("CPU 0 is back online"), "{log}");
    }

    /// A reload whose check panics (made to, here) is refused and counted
    /// as refused, the running configuration untouched; a start whose
    /// check panics exits 78 instead of 101.
    #[test]
    fn a_configuration_check_that_panics_is_a_refusal_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("panic-now");
        let mut cmd = run_with_faults(dir.path(), "");
        cmd.env("FAULT_INJECTION_LATENCYD_CHECK_PANICS", &flag);
        let mut daemon = Daemon::start(&mut cmd);
        std::fs::write(&flag, "").unwrap();
        daemon.signal(libc::SIGHUP);
        wait_until(
            "the reload to be refused",
            Duration::from_millis(50),
            Duration::from_secs(5),
            || daemon.log_text().contains("configuration reload refused"),
        );
        let (_, scrape) = daemon.get("/metrics");
        assert_eq!(
            metric_value(&scrape, "latencyd_config_reload_failures_total"),
            Some(1.0),
            "counted as refused"
        );
        assert_eq!(
            metric_value(&scrape, "latencyd_config_last_reload_successful"),
            Some(0.0)
        );
        std::fs::remove_file(&flag).unwrap();
        daemon.signal(libc::SIGHUP);
        wait_until(
            "a good reload",
            Duration::from_millis(50),
            Duration::from_secs(5),
            || {
                metric_value(
                    &daemon.get("/metrics").1,
                    "latencyd_config_last_reload_successful",
                ) == Some(1.0)
            },
        );
        daemon.signal(libc::SIGTERM);
        let (exit, log) = daemon.wait_with_log();
        assert!(exit.success(), "{log:?}");
        // At start: exit 78, the configuration named as unchecked.
        std::fs::write(&flag, "").unwrap();
        let output = run_with_faults(dir.path(), "")
            .env("FAULT_INJECTION_LATENCYD_CHECK_PANICS", &flag)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(78), "{}", stderr_of(&output));
        assert!(stderr_of(&output).contains("checking it failed inside latencyd"));
    }

    /// The sum of the samplers' sample counts in a scrape.
    fn samples(scrape: &str) -> f64 {
        scrape
            .lines()
            .filter(|l| l.starts_with("latencyd_wakeup_latency_seconds_count"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    #[test]
    fn a_reload_that_hangs_runs_beside_the_loop_and_is_refused_at_its_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("hang-now");
        let mut cmd = run_with_faults(dir.path(), "");
        cmd.env("FAULT_INJECTION_LATENCYD_CHECK_HANGS", &flag);
        let mut daemon = Daemon::start(&mut cmd);
        std::fs::write(&flag, "").unwrap();
        daemon.signal(libc::SIGHUP);
        let hung_at = Instant::now();
        // While the check hangs, the collector goes on: the samples grow,
        // /healthz stays 200, and the reload is not yet called good.
        std::thread::sleep(Duration::from_millis(500));
        let before = samples(&daemon.get("/metrics").1);
        std::thread::sleep(Duration::from_secs(2));
        let scrape = daemon.get("/metrics").1;
        assert!(
            samples(&scrape) > before,
            "the collector froze during a reload"
        );
        assert_eq!(
            daemon.get("/healthz").0,
            200,
            "{}",
            daemon.get("/healthz").1
        );
        assert!(!daemon.log_text().contains("configuration reload refused"));
        wait_until(
            "the reload to be refused at its deadline",
            Duration::from_millis(100),
            Duration::from_secs(15),
            || daemon.log_text().contains("configuration reload refused"),
        );
        let waited = hung_at.elapsed();
        assert!(
            waited >= Duration::from_secs(9),
            "refused after {waited:?}, before its 10 s deadline"
        );
        let log = daemon.log_text();
        assert!(
            log.contains("did not finish within 10 s; it was checking it against the host"),
            "{log}"
        );
        let scrape = daemon.get("/metrics").1;
        assert_eq!(
            metric_value(&scrape, "latencyd_config_reload_failures_total"),
            Some(1.0)
        );
        assert_eq!(
            metric_value(&scrape, "latencyd_config_last_reload_successful"),
            Some(0.0)
        );
        // A second hanging reload does not hold SIGTERM, nor the exit.
        daemon.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(300));
        let asked = Instant::now();
        daemon.signal(libc::SIGTERM);
        let (exit, log) = daemon.wait_with_log();
        assert!(exit.success(), "{log:?}");
        assert!(
            asked.elapsed() < Duration::from_secs(6),
            "SIGTERM during a hanging reload took {:?}",
            asked.elapsed()
        );
        std::fs::remove_file(&flag).unwrap();
    }

    /// `latencyd qualify` with one wake-up made 150 ms late on the last
    /// CPU against a maximum of 100 ms: exit 1, that CPU's case fails
    /// with its maximum and the maximum it was held to, the other CPUs
    /// pass, and (as root, where forensics can trace) the failure names
    /// the capture and the file `latencyd plot --capture` draws.
    #[test]
    fn qualify_fails_on_an_injected_spike_and_names_its_capture() {
        let _turn = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let cpus = latencyd::host::HostInfo::detect().usable_cpus;
        let cpu = *cpus.last().unwrap();
        let (json, junit) = (dir.path().join("q.json"), dir.path().join("q.xml"));
        let mut cmd = latencyd();
        cmd.args([
            "qualify",
            "--profile",
            "smoke",
            "--runtime",
            "2",
            "--load",
            "none",
        ])
        .args(["--maximum-latency", "100000", "--json"])
        .arg(&json)
        .arg("--junit")
        .arg(&junit)
        .env(
            "FAULT_INJECTION_LATENCYD",
            format!("spike:{cpu}:300:150000"),
        );
        let output = cmd.output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let idle = doc["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "idle")
            .unwrap();
        for case in idle["cpus"].as_array().unwrap() {
            if case["cpu"] == cpu {
                let reason = case["reason"].as_str().unwrap();
                assert!(
                    reason.contains("over the maximum of 100000 µs (--maximum-latency)"),
                    "{reason}"
                );
                assert!(
                    case["stats"]["max"].as_f64().unwrap() >= 150_000.0,
                    "{case:#}"
                );
            } else {
                assert_eq!(case["verdict"], "passed", "{case:#}");
            }
        }
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains(&format!(
                "<testcase classname=\"latencyd.qualify.idle\" name=\"cpu{cpu}\""
            )),
            "{xml}"
        );
        if !privileged() {
            report_skip(
                "faults::qualify_fails_on_an_injected_spike",
                "not root: no capture (forensics needs root and tracefs), the failure's link to it was not checked",
            );
            return;
        }
        let captured = idle["captures"].as_array().map_or(0, Vec::len);
        assert!(captured > 0, "as root forensics captured nothing: {idle:#}");
        let id = idle["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cpu"] == cpu)
            .unwrap()["captures"][0]
            .as_str()
            .unwrap()
            .to_string();
        let file = dir
            .path()
            .join("q.json.captures")
            .join(format!("{id}.json"));
        assert!(file.exists(), "{}", file.display());
        assert!(
            xml.contains(&format!("capture {id} on CPU {cpu}"))
                && xml.contains(&format!("draw: latencyd plot --capture {}", file.display())),
            "{xml}"
        );
    }
}
