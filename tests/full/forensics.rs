//! Spike forensics on the real binary and the real kernel.
//!
//! As root (tracefs mounted by the test if it is not): a SCHED_FIFO thread
//! of higher priority than the samplers, pinned to one CPU and busy ~3 ms
//! under a distinctive name, must be named as the main cause of that
//! CPU's spike by the daemon (`/api/v1/spikes`) and by `measure -b` and
//! `measure --forensics`, with `samples + missed == periods` intact; a
//! storm of spikes stays within the configured bounds; an instance left
//! by a crash is removed, and the daemon's own goes at exit. For everyone:
//! forensics without permission and without tracefs leaves the daemon
//! running and says why.

#[path = "../common/mod.rs"]
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const INSTANCES: &str = "/sys/kernel/tracing/instances";

/// The tracefs instance a daemon says its forensics records in.
fn instance_of(daemon: &Daemon) -> std::path::PathBuf {
    let status = json_of(daemon, "/api/v1/status");
    let name = status["forensics"]["instance"]
        .as_str()
        .unwrap_or_else(|| panic!("no instance: {}", status["forensics"]));
    Path::new(INSTANCES).join(name)
}
/// The samplers' priority, and the culprit's, above it.
const PRIORITY: i32 = 80;
const CULPRIT_PRIORITY: i32 = 90;

/// The last CPU latencyd samples: where spikes are made.
fn spike_cpu() -> usize {
    *latencyd::host::HostInfo::detect()
        .usable_cpus
        .last()
        .expect("a usable CPU")
}

/// Root with tracefs, or the reason the real-kernel part is skipped.
fn real_kernel(test: &str) -> bool {
    if !privileged() {
        report_skip(
            test,
            "needs root for SCHED_FIFO and tracefs; ran the unprivileged tests only",
        );
        return false;
    }
    match ensure_tracefs() {
        Ok(()) => true,
        Err(why) => {
            report_skip(test, &why);
            false
        }
    }
}

fn forensics_daemon(dir: &Path, forensics: &str) -> Daemon {
    let config = daemon_config(
        dir,
        &format!("interval = \"1ms\"\npriority = {PRIORITY}"),
        "",
        &format!(
            "[forensics]\nenabled = true\ndir = \"{}\"\n{forensics}\n",
            dir.join("spikes").display()
        ),
    );
    Daemon::start(latencyd().args(["run", "--config"]).arg(config))
}

