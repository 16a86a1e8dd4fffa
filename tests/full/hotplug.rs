//! CPU hotplug under a running daemon: a CPU taken offline stops its
//! sampler cleanly (reported in /metrics and the API, /healthz stays 200,
//! no exit) and sampling resumes when the CPU comes back; after storms of
//! off/on cycles (at start, running, during a reload) every online CPU
//! has a running sampler and the API, metrics and page agree with sysfs.
//! Needs root and a hot-pluggable CPU other than 0; in its own test
//! binary so that no other test's samplers lose their CPU, its tests one
//! at a time.

#[path = "../common/mod.rs"]
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

/// The status API's view of CPU `cpu`'s sampler.
fn sampler(daemon: &Daemon, cpu: u64) -> Value {
    sampler_status(daemon, cpu as usize)
}

fn count(daemon: &Daemon, cpu: u64) -> u64 {
    let latency: Value =
        serde_json::from_str(&daemon.get(&format!("/api/v1/latency/{cpu}")).1).unwrap();
    latency["count"].as_u64().unwrap()
}

/// The highest usable CPU above 0 whose online switch can be written, or
/// None (said) when there is none.
fn hot_pluggable(test: &str) -> Option<(u64, PathBuf)> {
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
    if control.is_none() {
        report_skip(
            test,
            "no CPU above 0 can be taken offline here (needs root and a hot-pluggable CPU): \
             hotplug was not tested",
        );
    }
    control
}

/// `cycles` off/on cycles of the CPU behind `switch`, `half` apart.
fn storm(switch: &PathBuf, cycles: usize, half: Duration) {
    for _ in 0..cycles {
        let _ = std::fs::write(switch, "0");
        std::thread::sleep(half);
        let _ = std::fs::write(switch, "1");
        std::thread::sleep(half);
    }
}

/// The CPUs sysfs lists online.
fn online_cpus() -> Vec<u64> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    latencyd::cpulist::parse_cpu_list(text.trim())
        .unwrap()
        .into_iter()
        .map(|c| c as u64)
        .collect()
}

/// The sampler threads of `pid`, by CPU (their names are `sampler-cpuN`).
fn sampler_threads(pid: u32) -> Vec<u64> {
    let mut cpus: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| {
            let comm = std::fs::read_to_string(task.ok()?.path().join("comm")).ok()?;
            comm.trim().strip_prefix("sampler-cpu")?.parse().ok()
        })
        .collect();
    cpus.sort_unstable();
    cpus
}

