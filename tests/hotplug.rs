//! CPU hotplug under a running daemon: a CPU taken offline stops its
//! sampler cleanly (reported in /metrics and the API, /healthz stays 200,
//! no exit) and sampling resumes when the CPU comes back. Needs root and a
//! hot-pluggable CPU other than 0; in its own test binary so that no other
//! test's samplers lose their CPU.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Puts the CPU back online however the test ends.
struct OnlineAgain(PathBuf);

impl Drop for OnlineAgain {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, "1");
    }
}

fn sampler(daemon: &Daemon, cpu: u64) -> Value {
    let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    status["samplers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["cpu"] == cpu)
        .cloned()
        .unwrap()
}

fn count(daemon: &Daemon, cpu: u64) -> u64 {
    let latency: Value =
        serde_json::from_str(&daemon.get(&format!("/api/v1/latency/{cpu}")).1).unwrap();
    latency["count"].as_u64().unwrap()
}

#[test]
fn an_offline_cpu_stops_its_sampler_and_sampling_resumes_when_it_returns() {
    // The highest usable CPU above 0 whose online switch we can write.
    let usable = usable_cpus();
    let control = (1..usable)
        .rev()
        .map(|cpu| {
            (
                cpu as u64,
                PathBuf::from(format!("/sys/devices/system/cpu/cpu{cpu}/online")),
            )
        })
        .find(|(_, path)| std::fs::OpenOptions::new().write(true).open(path).is_ok());
    let Some((cpu, switch)) = control else {
        report_skip(
            "tests/hotplug.rs",
            "no CPU above 0 can be taken offline here (needs root and a hot-pluggable CPU): \
             hotplug was not tested",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start_with_export(dir.path(), "");
    let poll = Duration::from_millis(50);
    let patience = Duration::from_secs(20);
    wait_until("samples on the CPU", poll, patience, || {
        count(&daemon, cpu) > 0
    });
    let first_tid = sampler(&daemon, cpu)["tid"].clone();

    let _restore = OnlineAgain(switch.clone());
    std::fs::write(&switch, "0").expect("the CPU goes offline");
    wait_until("the sampler to be reported offline", poll, patience, || {
        sampler(&daemon, cpu)["online"] == false
    });
    let (status, body) = daemon.get("/healthz");
    assert_eq!(status, 200, "an offline CPU is not a failure: {body}");
    let metrics = daemon.get("/metrics").1;
    assert_eq!(
        metric_value(
            &metrics,
            &format!("latencyd_sampler_online{{cpu=\"{cpu}\"}}")
        ),
        Some(0.0)
    );
    assert_eq!(
        metric_value(
            &metrics,
            &format!("latencyd_sampler_realtime{{cpu=\"{cpu}\",policy=\"fifo\"}}")
        )
        .or_else(|| metric_value(
            &metrics,
            &format!("latencyd_sampler_realtime{{cpu=\"{cpu}\",policy=\"other\"}}")
        )),
        Some(0.0)
    );
    let page = daemon.get("/").1;
    assert!(page.contains("CPU offline"), "the status page says so");
    let offline_count = count(&daemon, cpu);
    // Nothing is counted for an offline CPU.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(count(&daemon, cpu), offline_count);
    assert!(daemon.child.try_wait().unwrap().is_none(), "still running");

    std::fs::write(&switch, "1").expect("the CPU comes back");
    wait_until("sampling to resume", poll, patience, || {
        let s = sampler(&daemon, cpu);
        s["online"] == true && count(&daemon, cpu) > offline_count
    });
    assert_ne!(
        sampler(&daemon, cpu)["tid"],
        first_tid,
        "a new sampler thread"
    );
    let metrics = daemon.get("/metrics").1;
    assert_eq!(
        metric_value(
            &metrics,
            &format!("latencyd_sampler_online{{cpu=\"{cpu}\"}}")
        ),
        Some(1.0)
    );
    let log = daemon.log_text();
    assert!(log.contains(&format!("CPU {cpu} went offline")), "{log}");
    assert!(log.contains(&format!("CPU {cpu} is back online")), "{log}");
    assert!(!log.contains("has died"), "{log}");

    daemon.signal(libc::SIGTERM);
    let (status, log) = daemon.wait_with_log();
    assert!(status.success(), "{status}: {log:?}");
}