fn json_of(daemon: &Daemon, path: &str) -> Value {
    let (status, body) = daemon.get(path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Polls `/api/v1/spikes` until a capture of `cpu` names task `tid`.
fn capture_naming(daemon: &Daemon, cpu: usize, tid: i32) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let spikes = json_of(daemon, "/api/v1/spikes");
        if let Some(found) = spikes["spikes"].as_array().unwrap().iter().find(|s| {
            s["cpu"] == cpu
                && s["causes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["pid"] == tid)
        }) {
            return Some(found.clone());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

#[test]
// Full tier: root and tracefs.
fn a_new_window_maximum_under_the_threshold_is_captured_as_new_max() {
    if !real_kernel("tests/full/forensics.rs (new maxima)") {
        return;
    }
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // A threshold no wake-up here reaches: every capture is a new maximum.
    let daemon = forensics_daemon(
        dir.path(),
        "threshold = \"10s\"\ncapture_new_max = true\nper_cpu_interval = \"0s\"",
    );
    let mut found = Value::Null;
    wait_until(
        "a new maximum's capture",
        Duration::from_millis(100),
        Duration::from_secs(15),
        || {
            let spikes = json_of(&daemon, "/api/v1/spikes");
            found = spikes["spikes"][0].clone();
            !found.is_null()
        },
    );
    assert_eq!(found["trigger"], "new_max", "{found}");
    let id = found["id"].as_str().unwrap();
    assert!(id.ends_with("-max"), "{id}");
    assert!(found["latency_ns"].as_u64().unwrap() < 10_000_000_000);
    // Served whole like any capture; with the threshold out of reach,
    // every capture there is a new maximum.
    let (status, _) = daemon.get(&format!("/api/v1/spikes/{id}"));
    assert_eq!(status, 200);
    let spikes = json_of(&daemon, "/api/v1/spikes");
    assert!(
        spikes["spikes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["trigger"] == "new_max"),
        "{spikes}"
    );
}

#[test]
// Full tier: root and tracefs.
fn a_busy_real_time_task_is_named_as_the_main_cause() {
    let _turn = one_at_a_time();
    if !real_kernel("a_busy_real_time_task_is_named_as_the_main_cause") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = forensics_daemon(
        dir.path(),
        "threshold = \"15ms\"\nper_cpu_interval = \"0s\"\nmax_per_minute = 600",
    );
    let status = json_of(&daemon, "/api/v1/status");
    assert_eq!(
        status["forensics"]["available"], true,
        "{}",
        status["forensics"]
    );
    let instance = instance_of(&daemon);
    assert!(instance.is_dir(), "the private instance exists");
    assert_eq!(
        instance.file_name().unwrap().to_str().unwrap(),
        format!("latencyd-forensics-{}", daemon.pid()),
        "named after its owner"
    );
    std::thread::sleep(Duration::from_millis(500));
    let cpu = spike_cpu();
    let tid = busy_named_thread(cpu, CULPRIT_PRIORITY, CULPRIT_SPIN, "lat-culprit");
    let spike = capture_naming(&daemon, cpu, tid)
        .unwrap_or_else(|| panic!("no capture names tid {tid}: {}", daemon.log_text()));
    let latency = spike["latency_ns"].as_u64().unwrap();
    let causes = spike["causes"].as_array().unwrap();
    let main = &causes[0];
    assert_eq!(main["kind"], "task", "{spike}");
    assert_eq!(main["name"], "lat-culprit", "{spike}");
    assert_eq!(main["pid"], tid, "{spike}");
    assert_eq!(main["priority"], CULPRIT_PRIORITY, "{spike}");
    let main_ns = main["duration_ns"].as_u64().unwrap();
    assert!(
        main_ns * 2 > latency,
        "the culprit accounts for most of the {latency} ns: {spike}"
    );
    let sum: u64 = causes
        .iter()
        .map(|c| c["duration_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, latency, "the causes add up to the latency");
    assert!(
        spike["verdict"].as_str().unwrap().contains("lat-culprit"),
        "{spike}"
    );
    eprintln!("capture: {}", spike["verdict"]);

    // The whole capture: its events, from the file written whole.
    let id = spike["id"].as_str().unwrap();
    let full = json_of(&daemon, &format!("/api/v1/spikes/{id}"));
    let events = full["events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["event"] == "sched_switch"
            && e["fields"]
                .as_str()
                .unwrap()
                .contains(&format!("prev_pid={tid} "))),
        "the culprit's switch back to the sampler is among the events"
    );
    assert!(
        dir.path()
            .join("spikes")
            .join(format!("{id}.json"))
            .is_file()
    );
    assert_eq!(full["id"], spike["id"]);

    // Counted by its main cause.
    let (_, scrape) = daemon.get("/metrics");
    let counted = metric_value(
        &scrape,
        &format!("latencyd_forensics_captures_total{{cause=\"task\",cpu=\"{cpu}\"}}"),
    );
    assert!(counted.is_some_and(|n| n >= 1.0), "{scrape}");
}

#[test]
// Full tier: root and tracefs.
fn measure_breaktrace_stops_at_the_spike_and_names_the_culprit() {
    let _turn = one_at_a_time();
    let test = "measure_breaktrace_stops_at_the_spike_and_names_the_culprit";
    if !real_kernel(test) {
        return;
    }
    let cpu = spike_cpu();
    // The VM's own noise may break a run before the culprit comes; such a
    // run is tried again.
    for attempt in 1..=5 {
        let started = Instant::now();
        let mut child = latencyd()
            .args(["measure", "-q", "-i", "1000", "-D", "60"])
            .args([
                "-p",
                &PRIORITY.to_string(),
                "-a",
                &cpu.to_string(),
                "-b",
                "2500",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(2));
        if child.try_wait().unwrap().is_some() {
            let output = child.wait_with_output().unwrap();
            eprintln!("attempt {attempt}: broken by noise: {}", stdout_of(&output));
            continue;
        }
        // The VM's own spikes can break the run in the moments between
        // the check above and the culprit: a break dated before the culprit
        // started is noise, and the run is tried again.
        let culprit_at = latencyd::calendar::format_rfc3339_ms(latencyd::units::unix_now_ns());
        let tid = busy_named_thread(
            cpu,
            CULPRIT_PRIORITY,
            Duration::from_millis(4),
            "lat-breaker",
        );
        let output = child.wait_with_output().unwrap();
        let out = stdout_of(&output);
        assert!(output.status.success(), "{out}{}", stderr_of(&output));
        let spike_at = out
            .lines()
            .find_map(|l| l.strip_prefix("# Spike at "))
            .map(|rest| &rest[..24.min(rest.len())]);
        if spike_at.is_some_and(|at| at < culprit_at.as_str()) {
            eprintln!("attempt {attempt}: broken by noise before the culprit ran: {out}");
            continue;
        }
        assert!(
            started.elapsed() < Duration::from_secs(50),
            "-b stopped the 60 s run at the spike"
        );
        assert!(out.contains("# Break thread: "), "{out}");
        let value: u64 = out
            .lines()
            .find_map(|l| l.strip_prefix("# Break value: "))
            .expect("a break value")
            .trim()
            .parse()
            .unwrap();
        assert!(value >= 2500, "{out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("# Spike at ")
                    && l.contains(&format!("lat-breaker (pid {tid}"))),
            "the break's capture names the culprit: {out}"
        );
        return;
    }
    report_skip(
        test,
        "the VM's own spikes broke every run before the culprit ran",
    );
}

#[test]
// Full tier: root and tracefs.
fn measure_forensics_captures_and_goes_on_counting_every_period() {
    let _turn = one_at_a_time();
    if !real_kernel("measure_forensics_captures_and_goes_on_counting_every_period") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let cpu = spike_cpu();
    let periods = 4000;
    // The VM's own spikes may take the CPU's one capture in 200 ms just
    // before the culprit runs; such a run, which says so, is tried again.
    for attempt in 1..=5 {
        let child = latencyd()
            .args(["measure", "-q", "-i", "1000", "-D", "4s"])
            .args(["-p", &PRIORITY.to_string(), "-a", &cpu.to_string()])
            .args(["--forensics", "--forensics-threshold", "1ms"])
            .arg(format!("--json={}", json.display()))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(1));
        let tid = busy_named_thread(
            cpu,
            CULPRIT_PRIORITY,
            Duration::from_millis(3),
            "lat-culprit",
        );
        let output = child.wait_with_output().unwrap();
        let out = stdout_of(&output);
        assert!(output.status.success(), "{out}{}", stderr_of(&output));
        // Sampling went on through the captures: every period is
        // accounted for, in every attempt.
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let thread = &doc["thread"]["0"];
        let cycles = thread["cycles"].as_u64().unwrap();
        let missed = thread["missed"].as_u64().unwrap();
        assert_eq!(
            cycles + missed,
            periods,
            "samples + missed == periods: {thread}"
        );
        assert!(missed >= 2, "the 3 ms spike skipped periods");
        if out
            .lines()
            .any(|l| l.starts_with("# Spike at ") && l.contains(&format!("lat-culprit (pid {tid}")))
        {
            // The JSON holds the captures whole, and `plot --capture`
            // draws the culprit's from it.
            let captures = doc["latencyd"]["captures"].as_array().expect("captures");
            let culprit = captures
                .iter()
                .find(|c| c["causes"][0]["pid"] == tid)
                .unwrap_or_else(|| panic!("no capture names {tid}: {captures:?}"));
            assert!(
                !culprit["events"].as_array().unwrap().is_empty(),
                "{culprit}"
            );
            let svg = dir.path().join("spike.svg");
            let id = culprit["id"].as_str().unwrap();
            run_ok(
                latencyd()
                    .args(["plot", "--capture"])
                    .arg(&json)
                    .args(["--capture-id", id, "-o"])
                    .arg(&svg),
            );
            let svg = std::fs::read_to_string(&svg).unwrap();
            assert!(svg.contains(&format!("lat-culprit (pid {tid})")), "{svg}");
            return;
        }
        // Not named: only a spike the rate limit dropped excuses that.
        assert!(
            out.contains("not captured (at most one per CPU"),
            "the culprit's spike was neither captured nor dropped by the rate limit:\n{out}"
        );
        eprintln!("attempt {attempt}: the rate limit dropped a spike, maybe the culprit's:\n{out}");
    }
    report_skip(
        "measure_forensics_captures_and_goes_on_counting_every_period",
        "the VM's own spikes took the capture slot before the culprit's in every run",
    );
}

#[test]
// Full tier: root and tracefs.
fn a_storm_of_spikes_stays_within_the_bounds() {
    let _turn = one_at_a_time();
    if !real_kernel("a_storm_of_spikes_stays_within_the_bounds") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let max_bytes = 65_536;
    let daemon = forensics_daemon(
        dir.path(),
        &format!(
            "threshold = \"1ms\"\nper_cpu_interval = \"2s\"\nmax_per_minute = 4\nmax_captures = 3\nmax_bytes = {max_bytes}"
        ),
    );
    let pid = daemon.child.id();
    let cpu_time = || -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        ticks / 100.0
    };
    let before = cpu_time();
    // A spike every ~5 ms for 10 s: 2 ms busy, 3 ms asleep.
    let cpu = spike_cpu();
    let storm_end = Instant::now() + Duration::from_secs(10);
    let mut made = 0;
    while Instant::now() < storm_end {
        busy_named_thread(cpu, CULPRIT_PRIORITY, Duration::from_millis(2), "lat-storm");
        made += 1;
        std::thread::sleep(Duration::from_millis(3));
    }
    std::thread::sleep(Duration::from_secs(1));
    let cpu_seconds = cpu_time() - before;
    let (_, scrape) = daemon.get("/metrics");
    let sum = |prefix: &str| -> f64 {
        scrape
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let captured = sum("latencyd_forensics_captures_total{");
    // Past the limits only as the worst spike so far (the VM's own,
    // up to ~10 ms, can be worse than the storm's 2 ms).
    let escalated = sum("latencyd_forensics_escalated_captures_total{");
    let limited = sum("latencyd_forensics_spikes_uncaptured_total{");
    let spikes = json_of(&daemon, "/api/v1/spikes");
    let kept = spikes["spikes"].as_array().unwrap().len();
    let files: Vec<_> = std::fs::read_dir(dir.path().join("spikes"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .collect();
    let bytes: u64 = files.iter().map(|e| e.metadata().unwrap().len()).sum();
    eprintln!(
        "storm: {made} spikes made, {captured} captured ({escalated} escalated), {limited} not \
         captured, {kept} kept ({} files, {bytes} bytes), daemon CPU {cpu_seconds:.2} s over \
         ~11 s",
        files.len()
    );
    assert!(
        (1.0..=4.0).contains(&(captured - escalated)),
        "at most max_per_minute captures but the escalated ones: {captured}, {escalated} \
         escalated"
    );
    // The recorder hears of each CPU's worst wake-up of every 200 ms
    // interval: the 10 s storm is ~50 of those.
    assert!(limited >= 25.0, "the storm is counted: {limited}");
    assert!(
        kept <= 3 && files.len() <= 3,
        "at most max_captures: {kept}, {}",
        files.len()
    );
    assert!(bytes <= max_bytes, "at most max_bytes: {bytes}");
}

#[test]
// Full tier: root and tracefs.
fn a_leftover_instance_is_removed_and_the_instance_goes_at_exit() {
    let _turn = one_at_a_time();
    if !real_kernel("a_leftover_instance_is_removed_and_the_instance_goes_at_exit") {
        return;
    }
    // Leftovers of latencyd processes that are gone: the fixed name older
    // releases used, and an owner-named one nobody holds open.
    let leftovers =
        ["latencyd", "latencyd-forensics-999999999"].map(|n| Path::new(INSTANCES).join(n));
    for leftover in &leftovers {
        if !leftover.exists() {
            std::fs::create_dir(leftover).unwrap();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = forensics_daemon(dir.path(), "");
    let status = json_of(&daemon, "/api/v1/status");
    let forensics = &status["forensics"];
    assert_eq!(forensics["available"], true, "{forensics}");
    let cleanups: Vec<&str> = forensics["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "cleanup")
        .map(|c| c["detail"].as_str().unwrap())
        .collect();
    for leftover in &leftovers {
        assert!(!leftover.exists(), "{} is removed", leftover.display());
        let said = format!("{} left by a latencyd that is gone", leftover.display());
        assert!(cleanups.iter().any(|c| c.contains(&said)), "{cleanups:?}");
    }
    let instance = instance_of(&daemon);
    daemon.signal(libc::SIGTERM);
    let (exit, log) = daemon.wait_with_log();
    assert!(exit.success(), "{log:?}");
    assert!(!instance.exists(), "the instance is removed at exit");
}

/// What a daemon captured and did not, for a failure's message: each
/// capture's CPU, latency, main causes and their pids, the uncaptured
/// counters, and the log.
fn capture_report(daemon: &Daemon) -> String {
    let spikes = json_of(daemon, "/api/v1/spikes");
    let mut lines: Vec<String> = spikes["spikes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let causes: Vec<String> = s["causes"]
                .as_array()
                .unwrap()
                .iter()
                .take(2)
                .map(|c| format!("{} (pid {})", c["name"], c["pid"]))
                .collect();
            format!(
                "{} cpu {} {} ns task {}: {}",
                s["id"],
                s["cpu"],
                s["latency_ns"],
                s["task"],
                causes.join(", ")
            )
        })
        .collect();
    let scrape = daemon.get("/metrics").1;
    lines.extend(
        scrape
            .lines()
            .filter(|l| l.starts_with("latencyd_forensics_spikes_uncaptured_total"))
            .map(str::to_string),
    );
    lines.push(daemon.log_text());
    lines.join("\n")
}

/// The names under `instances/`, or none if tracefs is not there.
fn instance_names_if_visible() -> Vec<String> {
    if Path::new(INSTANCES).is_dir() {
        instance_names()
    } else {
        Vec::new()
    }
}

/// The names under `instances/` now.
fn instance_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(INSTANCES)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// Long against a VM's own wake-ups (up to about 10 ms when the host
/// does not run the vCPU): with a 15 ms threshold, the VM's own spikes
/// are not captured, so no capture's read (which pauses recording) hides
/// the culprit's switch-in, and the culprit's wake-up is the worst.
const CULPRIT_SPIN: Duration = Duration::from_millis(30);

/// A daemon with forensics and the observer (on every CPU), and `measure
/// --forensics` started beside it, then a second one: each keeps its own
/// tracefs instances, each captures the same culprit, and each removes
/// only its own at the end — the observer's included.
#[test]
// Full tier: root and tracefs.
fn two_latencyd_processes_with_forensics_and_the_observer_keep_capturing() {
    let _turn = one_at_a_time();
    let test = "two_latencyd_processes_with_forensics_and_the_observer_keep_capturing";
    if !real_kernel(test) {
        return;
    }
    let before = instance_names();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = forensics_daemon(
        dir.path(),
        "threshold = \"15ms\"\nper_cpu_interval = \"0s\"\nmax_per_minute = 600\n\
         [observe]\nenabled = true\ncpus = \"all\"",
    );
    let forensics_instance = instance_of(&daemon);
    let observe = json_of(&daemon, "/api/v1/observe");
    let observe_name = observe["observer"]["instance"]
        .as_str()
        .unwrap_or_else(|| panic!("no observer instance: {observe}"))
        .to_string();
    assert_eq!(observe_name, format!("latencyd-observe-{}", daemon.pid()));
    let cpu = spike_cpu();
    for round in 0..2 {
        let json = dir.path().join(format!("measure-{round}.json"));
        let child = latencyd()
            .args(["measure", "-q", "-i", "1000", "-D", "3s"])
            .args(["-p", &PRIORITY.to_string(), "-a", &cpu.to_string()])
            .args(["--forensics", "--forensics-threshold", "15ms"])
            .arg(format!("--json={}", json.display()))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(1));
        let tid = busy_named_thread(cpu, CULPRIT_PRIORITY, CULPRIT_SPIN, "lat-culprit");
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", stderr_of(&output));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let captures = doc["latencyd"]["captures"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            captures.iter().any(|c| c["causes"][0]["pid"] == tid),
            "round {round}: measure captured no spike naming {tid}: {}",
            stdout_of(&output)
        );
        assert!(
            capture_naming(&daemon, cpu, tid).is_some(),
            "round {round}: the daemon captured no spike naming {tid} beside measure: {}",
            capture_report(&daemon)
        );
    }
    // After measure has come and gone twice, the daemon still captures.
    let tid = busy_named_thread(cpu, CULPRIT_PRIORITY, CULPRIT_SPIN, "lat-culprit");
    assert!(
        capture_naming(&daemon, cpu, tid).is_some(),
        "no capture after measure ended: {}",
        capture_report(&daemon)
    );
    let status = json_of(&daemon, "/api/v1/status");
    assert_eq!(
        status["forensics"]["available"], true,
        "{}",
        status["forensics"]
    );
    let (_, scrape) = daemon.get("/metrics");
    assert_eq!(
        metric_value(&scrape, "latencyd_forensics_available"),
        Some(1.0)
    );
    assert_eq!(
        metric_value(&scrape, "latencyd_observe_available"),
        Some(1.0)
    );
    let uncaptured = scrape
        .lines()
        .filter(|l| {
            l.starts_with("latencyd_forensics_spikes_uncaptured_total") && l.contains("failed")
        })
        .collect::<Vec<_>>();
    assert!(uncaptured.is_empty(), "captures failed: {uncaptured:?}");
    daemon.signal(libc::SIGTERM);
    let (exit, log) = daemon.wait_with_log();
    assert!(exit.success(), "{log:?}");
    assert!(
        !forensics_instance.exists(),
        "forensics' instance removed at exit"
    );
    assert!(
        !Path::new(INSTANCES).join(&observe_name).exists(),
        "the observer's instance removed at exit: {:?}",
        instance_names()
    );
    // Left behind: new instances whose owner is gone (another latencyd
    // running on the host owns its own, alive).
    let owner_alive = |name: &str| {
        name.rsplit('-')
            .next()
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
    };
    let left: Vec<String> = instance_names()
        .into_iter()
        .filter(|n| !before.contains(n) && !owner_alive(n))
        .collect();
    assert!(left.is_empty(), "instances left behind: {left:?}");
}

/// Another program turns the daemon's recording off and an event out in
/// its instances: within a tick or two it is found, set back, logged and
/// counted, and captures go on.
#[test]
// Full tier: root and tracefs.
fn an_instance_changed_behind_its_back_is_set_back_and_said() {
    let _turn = one_at_a_time();
    let test = "an_instance_changed_behind_its_back_is_set_back_and_said";
    if !real_kernel(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = forensics_daemon(
        dir.path(),
        // The VM's own 1 ms stalls get one capture a second per CPU and
        // cannot use up the minute's 600; a 30 ms culprit escalates. The
        // observer on every CPU sees the samplers as tasks: its view of
        // their wake-ups must not take the slot the sampler's own capture
        // (the one with pids) needs.
        "threshold = \"1ms\"\nper_cpu_interval = \"1s\"\nmax_per_minute = 600\n\
         [observe]\nenabled = true\ncpus = \"all\"",
    );
    let forensics = instance_of(&daemon);
    let observe = json_of(&daemon, "/api/v1/observe");
    let observe = Path::new(INSTANCES).join(observe["observer"]["instance"].as_str().unwrap());
    // What `trace-cmd reset -B NAME` or a careless script would do.
    std::fs::write(forensics.join("tracing_on"), "0").unwrap();
    std::fs::write(forensics.join("events/sched/sched_switch/enable"), "0").unwrap();
    std::fs::write(observe.join("tracing_on"), "0").unwrap();
    let repairs = |user: &str| {
        metric_value(
            &daemon.get("/metrics").1,
            &format!("latencyd_tracefs_instance_repairs_total{{user=\"{user}\"}}"),
        )
    };
    wait_until(
        "both instances to be set back",
        Duration::from_millis(50),
        Duration::from_secs(5),
        || repairs("forensics") == Some(1.0) && repairs("observe") == Some(1.0),
    );
    assert_eq!(
        std::fs::read_to_string(forensics.join("tracing_on"))
            .unwrap()
            .trim(),
        "1"
    );
    assert_eq!(
        std::fs::read_to_string(observe.join("tracing_on"))
            .unwrap()
            .trim(),
        "1"
    );
    // The collector says what the recorder found at its next tick.
    wait_until(
        "the repair to be logged",
        Duration::from_millis(50),
        Duration::from_secs(2),
        || {
            daemon
                .log_text()
                .contains("WARN forensics: forensics's tracefs instance")
        },
    );
    let log = daemon.log_text();
    assert!(log.contains("changed behind latencyd"), "{log}");
    assert!(log.contains("sched_switch/enable: 0 (wrote 1)"), "{log}");
    let status = json_of(&daemon, "/api/v1/status");
    assert_eq!(status["forensics"]["available"], true);
    assert_eq!(status["forensics"]["instance_repairs"], 1);
    // Captures go on: a culprit is named. With a 1 ms threshold this
    // VM's own late wake-ups are captured too, and a capture pauses its
    // CPU's buffer while it reads it, so one culprit may fall in such a
    // pause; a repair that stopped capturing fails all three.
    let cpu = spike_cpu();
    let named = (0..3).any(|_| {
        let tid = busy_named_thread(cpu, CULPRIT_PRIORITY, CULPRIT_SPIN, "lat-culprit");
        capture_naming(&daemon, cpu, tid).is_some()
    });
    assert!(
        named,
        "no capture named any of three culprits after the repair: {}\n{}",
        capture_report(&daemon),
        daemon.log_text()
    );
}

/// What an unavailable forensics looks like from outside: the daemon
/// serves, and every surface says why.
fn check_unavailable(daemon: &Daemon, why: &[&str]) {
    let spikes = json_of(daemon, "/api/v1/spikes");
    assert_eq!(spikes["available"], false, "{spikes}");
    let reason = spikes["reason"].as_str().unwrap_or("").to_string();
    assert!(
        why.iter().any(|w| reason.contains(w)),
        "{reason:?} should say one of {why:?}"
    );
    assert_eq!(spikes["spikes"], serde_json::json!([]));
    let status = json_of(daemon, "/api/v1/status");
    assert_eq!(status["forensics"]["enabled"], true);
    assert_eq!(status["forensics"]["available"], false);
    let (_, scrape) = daemon.get("/metrics");
    assert_eq!(
        metric_value(&scrape, "latencyd_forensics_available"),
        Some(0.0)
    );
    let (_, page) = daemon.get("/");
    assert!(page.contains("Recent spikes"), "{page}");
    assert!(
        daemon
            .log_text()
            .contains("forensics is enabled but unavailable")
    );
    let (code, _) = daemon.get("/healthz");
    assert_eq!(code, 200, "forensics does not make the daemon unhealthy");
}

#[test]
// Full tier: root and tracefs.
fn without_tracefs_the_daemon_runs_and_says_why() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let daemon = forensics_daemon(dir.path(), "tracefs = \"/nonexistent/tracing\"");
    check_unavailable(&daemon, &["tracefs is not mounted at /nonexistent/tracing"]);
}

#[test]
// Full tier: root and tracefs.
fn without_permission_the_daemon_runs_and_says_why() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let Some(mut cmd) = unprivileged_latencyd(dir.path(), false) else {
        return;
    };
    let spikes = dir.path().join("spikes");
    std::fs::create_dir(&spikes).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&spikes, std::fs::Permissions::from_mode(0o777)).unwrap();
    let config = dir.path().join("latencyd.toml");
    std::fs::write(
        &config,
        format!(
            "[measure]\nwarmup = \"0s\"\n[export]\nlisten = \"127.0.0.1:0\"\n[realtime]\nrequired = false\n\
             [forensics]\nenabled = true\ndir = \"{}\"\n",
            spikes.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let daemon = Daemon::start(cmd.args(["run", "--config"]).arg(&config));
    // Mounted, nobody may not use it; not mounted (or hidden from a
    // user who may not look), that is said.
    let why: &[&str] = if privileged() && Path::new("/sys/kernel/tracing/instances").is_dir() {
        &["forensics needs root"]
    } else {
        &["forensics needs root", "tracefs is not mounted"]
    };
    check_unavailable(&daemon, why);
    let made: Vec<String> = instance_names_if_visible()
        .into_iter()
        .filter(|n| n == &format!("latencyd-forensics-{}", daemon.pid()))
        .collect();
    assert!(made.is_empty(), "nobody could not have made it: {made:?}");
}

/// A burst of the observer's late wake-ups offered to the recorder: each
/// capture is made only once the rate limits admit it, and the refused
/// ones are counted, never built (a 3 s stall used to build every late
/// task's capture before the limits threw most away).
#[test]
// Full tier: root for tracefs.
fn offered_captures_are_made_only_when_the_limits_admit_them() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use latencyd::forensics::{Offer, Recorder, Settings};
    use latencyd::instruments::observe::TaskKey;
    use latencyd::instruments::observe::tally::{Comm, WorkloadSpike};

    let _turn = one_at_a_time();
    let test = "offered_captures_are_made_only_when_the_limits_admit_them";
    if !real_kernel(test) {
        return;
    }
    let settings = Settings {
        threshold_ns: 1_000_000,
        dir: None,
        max_captures: 100,
        max_bytes: 1 << 20,
        buffer_size_kb: 64,
        tracefs: Path::new("/sys/kernel/tracing").to_path_buf(),
        per_cpu_gap_ns: 1_000_000_000,
        max_per_minute: 3,
        capture_new_max: false,
    };
    let mut recorder = Recorder::start(settings, &[0]);
    let made = Arc::new(AtomicUsize::new(0));
    let now = latencyd::rt::sys::monotonic_now_ns();
    // 40 late tasks, 10 ms apart, alternating over two CPUs, equally late:
    // one a CPU a second, three a minute, no escalation.
    for i in 0..40u64 {
        let cpu = (i % 2) as usize;
        let spike = WorkloadSpike {
            pid: 1_000 + i as i32,
            comm: Comm::new(b"rtapp"),
            latency_ns: 2_000_000,
            since_ns: now + i * 10_000_000,
            woken_ns: now + i * 10_000_000,
            ran_ns: now + i * 10_000_000 + 2_000_000,
            from_timer: false,
            causes: vec![],
            events: vec![],
            events_omitted: 0,
        };
        let key = TaskKey {
            cpu,
            task: "rtapp".to_string(),
            container: String::new(),
        };
        let counter = Arc::clone(&made);
        recorder.offer(Offer {
            cpu,
            wakeup_mono_ns: spike.ran_ns,
            latency_ns: spike.latency_ns,
            build: Box::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                latencyd::instruments::observe::spike::capture(
                    &key,
                    &spike,
                    (now, 1_795_315_538_000_000_000),
                )
            }),
        });
    }
    recorder.flush();
    let journal = recorder.journal();
    let kept = journal.lock().recent.len();
    recorder.stop();
    assert_eq!(kept, 2, "one per CPU within the second");
    assert_eq!(made.load(Ordering::SeqCst), kept, "made only when admitted");
}