/// Every online CPU has a running sampler thread that is sampling, the
/// API, the metrics and the page agree with sysfs, and /healthz is 200 —
/// or what differs.
fn agrees_with_sysfs(daemon: &Daemon) -> Result<(), String> {
    let online = online_cpus();
    let threads = sampler_threads(daemon.pid());
    if threads != online {
        return Err(format!("sampler threads on {threads:?}, online {online:?}"));
    }
    let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    let metrics = daemon.get("/metrics").1;
    for s in status["samplers"].as_array().unwrap() {
        let cpu = s["cpu"].as_u64().unwrap();
        let is_online = online.contains(&cpu);
        if s["online"] != is_online || s["sampling"] != is_online {
            return Err(format!(
                "CPU {cpu}: {s} while sysfs says online {is_online}"
            ));
        }
        let series = format!("latencyd_sampler_online{{cpu=\"{cpu}\"}}");
        if metric_value(&metrics, &series) != Some(f64::from(u8::from(is_online))) {
            return Err(format!("{series} is {:?}", metric_value(&metrics, &series)));
        }
    }
    let listed: Vec<u64> = status["samplers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["cpu"].as_u64().unwrap())
        .collect();
    if let Some(missing) = online.iter().find(|cpu| !listed.contains(cpu)) {
        return Err(format!("online CPU {missing} has no sampler in the status"));
    }
    let before: Vec<u64> = online.iter().map(|&c| count(daemon, c)).collect();
    std::thread::sleep(Duration::from_millis(600));
    for (&cpu, before) in online.iter().zip(before) {
        if count(daemon, cpu) <= before {
            return Err(format!("CPU {cpu} is not counting samples"));
        }
    }
    match daemon.get("/healthz") {
        (200, _) => Ok(()),
        (code, body) => Err(format!("/healthz {code}: {body}")),
    }
}

/// Waits a few seconds for `agrees_with_sysfs`, or fails with why not.
fn settles(daemon: &Daemon, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    loop {
        match agrees_with_sysfs(daemon) {
            Ok(()) => return,
            Err(why) if std::time::Instant::now() > deadline => {
                panic!("{what}: after 8 s, {why}\n{}", daemon.log_text())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

#[test]
// Full tier: root takes CPUs offline.
fn storms_of_off_on_cycles_end_with_a_sampler_on_every_online_cpu() {
    let _turn = one_at_a_time();
    let test = "storms_of_off_on_cycles_end_with_a_sampler_on_every_online_cpu";
    let Some((_, switch)) = hot_pluggable(test) else {
        return;
    };
    let _restore = OnlineAgain(switch.clone());
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with_export(dir.path(), "");
    settles(&daemon, "at start");
    // Ten cycles in 2 s, then faster ones that land inside a restart.
    for half in [100, 30, 7, 1] {
        storm(&switch, 10, Duration::from_millis(half));
        settles(
            &daemon,
            &format!("after 10 cycles of {half} ms off, {half} ms on"),
        );
    }
    let log = daemon.log_text();
    assert!(!log.contains("has died"), "{log}");
    // The kernel widens the CPUs of a thread whose CPU goes offline: that
    // is hotplug, not a change of the sampler's scheduling to report.
    assert!(!log.contains("changed behind latencyd's back"), "{log}");
    let scrape = daemon.get("/metrics").1;
    assert!(
        !scrape.lines().any(
            |l| l.starts_with("latencyd_sampler_scheduling_changes_total{") && !l.ends_with(" 0")
        ),
        "{scrape}"
    );
}

#[test]
// Full tier: root takes CPUs offline.
fn a_cpu_offline_for_a_while_is_no_change_of_the_hosts_configuration() {
    let _turn = one_at_a_time();
    let test = "a_cpu_offline_for_a_while_is_no_change_of_the_hosts_configuration";
    let Some((cpu, switch)) = hot_pluggable(test) else {
        return;
    };
    let _restore = OnlineAgain(switch.clone());
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), "", "", "[host]\nreread_interval = \"1s\"\n");
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    settles(&daemon, "at start");
    let host = || -> Value { serde_json::from_str(&daemon.get("/api/v1/host").1).unwrap() };
    let reads = |h: &Value| h["read_unix_ns"].as_u64().unwrap();
    // Offline over at least three reads of the facts (the kernel moves
    // the IRQs off it and its own facts go), then back for three more.
    for online in ["0", "1"] {
        std::fs::write(&switch, online).unwrap();
        let from = reads(&host());
        wait_until(
            &format!("three reads of the host's facts with CPU {cpu} online = {online}"),
            Duration::from_millis(100),
            Duration::from_secs(20),
            || reads(&host()) > from + 3_000_000_000,
        );
    }
    let after = host();
    let log = daemon.log_text();
    // The CPU's own facts and the online list are back as they were. An
    // IRQ the kernel moved off the CPU may stay where the kernel put it
    // (it does not move IRQs back): that one, and only that, is a change,
    // since the host now takes that interrupt elsewhere.
    let stayed_moved = |after: &Value| -> bool {
        let Some(facts) = after["changes"][0]["facts"].as_object() else {
            return false;
        };
        let split = |v: &Value| -> Option<(String, String, String)> {
            let text = v.as_str()?;
            let (name, rest) = text.rsplit_once(" on ")?;
            let (on, allowed) = rest.split_once(' ')?;
            Some((name.to_string(), on.to_string(), allowed.to_string()))
        };
        facts.iter().all(|(fact, change)| {
            let (Some(from), Some(to)) = (split(&change["from"]), split(&change["to"])) else {
                return false;
            };
            fact.starts_with("irq[")
                && from.0 == to.0
                && from.2 == to.2
                && from.1 == cpu.to_string()
                && to.1 != cpu.to_string()
        })
    };
    match after["changes_total"].as_u64() {
        Some(0) => assert!(!log.contains("the host's configuration changed"), "{log}"),
        Some(1) => assert!(stayed_moved(&after), "{after}"),
        _ => panic!("a CPU offline for a while made more than one change: {after}"),
    }
}

#[test]
// Full tier: root takes CPUs offline.
fn hotplug_during_start_and_during_a_reload_ends_sampled_too() {
    let _turn = one_at_a_time();
    let test = "hotplug_during_start_and_during_a_reload_ends_sampled_too";
    let Some((cpu, switch)) = hot_pluggable(test) else {
        return;
    };
    let _restore = OnlineAgain(switch.clone());
    let dir = tempfile::tempdir().unwrap();
    // Offline at start (cpus = "all"): sampled once it comes online.
    std::fs::write(&switch, "0").unwrap();
    let daemon = Daemon::start_with_export(dir.path(), "");
    settles(&daemon, "started with the CPU offline");
    std::fs::write(&switch, "1").unwrap();
    settles(&daemon, "the CPU came online after the start");
    assert!(
        daemon
            .log_text()
            .contains(&format!("CPU {cpu} came online")),
        "{}",
        daemon.log_text()
    );
    drop(daemon);
    // A storm while the daemon starts.
    let storming = {
        let switch = switch.clone();
        std::thread::spawn(move || storm(&switch, 20, Duration::from_millis(50)))
    };
    let daemon = Daemon::start_with_export(dir.path(), "");
    storming.join().unwrap();
    settles(&daemon, "a storm during the start");
    // A storm during reloads.
    let storming = {
        let switch = switch.clone();
        std::thread::spawn(move || storm(&switch, 20, Duration::from_millis(20)))
    };
    for _ in 0..5 {
        daemon.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(150));
    }
    storming.join().unwrap();
    settles(&daemon, "a storm during reloads");
}

#[test]
// Full tier: root takes CPUs offline.
fn a_listed_cpu_offline_at_start_is_sampled_once_it_comes_online() {
    let _turn = one_at_a_time();
    let test = "a_listed_cpu_offline_at_start_is_sampled_once_it_comes_online";
    let Some((cpu, switch)) = hot_pluggable(test) else {
        return;
    };
    let _restore = OnlineAgain(switch.clone());
    std::fs::write(&switch, "0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), &format!("cpus = \"0,{cpu}\""), "", "");
    // Not a configuration error: the CPU is there, just offline now.
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    settles(&daemon, "started with a listed CPU offline");
    assert_eq!(sampler(&daemon, cpu)["online"], false);
    std::fs::write(&switch, "1").unwrap();
    settles(&daemon, "the listed CPU came online");
}

#[test]
// Full tier: root takes CPUs offline.
fn an_offline_cpu_stops_its_sampler_and_sampling_resumes_when_it_returns() {
    let _turn = one_at_a_time();
    let Some((cpu, switch)) =
        hot_pluggable("an_offline_cpu_stops_its_sampler_and_sampling_resumes_when_it_returns")
    else {
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

/// A sampler asleep (the fault injection's one long sleep) while its CPU
/// goes offline and back: the stall, the offline stretch and the stall
/// found again after it are gaps that never cover the same time twice.
#[cfg(feature = "fault-injection")]
#[test]
// Full tier: root takes CPUs offline.
fn gaps_around_an_offline_stretch_do_not_overlap() {
    let _turn = one_at_a_time();
    let test = "gaps_around_an_offline_stretch_do_not_overlap";
    let Some((cpu, switch)) = hot_pluggable(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The CPU's first sleep 300 ms after its sampler starts lasts 8 s.
    let mut cmd = latencyd();
    let config = daemon_config(dir.path(), "stall_threshold = \"500ms\"", "", "");
    cmd.args(["run", "--config"]).arg(config).env(
        "FAULT_INJECTION_LATENCYD",
        format!("spike:{cpu}:300:8000000"),
    );
    let daemon = Daemon::start(&mut cmd);
    let poll = Duration::from_millis(50);
    let gaps = || -> Vec<Value> {
        let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
        status["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["cpu"] == cpu)
            .cloned()
            .collect()
    };
    wait_until("the stall", poll, Duration::from_secs(5), || {
        gaps().iter().any(|g| g["reason"] == "stalled")
    });
    let _restore = OnlineAgain(switch.clone());
    std::fs::write(&switch, "0").expect("the CPU goes offline");
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::write(&switch, "1").expect("the CPU comes back");
    wait_until(
        "the sampler to run again",
        poll,
        Duration::from_secs(20),
        || {
            let g = gaps();
            !g.is_empty() && g.iter().all(|g| !g["end"].is_null())
        },
    );
    // A restarted sampler's first sleep is long again (the injection is
    // per start): only the gaps that ended are compared.
    let mut spans: Vec<(String, String, String)> = gaps()
        .iter()
        .filter(|g| !g["end"].is_null())
        .map(|g| {
            let text = |k: &str| g[k].as_str().unwrap().to_string();
            (text("start"), text("end"), text("reason"))
        })
        .collect();
    spans.sort();
    assert!(spans.iter().any(|s| s.2 == "offline"), "{spans:?}");
    // RFC 3339 times of one format sort as they happen.
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "gaps overlap: {pair:?}");
    }
}

/// Short-lived SCHED_FIFO 1 threads, not pinned, each sleeping to three
/// 1 ms deadlines and exiting, `at_once` alive at a time until `stop`;
/// returns how many ran.
fn short_lived_rt_tasks(at_once: usize, stop: &std::sync::atomic::AtomicBool) -> u64 {
    use std::sync::atomic::Ordering;
    let mut ran = 0;
    while !stop.load(Ordering::Relaxed) {
        let batch: Vec<_> = (0..at_once)
            .map(|_| {
                std::thread::Builder::new()
                    .name("rt-short".to_string())
                    .spawn(|| {
                        let param = libc::sched_param { sched_priority: 1 };
                        // SAFETY: a valid sched_param for the calling thread.
                        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
                        for _ in 0..3 {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    })
                    .unwrap()
            })
            .collect();
        for task in batch {
            task.join().unwrap();
            ran += 1;
        }
    }
    ran
}

/// The observer keeps a woken task only while it waits on that CPU:
/// unpinned short-lived real-time tasks, woken on the observed CPU and
/// run elsewhere, exiting, and a CPU going offline under them leave
/// nothing waiting, and the daemon stops at once. (Before, an entry left
/// by a task that ran elsewhere stayed for ever: 6,600 such tasks took
/// the daemon from 18 to 72 MB and its SIGTERM past 120 s.)
#[test]
// Full tier: root takes CPUs offline, tracefs.
fn unpinned_short_lived_rt_tasks_and_hotplug_leave_the_observer_nothing_waiting() {
    let _turn = one_at_a_time();
    let test = "unpinned_short_lived_rt_tasks_and_hotplug_leave_the_observer_nothing_waiting";
    let Some((cpu, switch)) = hot_pluggable(test) else {
        return;
    };
    if let Err(why) = ensure_tracefs() {
        report_skip(test, &why);
        return;
    }
    let _restore = OnlineAgain(switch.clone());
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(
        dir.path(),
        "cpus = \"0\"",
        "",
        &format!("[observe]\nenabled = true\ncpus = \"{cpu}\"\n"),
    );
    let mut daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    let metric = |series: &str| metric_value(&daemon.get("/metrics").1, series);
    let waiting = format!("latencyd_observe_waiting_tasks{{cpu=\"{cpu}\"}}");
    wait_until(
        "the observer to export its waiting tasks",
        Duration::from_millis(100),
        Duration::from_secs(20),
        || metric(&waiting).is_some(),
    );
    let rss = |pid: u32| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
            .unwrap()
    };
    let rss_before = rss(daemon.pid());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let ran = std::thread::scope(|scope| {
        let tasks = scope.spawn(|| short_lived_rt_tasks(8, &stop));
        std::thread::sleep(Duration::from_secs(5));
        // The observed CPU leaves twice under the tasks.
        storm(&switch, 2, Duration::from_secs(1));
        std::thread::sleep(Duration::from_secs(5));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        tasks.join().unwrap()
    });
    // A task still waiting is let go after a second at most (stale) or
    // when it is seen to run elsewhere; the CPU's own kernel threads come
    // and go in microseconds.
    wait_until(
        "no task left waiting on the observed CPU",
        Duration::from_millis(200),
        Duration::from_secs(20),
        || metric(&waiting) == Some(0.0),
    );
    let let_go = metric(&format!(
        "latencyd_observe_waiting_let_go_total{{cpu=\"{cpu}\"}}"
    ));
    let rss_after = rss(daemon.pid());
    eprintln!(
        "{ran} short-lived FIFO 1 tasks, CPU {cpu} offline twice: let go of {let_go:?} \
         waiting; RSS {rss_before} -> {rss_after} KiB"
    );
    assert!(ran > 100, "only {ran} tasks ran");
    assert!(
        rss_after < rss_before + 8 * 1024,
        "RSS {rss_before} -> {rss_after} KiB"
    );
    let started = std::time::Instant::now();
    daemon.signal(libc::SIGTERM);
    let (status, _) = daemon.wait_with_log();
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "SIGTERM took {:?}",
        started.elapsed()
    );
}
