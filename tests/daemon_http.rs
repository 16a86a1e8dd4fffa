//! The daemon's HTTP surface in-process (tower `oneshot`) against a
//! synthetic state: every route, status codes, JSON shapes, and the
//! Prometheus text checked against expected output in
//! `tests/data/expected/` (regenerate with `UPDATE_EXPECT=1`).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use latencyd::config::Config;
use latencyd::daemon::http::{AppState, router};
use latencyd::daemon::render::metrics::{Clocks, REVISION};
use latencyd::daemon::state::{
    CpuView, MonitorState, ReloadRecord, SamplerView, WindowHistogram, WindowMax,
};
use latencyd::forensics::events::Event;
use latencyd::forensics::{Capability, Capture, Cause, Journal, Summary};
use latencyd::instruments::forensics::{ForensicsConfig, ForensicsPart};
use latencyd::instruments::host_facts::HostFactsPart;
use latencyd::instruments::hwnoise::HwnoisePart;
use latencyd::instruments::load_windows::LoadConfig;
use latencyd::instruments::observe::ObservePart;
use latencyd::instruments::timerlat::TimerlatPart;
use latencyd::rt::sys::Policy;
use latencyd::stats::LatencyStats;
use serde_json::Value;
use tower::ServiceExt;

const S: u64 = 1_000_000_000;
/// The pinned `CLOCK_MONOTONIC` "now" of every request.
const NOW_NS: u64 = 1_000 * S;

fn fixed_now() -> u64 {
    NOW_NS
}

/// The pinned wall clock at `NOW_NS`: 2026-11-22 03:00:38 UTC.
const NOW_UNIX_NS: u64 = 1_795_316_438 * S;

fn fixed_unix() -> u64 {
    NOW_UNIX_NS
}

const FIXED: Clocks = Clocks {
    monotonic_ns: fixed_now,
    unix_ns: fixed_unix,
};

fn view(cpu: usize, samples: &[u64], config: &Config, last_sample_ns: u64) -> CpuView {
    let sampler = SamplerView {
        tid: 100 + cpu as i32,
        policy: Policy::Fifo,
        priority: 80,
        realtime: true,
        last_sample_ns,
        alive: true,
        online: true,
        sampling: true,
        unsampled_since_ns: None,
        running_since_ns: 0,
        stalls: 0,
        scheduling: Default::default(),
        scheduling_changes: 0,
    };
    let mut view = CpuView::new(cpu, config, sampler);
    // Half the samples long ago (out of the window), half just now.
    let (old, new) = samples.split_at(samples.len() / 2);
    for (part, at) in [(old, NOW_NS - 600 * S), (new, NOW_NS - 2 * S)] {
        let mut chunk = LatencyStats::new(config.measure.spike_threshold_ns, None);
        for &ns in part {
            chunk.record_at(ns, 0, at);
        }
        chunk.missed = cpu as u64 * u64::from(at == NOW_NS - 2 * S);
        view.absorb(&chunk).unwrap();
    }
    view
}

fn state(per_cpu_histograms: bool) -> MonitorState {
    let mut config = latencyd::instruments::registry::builtin_config();
    config.export.per_cpu_histograms = per_cpu_histograms;
    config.section_mut::<ForensicsConfig>().enabled = true;
    // CPU 0's spike is in the old half (out of the window), CPU 2's in the
    // recent half.
    let a: Vec<u64> = [250_000, 1_800]
        .into_iter()
        .chain((0..400).map(|i| 2_000 + (i * 7_919) % 30_000))
        .collect();
    let b: Vec<u64> = (0..300)
        .map(|i| 4_000 + (i * 104_729) % 90_000)
        .chain([3_000_000])
        .collect();
    let mut host = common::synthetic_host(&[0, 1, 2], &[0, 1, 2, 3]);
    host.cpuset_cpus = Some(vec![0, 1, 2]);
    MonitorState {
        unmeasured: latencyd::sampling::unmeasured_cpus(&host, &[0, 2]),
        host,
        started_ns: NOW_NS - 900 * S,
        cpus: vec![
            view(0, &a, &config, NOW_NS - 1_000_000),
            view(2, &b, &config, NOW_NS - 2_000_000),
        ],
        non_rt_reasons: vec![],
        reload: ReloadRecord {
            failures: 2,
            last_ok: false,
            last_success_ns: NOW_NS - 300 * S,
        },
        listen: vec!["127.0.0.1:9479".parse().unwrap()],
        record: Default::default(),
        pm_qos_held_us: Some(0),
        parts: {
            let mut parts = latencyd::daemon::state::Parts::new(&config);
            parts
                .of_mut::<HostFactsPart>()
                .expect("the host facts are registered")
                .track = common::synthetic_fingerprint(NOW_UNIX_NS - 900 * S);
            parts
                .of_mut::<ForensicsPart>()
                .expect("forensics is registered")
                .journal = journal();
            *parts
                .of_mut::<ObservePart>()
                .expect("the observer is registered") = observed(&config);
            *parts
                .of_mut::<TimerlatPart>()
                .expect("timerlat is registered") = timerlat_measured(&config);
            *parts
                .of_mut::<HwnoisePart>()
                .expect("hwnoise is registered") = hwnoise_windows();
            parts
        },
        gaps: Default::default(),
        config,
    }
}

/// `[hwnoise]` on CPUs 0-1: one window ran (CPU 1's largest gap 42 µs,
/// SMIs not readable), one was skipped as busy, and CPU 1's sampler had
/// 400 wake-ups kept apart.
fn hwnoise_windows() -> HwnoisePart {
    use latencyd::instruments::hwlat::StartErrorKind;
    use latencyd::instruments::hwnoise::{CpuNoise, CpuTotals, Outcome, Status, WindowReport};
    let noise = CpuNoise {
        samples: 3,
        gaps: 5,
        max_us: 42,
        nmis: 1,
    };
    let ran = WindowReport {
        start_unix_ns: NOW_UNIX_NS - 700 * S,
        end_unix_ns: NOW_UNIX_NS - 100 * S,
        cpus: vec![0, 1],
        outcome: Outcome::Ran,
        noise: [(1, noise)].into(),
        smis: None,
        notes: vec![],
    };
    let skipped = WindowReport {
        outcome: Outcome::Skipped(
            StartErrorKind::Busy,
            "hwlat is in use by instance hwlat (hwlat)".to_string(),
        ),
        noise: Default::default(),
        ..ran.clone()
    };
    let totals = CpuTotals {
        samples: 3,
        gaps: 5,
        nmis: 1,
        window_max_us: 42,
        max_us: 42,
    };
    let status = Status {
        enabled: true,
        cpus: vec![0, 1],
        threshold_us: 10,
        width_us: 500_000,
        window_us: 1_000_000,
        next_start_unix_ns: Some(NOW_UNIX_NS + 3_600 * S),
        windows_total: 1,
        skipped: [("busy", 1)].into(),
        last_skip: None,
        per_cpu: [(1, totals)].into(),
        smis_unread: Some("the CPU reports no model-specific registers".to_string()),
        last_window: Some(ran),
        finished: vec![skipped],
        ..Status::default()
    };
    let mut state = HwnoisePart::new(std::sync::Arc::new(std::sync::Mutex::new(status)));
    state.kept_apart.insert(
        1,
        latencyd::instruments::hwnoise::KeptApart {
            wakeups: 400,
            max_ns: 499_000_000,
            timerlat_periods: 0,
        },
    );
    state
}

/// `[hwnoise]` enabled but its thread could not start.
fn hwnoise_stopped() -> MonitorState {
    let mut s = state(true);
    let windows = latencyd::instruments::hwnoise::Windows::not_running(
        "its thread cannot start (Resource temporarily unavailable)".to_string(),
    );
    *s.parts.of_mut::<HwnoisePart>().unwrap() = HwnoisePart::new(windows.status());
    s
}

#[tokio::test]
async fn hwnoise_windows_that_cannot_run_say_why() {
    let app = app_with(hwnoise_stopped());
    let (_, _, body) = get(&app, "/api/v1/status").await;
    let hwnoise = &serde_json::from_str::<Value>(&body).unwrap()["hwnoise"];
    assert_eq!(hwnoise["enabled"], true);
    assert_eq!(
        hwnoise["stopped"],
        "its thread cannot start (Resource temporarily unavailable)"
    );
    assert!(hwnoise["next_start"].is_null(), "no window is coming");
    let (_, _, page) = get(&app, "/").await;
    assert!(
        page.contains("Hardware noise windows are enabled but none runs: its thread cannot start"),
        "{page}"
    );
    // Running windows say nothing of it.
    let (_, _, body) = get(&self::app(state(true)), "/api/v1/status").await;
    assert!(serde_json::from_str::<Value>(&body).unwrap()["hwnoise"]["stopped"].is_null());
}

/// The kernel's timerlat on CPUs 0 and 2, with latencyd's threads, and
/// rtla's timerlat beside it: CPU 0's thread context 30 µs once.
fn timerlat_measured(config: &Config) -> TimerlatPart {
    use latencyd::instruments::event::{Context, TimerlatSample};
    use latencyd::instruments::timerlat::source::Status;
    use latencyd::instruments::timerlat::tally::Tally;
    let status = Status {
        enabled: true,
        available: true,
        cpus: vec![0, 2],
        period_us: 1000,
        user_threads: true,
        instance: Some("latencyd-timerlat-42".to_string()),
        neighbours: vec![("timerlat_hist".to_string(), "timerlat".to_string())],
        disturbances: 1,
        changed: vec!["osnoise/cpus: 0-3 -> 0,2".to_string()],
        ..Status::default()
    };
    let mut state = TimerlatPart::new(std::sync::Arc::new(std::sync::Mutex::new(status)), config);
    let mut tally = Tally::new(&[0, 2], 0, config.measure.spike_threshold_ns);
    for seqnum in 1..=20u32 {
        let at = NOW_NS - 1_000_000 + u64::from(seqnum) * 1000;
        for (cpu, context, ns) in [
            (0, Context::Irq, 1_500),
            (0, Context::Thread, if seqnum == 7 { 30_000 } else { 4_000 }),
            (0, Context::User, 5_000),
            (2, Context::Irq, 900),
            (2, Context::Thread, 3_000),
        ] {
            tally.record(
                cpu,
                TimerlatSample {
                    seqnum,
                    context,
                    latency_ns: ns,
                },
                at,
            );
        }
    }
    state.absorb(&tally, &Default::default());
    state
}

/// The observer on CPU 3 (outside the cpuset): an IRQ, a kworker and a
/// spinning thread took time; one real-time task woke 20 times, once
/// 2 ms late inside the window.
fn observed(config: &Config) -> ObservePart {
    use latencyd::instruments::observe::{CpuTally, Interval, Source, Status, TaskKey};
    let status = Status {
        enabled: true,
        available: true,
        cpus: vec![3],
        capabilities: vec![Capability::new(
            "sleep_timers",
            true,
            "a sleep that a timer ends is measured from the time the task asked for",
        )],
        pages: 12,
        events: 3_400,
        thread_cpu_ns: 1_500_000,
        // Reads fail now: counted and named, the observer still available.
        read_errors: 2,
        last_read_error: Some("CPU 3: reading trace_pipe_raw: Input/output error".to_string()),
        failing_after: Some(0),
        ..Status::default()
    };
    let mut state = ObservePart::new(Arc::new(std::sync::Mutex::new(status)), config);
    let mut tally = CpuTally::default();
    tally.add(Source::Irq, "24:virtio0-input.0", 4_000, NOW_NS - 100 * S);
    tally.add(Source::Irq, "local_timer", 2_500, NOW_NS - 3 * S);
    tally.add(Source::Thread, "kworker", 30_000, NOW_NS - 200 * S);
    tally.add(Source::Thread, "spinner", 1_990_000, NOW_NS - 2 * S);
    tally.unseen_wakeups = 1;
    let mut stats = LatencyStats::new(config.measure.spike_threshold_ns, None);
    for i in 0..19 {
        stats.record_at(8_000 + i * 100, i, NOW_NS - 300 * S);
    }
    stats.record_at(2_000_000, 19, NOW_NS - 2 * S);
    let mut interval = Interval::default();
    interval.cpus.insert(3, tally);
    interval.tasks.insert(
        TaskKey {
            cpu: 3,
            task: "rtapp".to_string(),
            container: "rtapp.service".to_string(),
        },
        stats,
    );
    interval.lost_events.insert(3, 7);
    state.absorb(interval);
    state
}

/// The id of the one capture in the synthetic journal.
const SPIKE_ID: &str = "1795315538123-cpu2";

/// Forensics with one capture of CPU 2, kept in memory.
/// The journal of the state's forensics part.
fn forensics_journal(s: &MonitorState) -> Arc<Journal> {
    let part = s.parts.of::<ForensicsPart>();
    Arc::clone(&part.expect("forensics is registered").journal)
}

fn journal() -> Arc<Journal> {
    let summary = Summary {
        id: SPIKE_ID.to_string(),
        cpu: 2,
        at: "2026-11-22T02:45:38.123Z".to_string(),
        latency_ns: 3_000_000,
        deadline_mono_ns: NOW_NS - 5 * S,
        wakeup_mono_ns: NOW_NS - 5 * S + 3_000_000,
        sampler_tid: 4243,
        task: None,
        trigger: "threshold".to_string(),
        verdict: "CPU 2 woke 3.00ms late: task culprit (pid 77, SCHED_FIFO 95) ran 2.99ms (100%) \
                  while the sampler waited"
            .to_string(),
        causes: vec![
            Cause {
                kind: "task".to_string(),
                name: "culprit <b>".to_string(),
                pid: Some(77),
                policy: Some("SCHED_FIFO".to_string()),
                priority: Some(95),
                duration_ns: 2_990_000,
            },
            Cause {
                kind: "sampler".to_string(),
                name: "the sampler's return to user space".to_string(),
                pid: None,
                policy: None,
                priority: None,
                duration_ns: 10_000,
            },
        ],
        timer_late_ns: Some(2_000),
        complete: true,
        gaps: vec![],
        steal_ns: Some(0),
        smi_count: None,
        events_omitted: 0,
        timerlat: Some(latencyd::forensics::TimerlatSplit {
            irq_ns: Some(12_000),
            thread_ns: 2_995_000,
            user_ns: Some(2_998_000),
            thread_mono_ns: NOW_NS - 5 * S + 2_995_000,
        }),
        no_sampler_capture: None,
    };
    let capture = Capture {
        summary: summary.clone(),
        events: vec![Event {
            ts_ns: NOW_NS - 5 * S + 2_000,
            task: "culprit".to_string(),
            pid: 77,
            cpu: 2,
            event: "sched_wakeup".to_string(),
            fields: "comm=sampler-cpu2 pid=4243 prio=19 target_cpu=002".to_string(),
        }],
    };
    let journal = Journal::default();
    {
        let mut data = journal.lock();
        data.enabled = true;
        data.available = true;
        data.threshold_ns = 500_000;
        data.capabilities = vec![Capability::new(
            "paused_read",
            true,
            "a capture pauses recording while it reads a CPU's buffer",
        )];
        data.recent.push_front(summary);
        data.in_memory.push_front(capture);
        data.captured.insert((2, "task".to_string()), 1);
        data.uncaptured.insert((2, "rate_limited"), 3);
    }
    Arc::new(journal)
}

/// A state whose on-disk record holds two 60 s intervals of CPUs 0 and 2
/// ending 10 minutes before `NOW_UNIX_NS`, written by the real writer.
fn state_with_record(dir: &std::path::Path) -> MonitorState {
    use latencyd::record::{Batch, LogWriter, Settings, Target};
    let mut writer = LogWriter::new(Target::Dir(Settings {
        dir: dir.to_path_buf(),
        interval_ns: 60 * S,
        retention_ns: 1 << 62,
        max_bytes: 1 << 30,
    }));
    for k in 0..2u64 {
        let start = NOW_UNIX_NS - (12 - k) * 60 * S;
        let entries = [0usize, 2]
            .iter()
            .map(|&cpu| {
                let mut stats = LatencyStats::new(100_000, None);
                for i in 0..100 {
                    stats.record(5_000 + i * 100 + cpu as u64 * 1_000 + k, i);
                }
                common::record_entry(cpu, start, 60 * S, stats, None)
            })
            .collect::<Vec<_>>();
        // And timerlat's IRQ and thread on CPU 0: 2 µs and 9 µs.
        let timerlat = [("irq", 2_000), ("thread", 9_000)].map(|(context, ns)| {
            let mut stats = LatencyStats::new(100_000, None);
            stats.record(ns + k, 0);
            common::record_entry(0, start, 60 * S, stats, Some(context))
        });
        let entries = entries.into_iter().chain(timerlat).collect();
        let batch = Batch {
            gaps: Vec::new(),
            hwnoise: Vec::new(),
            entries,
            fingerprint: None,
        };
        writer.write(&batch, start + 60 * S).unwrap();
    }
    let mut s = state(true);
    s.config.record.dir = dir.to_path_buf();
    s.record = Arc::new(Mutex::new(latencyd::record::Status {
        enabled: true,
        ..Default::default()
    }));
    // And the observer off.
    *s.parts
        .of_mut::<ObservePart>()
        .expect("the observer is registered") = ObservePart::off(&s.config);
    s
}

fn app(state: MonitorState) -> axum::Router {
    app_with(state)
}

fn app_with(state: MonitorState) -> axum::Router {
    router(AppState::new(Arc::new(Mutex::new(state)), false, FIXED))
}

async fn get(app: &axum::Router, path: &str) -> (StatusCode, String, String) {
    request(app, "GET", path).await
}

async fn request(app: &axum::Router, method: &str, path: &str) -> (StatusCode, String, String) {
    let response = app
        .clone()
        .oneshot(
            Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

/// A wall clock the test steps, as NTP or an RTC-less board would.
static STEPPED_UNIX_NS: AtomicU64 = AtomicU64::new(NOW_UNIX_NS);

fn stepped_unix() -> u64 {
    STEPPED_UNIX_NS.load(Ordering::Relaxed)
}

#[tokio::test]
async fn timestamps_follow_a_step_of_the_wall_clock() {
    let clocks = Clocks {
        monotonic_ns: fixed_now,
        unix_ns: stepped_unix,
    };
    let app = router(AppState::new(
        Arc::new(Mutex::new(state(true))),
        false,
        clocks,
    ));
    let heartbeat = |body: &str| {
        common::metric_value(
            body,
            "latencyd_sampler_last_sample_timestamp_seconds{cpu=\"0\"}",
        )
        .unwrap()
    };
    let reloaded = |body: &str| {
        common::metric_value(
            body,
            "latencyd_config_last_reload_success_timestamp_seconds",
        )
        .unwrap()
    };
    let (_, _, before) = get(&app, "/metrics").await;
    // CPU 0 woke 1 ms before "now"; the last good load was 300 s before.
    let now_s = NOW_UNIX_NS as f64 / S as f64;
    assert!(
        (heartbeat(&before) - (now_s - 0.001)).abs() < 1e-6,
        "{before}"
    );
    assert!((reloaded(&before) - (now_s - 300.0)).abs() < 1e-6);
    // The wall clock jumps an hour ahead (the monotonic one does not): the
    // heartbeat is still 1 ms old, not an hour.
    STEPPED_UNIX_NS.store(NOW_UNIX_NS + 3_600 * S, Ordering::Relaxed);
    let (_, _, after) = get(&app, "/metrics").await;
    assert!((heartbeat(&after) - (now_s + 3_600.0 - 0.001)).abs() < 1e-6);
    assert!((reloaded(&after) - (now_s + 3_600.0 - 300.0)).abs() < 1e-6);
    STEPPED_UNIX_NS.store(NOW_UNIX_NS, Ordering::Relaxed);
}

#[tokio::test]
async fn metrics_match_the_expected_exposition() {
    // The revision changes with every commit; the expected output names
    // it by a placeholder.
    let revision = format!("revision=\"{REVISION}\"");
    assert!(!REVISION.is_empty());
    let (status, content_type, body) = get(&app(state(true)), "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert!(body.contains(&revision), "{body}");
    let body = body.replace(&revision, "revision=\"<git revision>\"");
    common::check_expected("metrics-per-cpu.txt", &body);

    let (_, _, body) = get(&app(state(false)), "/metrics").await;
    let body = body.replace(&revision, "revision=\"<git revision>\"");
    common::check_expected("metrics-summed.txt", &body);
    assert!(
        body.contains("latencyd_wakeup_latency_seconds_count 703\n"),
        "{body}"
    );
    assert!(
        !body.contains("latencyd_wakeup_latency_seconds_count{"),
        "one summed histogram"
    );
}

#[tokio::test]
async fn observe_api_lists_interference_by_source_and_each_tasks_latency() {
    let (status, _, body) = get(&app(state(true)), "/api/v1/observe").await;
    assert_eq!(status, StatusCode::OK);
    let json: Value = serde_json::from_str(&body).unwrap();
    common::check_expected(
        "observe.json",
        &(serde_json::to_string_pretty(&json).unwrap() + "\n"),
    );
    let cpu = &json["cpus"][0];
    assert_eq!(cpu["cpu"], 3);
    // Longest total first; the spinner's 1.99 ms is in the window, the
    // kworker's 30 us ended 200 s ago (outside it).
    assert_eq!(cpu["interference"][0]["name"], "spinner");
    assert_eq!(cpu["window_max_ns"]["thread"], 1_990_000);
    assert_eq!(cpu["tasks"][0]["max_ns"], 2_000_000);
    assert_eq!(cpu["tasks"][0]["window_max_ns"], 2_000_000);
    assert_eq!(cpu["tasks"][0]["container"], "rtapp.service");
    assert_eq!(cpu["lost_events"], 7);
    // Failed reads are counted and named, never taken for unavailability.
    assert_eq!(json["available"], true);
    assert_eq!(json["reason"], Value::Null);
    assert_eq!(json["observer"]["read_errors"], 2);
    assert_eq!(
        json["observer"]["last_read_error"],
        "CPU 3: reading trace_pipe_raw: Input/output error"
    );
    // Off: said so, nothing else.
    let record_dir = tempfile::tempdir().unwrap();
    let (_, _, body) = get(
        &app(state_with_record(record_dir.path())),
        "/api/v1/observe",
    )
    .await;
    let off: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(off["enabled"], false);
    assert!(
        off["reason"]
            .as_str()
            .unwrap()
            .contains("observe.enabled = false")
    );
    assert_eq!(off["cpus"], Value::Array(vec![]));
}

#[tokio::test]
async fn host_api_lists_every_fact_the_topology_and_the_changes() {
    let app = app(state(true));
    let (status, _, body) = get(&app, "/api/v1/host").await;
    assert_eq!(status, StatusCode::OK);
    let json: Value = serde_json::from_str(&body).unwrap();
    common::check_expected(
        "host.json",
        &(serde_json::to_string_pretty(&json).unwrap() + "\n"),
    );
    let change = &json["changes"][0];
    assert_eq!(change["seen"], "running");
    assert_eq!(
        change["facts"]["cpuidle.states[cpu2]"]["from"],
        "POLL 0us, C1 2us, C6 133us"
    );
    assert_eq!(change["facts"]["irq[24]"]["to"], "eth0 on 2");
    assert_eq!(change["to"], json["fingerprint"]);
    assert_eq!(
        json["facts"]["dmi.bios_version"]["absent"],
        "/sys/class/dmi/id/bios_version: not present"
    );
    assert_eq!(json["cpus"][3]["smt_sibling"], "2,3");

    // The same identifier and topology in the status, the info metric and
    // the topology metric; the change counted and dated.
    let (_, _, status) = get(&app, "/api/v1/status").await;
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["fingerprint"], json["fingerprint"]);
    assert_eq!(status["topology"], json["cpus"]);
    let (_, _, metrics) = get(&app, "/metrics").await;
    let id = json["fingerprint"].as_str().unwrap();
    assert!(
        metrics.contains(&format!("fingerprint=\"{id}\"")),
        "{metrics}"
    );
    assert!(metrics.contains("latencyd_host_fingerprint_changes_total 1\n"));
    assert!(metrics.contains(
        "latencyd_cpu_info{core=\"0\",cpu=\"3\",node=\"1\",package=\"1\",smt_sibling=\"2,3\"} 1\n"
    ));
    assert!(
        metrics.contains("latencyd_host_fact_changed_timestamp_seconds{fact=\"cpuidle.states\"}")
    );
    assert!(metrics.contains("latencyd_host_fact_changed_timestamp_seconds{fact=\"irq\"}"));
}

#[tokio::test]
async fn latency_api_matches_the_expected_json_and_agrees_with_metrics() {
    let app = app(state(true));
    let (status, content_type, body) = get(&app, "/api/v1/latency").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    let json: Value = serde_json::from_str(&body).unwrap();
    common::check_expected(
        "latency.json",
        &(serde_json::to_string_pretty(&json).unwrap() + "\n"),
    );

    let (_, _, metrics) = get(&app, "/metrics").await;
    for cpu in json["cpus"].as_array().unwrap() {
        let id = cpu["cpu"].as_u64().unwrap();
        let count_line = format!(
            "latencyd_wakeup_latency_seconds_count{{cpu=\"{id}\"}} {}\n",
            cpu["count"]
        );
        assert!(metrics.contains(&count_line), "{count_line}");
        let max = cpu["max_ns"].as_u64().unwrap() as f64 / 1e9;
        let max_line = format!("latencyd_wakeup_latency_max_seconds{{cpu=\"{id}\"}} {max}\n");
        assert!(metrics.contains(&max_line), "{max_line}");
        let missed = format!(
            "latencyd_missed_periods_total{{cpu=\"{id}\"}} {}\n",
            cpu["missed"]
        );
        assert!(metrics.contains(&missed), "{missed}");
    }
    // The window forgets CPU 0's old spike but keeps CPU 2's recent one.
    assert_eq!(json["cpus"][0]["max_ns"], 250_000);
    assert!(json["cpus"][0]["window_max_ns"].as_u64().unwrap() < 250_000);
    assert_eq!(json["cpus"][1]["max_ns"], 3_000_000);
    assert_eq!(json["cpus"][1]["window_max_ns"], 3_000_000);
}

#[tokio::test]
async fn one_cpu_has_buckets_and_a_decodable_hdr_histogram() {
    let app = app(state(true));
    let (status, _, body) = get(&app, "/api/v1/latency/2").await;
    assert_eq!(status, StatusCode::OK);
    let json: Value = serde_json::from_str(&body).unwrap();
    let count = json["count"].as_u64().unwrap();
    let buckets = json["buckets"].as_array().unwrap();
    assert_eq!(
        buckets
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum::<u64>(),
        count
    );
    for b in buckets {
        assert!(b["lowest_ns"].as_u64() <= b["highest_ns"].as_u64());
        assert!(b["count"].as_u64().unwrap() > 0, "only non-empty buckets");
    }
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(json["hdr_histogram"].as_str().unwrap())
        .unwrap();
    let decoded: hdrhistogram::Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .unwrap();
    assert_eq!(decoded.len(), count);
    assert_eq!(decoded.max(), decoded.highest_equivalent(3_000_000));
}

#[tokio::test]
async fn bad_paths_and_parameters_get_json_errors() {
    let app = app(state(true));
    let cases = [
        (
            "GET",
            "/api/v1/latency/1",
            StatusCode::NOT_FOUND,
            "sampled CPUs are 0,2",
        ),
        (
            "GET",
            "/api/v1/latency/abc",
            StatusCode::BAD_REQUEST,
            "not a CPU number",
        ),
        (
            "GET",
            "/api/v1/latency/-1",
            StatusCode::BAD_REQUEST,
            "not a CPU number",
        ),
        (
            "GET",
            "/api/v1/latency/99999999999999999999999",
            StatusCode::BAD_REQUEST,
            "not a CPU",
        ),
        (
            "GET",
            "/api/v2/latency",
            StatusCode::NOT_FOUND,
            "no such path",
        ),
        ("GET", "/index.html", StatusCode::NOT_FOUND, "no such path"),
        (
            "GET",
            "/plot.svg?window=2h",
            StatusCode::BAD_REQUEST,
            "longer than the 1m kept (export.max_window)",
        ),
        (
            "GET",
            "/plot.svg?window=30",
            StatusCode::BAD_REQUEST,
            "query parameter window",
        ),
        (
            "GET",
            "/plot.svg?window=%FF%FE",
            StatusCode::BAD_REQUEST,
            "query",
        ),
        (
            "GET",
            "/?cpu=1",
            StatusCode::BAD_REQUEST,
            "unknown query parameter 'cpu'",
        ),
        (
            "GET",
            "/?window=10s&window=20s",
            StatusCode::BAD_REQUEST,
            "more than once",
        ),
    ];
    for (method, path, expected_status, message) in cases {
        let (status, content_type, body) = request(&app, method, path).await;
        assert_eq!(status, expected_status, "{path}: {body}");
        assert_eq!(content_type, "application/json", "{path}");
        let json: Value = serde_json::from_str(&body).unwrap();
        assert!(
            json["error"].as_str().unwrap().contains(message),
            "{path}: {body}"
        );
    }
    let (status, _, _) = request(&app, "POST", "/metrics").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _, body) = request(&app, "HEAD", "/metrics").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, ""));
}

#[tokio::test]
async fn healthz_reports_stale_and_dead_samplers() {
    let (status, _, body) = get(&app(state(true)), "/healthz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["status"],
        "ok"
    );

    let mut stuck = state(true);
    stuck.cpus[1].sampler.last_sample_ns = NOW_NS - 10 * S;
    let (status, _, body) = get(&app(stuck), "/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let json: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["stale"][0]["cpu"], 2);
    assert_eq!(json["stale"][0]["last_sample_age_ns"], 10 * S);

    let mut dead = state(true);
    dead.cpus[0].sampler.alive = false;
    let (status, _, _) = get(&app(dead), "/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

/// The JSON examples of docs/api.md's rows for `route`, in order.
fn api_md_examples(route: &str) -> Vec<Value> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md")).unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with(&format!("| `{route}` | ")) && l.contains("`{"))
        .unwrap_or_else(|| panic!("docs/api.md has no row for {route} with an example"));
    row.split('`')
        .filter(|part| part.starts_with('{'))
        .map(|part| serde_json::from_str(part).unwrap_or_else(|e| panic!("{route}: {part}: {e}")))
        .collect()
}

#[tokio::test]
async fn api_md_examples_are_what_the_daemon_answers() {
    let (_, _, healthy) = get(&app(state(true)), "/healthz").await;
    let mut stuck = state(true);
    stuck.cpus[1].sampler.last_sample_ns = NOW_NS - 10 * S;
    let (_, _, unhealthy) = get(&app(stuck), "/healthz").await;
    let (_, _, alive) = get(&app(state(true)), "/livez").await;
    let answers = |bodies: &[&str]| -> Vec<Value> {
        bodies
            .iter()
            .map(|b| serde_json::from_str(b).unwrap())
            .collect()
    };
    assert_eq!(
        api_md_examples("/healthz"),
        answers(&[&healthy, &unhealthy])
    );
    assert_eq!(api_md_examples("/livez"), answers(&[&alive]));
    // The curl example of /api/v1/latency has the answer's fields.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md")).unwrap();
    let example = doc
        .lines()
        .skip_while(|l| !l.starts_with("$ curl -s localhost:9479/api/v1/latency"))
        .nth(1)
        .unwrap()
        .replace(", ...]", "]");
    let example: Value = serde_json::from_str(&example).unwrap();
    let (_, _, body) = get(&app(state(true)), "/api/v1/latency").await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&example), keys(&answer));
    assert_eq!(keys(&example["cpus"][0]), keys(&answer["cpus"][0]));
}

#[tokio::test]
async fn status_describes_host_config_and_samplers() {
    let (status, _, body) = get(&app(state(true)), "/api/v1/status").await;
    assert_eq!(status, StatusCode::OK);
    let json: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["host"]["kernel"], "6.12.0-rt5");
    assert_eq!(json["host"]["preempt_rt"], true);
    assert_eq!(json["config"]["interval_ns"], 1_000_000);
    assert_eq!(json["config"]["cpus"], serde_json::json!([0, 2]));
    assert_eq!(
        json["config"]["sources"]["measure.interval"],
        "built-in default"
    );
    assert_eq!(json["samplers"][1]["last_sample_age_ns"], 2_000_000);
    assert_eq!(json["uptime_ns"], 900 * S);
    assert_eq!(json["reload_failures"], 2);
    assert_eq!(json["realtime"], true);
    assert_eq!(json["healthy"], true);
    // CPU 1 is left out by the configuration, CPU 3 by the cgroup's
    // cpuset: both online, both named with why.
    let unmeasured = json["unmeasured_cpus"].as_array().unwrap();
    assert_eq!(unmeasured.len(), 2, "{unmeasured:?}");
    assert_eq!(unmeasured[0]["cpu"], 1);
    assert_eq!(unmeasured[0]["reason"], "config");
    assert_eq!(unmeasured[1]["cpu"], 3);
    assert_eq!(unmeasured[1]["reason"], "cpuset");
    assert!(
        unmeasured[1]["explanation"]
            .as_str()
            .unwrap()
            .contains("install latencyd on the host")
    );
}

#[tokio::test]
async fn plot_svg_draws_the_lifetime_or_the_recent_window() {
    if !common::font_or_skip("plot_svg_draws_the_lifetime_or_the_recent_window") {
        return;
    }
    let app = app(state(true));
    let (status, content_type, lifetime) = get(&app, "/plot.svg").await;
    assert_eq!(status, StatusCode::OK, "{lifetime}");
    assert_eq!(content_type, "image/svg+xml");
    common::check_plot_svg(&lifetime, &["CPU 0", "CPU 2"]);
    assert!(
        lifetime.contains("since start"),
        "the title says what it covers"
    );
    assert!(lifetime.contains("CPU 0 (max 250 µs)"), "CPU 0's old spike");
    assert!(lifetime.contains("CPU 2 (max 3 ms)"));
    assert!(
        lifetime.contains("6.12.0-rt5 PREEMPT_RT"),
        "kernel subtitle"
    );

    // The last 60 s hold only the recent half: CPU 0's spike is gone,
    // CPU 2's is there.
    let (status, _, window) = get(&app, "/plot.svg?window=60s").await;
    assert_eq!(status, StatusCode::OK, "{window}");
    common::check_plot_svg(&window, &["CPU 0", "CPU 2"]);
    assert!(window.contains("last 1m"), "the title names the window");
    assert!(!window.contains("CPU 0 (max 250 µs)"));
    assert!(window.contains("CPU 2 (max 3 ms)"));
    // A 1 s window is rounded up to whole 5 s slots (a twelfth of the
    // 60 s `export.max_window`), and the title says so: CPU 2's samples of
    // 2 s ago are in it.
    let (status, _, short) = get(&app, "/plot.svg?window=1s").await;
    assert_eq!(status, StatusCode::OK, "{short}");
    assert!(short.contains("last 5s"), "{short}");
    assert!(short.contains("CPU 2 (max 3 ms)"));
    // A window holding nothing still draws, with every maximum at 0.
    let mut quiet = state(true);
    for view in &mut quiet.cpus {
        view.recent = WindowHistogram::new(quiet.config.export.max_window_ns);
        view.window = WindowMax::new(quiet.config.export.max_window_ns);
    }
    let (status, _, empty) = get(&app_with(quiet), "/plot.svg?window=1s").await;
    assert_eq!(status, StatusCode::OK, "{empty}");
    assert!(empty.contains("CPU 0 (max 0 µs)") && empty.contains("CPU 2 (max 0 µs)"));
}

/// The series `timerlat_measured` gives, in the order they are drawn.
const TIMERLAT_SERIES: [&str; 5] = [
    "CPU 0 irq",
    "CPU 0 thread",
    "CPU 0 user",
    "CPU 2 irq",
    "CPU 2 thread",
];

#[tokio::test]
async fn plot_svg_draws_timerlat_by_cpu_and_context() {
    if !common::font_or_skip("plot_svg_draws_timerlat_by_cpu_and_context") {
        return;
    }
    let app = app(state(true));
    let (status, _, all) = get(&app, "/plot.svg?source=timerlat").await;
    assert_eq!(status, StatusCode::OK, "{all}");
    common::check_plot_svg(&all, &TIMERLAT_SERIES);
    assert!(all.contains("timerlat latency (irq, thread, user) since start"));
    assert!(
        all.contains("CPU 0 thread (max 30 µs)"),
        "the spinner's period"
    );
    assert!(all.contains("CPU 2 irq (max 0.9 µs)"));
    let (status, _, some) = get(&app, "/plot.svg?source=timerlat&context=thread,irq").await;
    assert_eq!(status, StatusCode::OK, "{some}");
    common::check_plot_svg(
        &some,
        &["CPU 0 irq", "CPU 0 thread", "CPU 2 irq", "CPU 2 thread"],
    );
    // The window holds the periods of a millisecond ago.
    let (status, _, window) = get(&app, "/plot.svg?window=60s&source=timerlat&context=user").await;
    assert_eq!(status, StatusCode::OK, "{window}");
    common::check_plot_svg(&window, &["CPU 0 user"]);
    assert!(
        window.contains("timerlat latency (user), last 1m"),
        "{window}"
    );
    assert!(window.contains("CPU 0 user (max 5 µs)"));
    // The samplers' plot is the same as without source.
    let (_, _, samplers) = get(&app, "/plot.svg?source=samplers").await;
    common::check_plot_svg(&samplers, &["CPU 0", "CPU 2"]);

    for (query, said) in [
        ("source=rtla", "'rtla' is not a source: samplers"),
        ("context=irq", "ask for the timerlat source"),
        (
            "source=timerlat&context=softirq",
            "'softirq' is not one of timerlat's contexts",
        ),
        (
            "source=timerlat&source=timerlat",
            "source is given more than once",
        ),
        ("source=timerlat&span=1", "unknown query parameter 'span'"),
    ] {
        let (status, _, body) = get(&app, &format!("/plot.svg?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(body.contains(said), "{query}: {body}");
    }
    // Off, or unavailable: a 404 that says why.
    let mut off = state(true);
    *off.parts.of_mut::<TimerlatPart>().unwrap() = TimerlatPart::off(&off.config);
    let (status, _, body) = get(&app_with(off), "/plot.svg?source=timerlat").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body.contains("set [timerlat] enabled = true"), "{body}");
    let unavailable = state(true);
    {
        let timerlat = unavailable.parts.of::<TimerlatPart>().unwrap();
        let mut status = timerlat.status.lock().unwrap();
        status.available = false;
        status.reason = Some("the kernel has no timerlat tracer".to_string());
    }
    let (status, _, body) = get(&app_with(unavailable), "/plot.svg?source=timerlat").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body.contains("the kernel has no timerlat tracer"), "{body}");
}

#[tokio::test]
async fn status_page_shows_host_samplers_table_and_plot() {
    let mut s = state(true);
    s.host.uname.nodename = "rig<7>&\"co\"".to_string();
    s.cpus[1].sampler.alive = false;
    s.non_rt_reasons = vec!["memory is not locked <mlockall refused>".to_string()];
    // Before the record is set up the page says it is off.
    let (_, _, off) = get(&app(state(true)), "/").await;
    // The host's fingerprint, its change and what changed.
    let id = common::synthetic_fingerprint(0).id;
    assert!(
        off.contains(&format!(
            "<p id=\"fingerprint\" class=\"sub\">Fingerprint <code>{id}</code> since \
             2026-11-22T02:46:38.000Z; 1 change(s) seen since start, the last at \
             2026-11-22T02:46:38.000Z: cpuidle.states[cpu2], irq[24]."
        )),
        "{off}"
    );
    assert!(
        off.contains("<p id=\"record\" class=\"sub\">The record is off"),
        "{off}"
    );
    *s.record.lock().unwrap() = latencyd::record::Status {
        enabled: true,
        dir: "/var/lib/latencyd/<record>".to_string(),
        interval_ns: 60 * 1_000_000_000,
        error: Some("no space left <ENOSPC>".to_string()),
        intervals_written: 42,
        write_errors: 3,
        intervals_dropped: 1,
        backlog: 2,
        files: 5,
        bytes: 10_000,
        oldest_ns: None,
        last_written_ns: Some(1_764_000_000_000_000_000),
    };
    let app = app(s);
    let (status, content_type, page) = get(&app, "/").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(content_type, "text/html; charset=utf-8");
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(
        page.contains("<meta http-equiv=\"refresh\""),
        "refreshes itself"
    );
    // Self-contained: no script, no stylesheet or image fetched.
    for outside in ["<script", "<link", "src=", "http://", "https://"] {
        assert!(
            !page.replace("http://www.w3.org", "").contains(outside),
            "{outside} in the page"
        );
    }
    // Host names and reasons are text, never markup.
    assert!(page.contains("rig&lt;7&gt;&amp;&quot;co&quot;"));
    assert!(!page.contains("rig<7>"));
    assert!(page.contains("&lt;mlockall refused&gt;"));
    assert!(page.contains("6.12.0-rt5") && page.contains("PREEMPT_RT"));
    // CPUs left out are listed, so a missing row is never read as a quiet CPU.
    assert!(page.contains("<ul id=\"unmeasured\""), "{page}");
    // The observed CPU: its worst task in the window and what took most.
    assert!(
        page.contains(
            "Observed, without a sampler: CPU 3 — task rtapp at worst 2.00ms in the window; \
             most time taken by thread spinner (1.99ms since start)"
        ),
        "{page}"
    );
    assert!(
        page.contains(
            "Observing: reads of the ring buffers are failing (2 failed reads since start), \
             the latest: CPU 3: reading trace_pipe_raw: Input/output error"
        ),
        "{page}"
    );
    assert!(page.contains("Not measured: CPU 1 — not in measure.cpus"));
    assert!(page.contains("Not measured: CPU 3 — outside this process"));
    // The record beside forensics: where, how much, the last write, errors.
    let record = &page[page.find("<p id=\"record\"").expect("the record line")..];
    let record = &record[..record.find("</p>").unwrap()];
    assert!(
        record.contains("/var/lib/latencyd/&lt;record&gt;, every 1m: 5 files, 10 KiB"),
        "{record}"
    );
    assert!(
        record.contains("last interval written 2025-11-24T16:00:00"),
        "{record}"
    );
    assert!(
        record.contains("42 written, 1 dropped, 3 write errors, 2 waiting"),
        "{record}"
    );
    assert!(
        record.contains("Failing: no space left &lt;ENOSPC&gt;"),
        "{record}"
    );
    // Recent spikes: the capture, linked, its cause named as text.
    assert!(page.contains("<h2>Recent spikes</h2>"), "{page}");
    assert!(page.contains(&format!("<a href=\"/spikes/{SPIKE_ID}\">")));
    assert!(
        page.contains("<a href=\"/spikes\">"),
        "every capture, linked"
    );
    assert!(page.contains("task: culprit &lt;b&gt;") && !page.contains("culprit <b>"));
    assert!(page.contains("<td>3000.0</td>"), "the latency in µs");
    // A row per CPU with its numbers, the dead sampler marked.
    let row = |cpu: usize| -> String {
        let start = page.find(&format!("<tr id=\"cpu-{cpu}\"")).expect("a row");
        page[start..start + page[start..].find("</tr>").unwrap()].to_string()
    };
    let cpu0 = row(0);
    assert!(
        cpu0.contains("fifo 80") && cpu0.contains(">sampling<"),
        "{cpu0}"
    );
    assert!(cpu0.contains("<td>402</td>"), "count: {cpu0}");
    assert!(cpu0.contains("<td>250.0</td>"), "lifetime max: {cpu0}");
    let cpu2 = row(2);
    assert!(
        cpu2.contains(">dead<") && cpu2.contains("problem"),
        "{cpu2}"
    );
    assert!(cpu2.contains("<td>3000.0</td>"), "window max: {cpu2}");
    assert!(page.contains("UNHEALTHY"));
    // The page leads with the budget: CPU 0's 250 us wake-up is out of
    // the window, CPU 2's 3 ms one in it; each row says its own.
    let budget = &page[page.find("<p id=\"budget\">").expect("the budget line")..];
    assert!(
        page.find("<p id=\"budget\">") < page.find("<p id=\"health\">"),
        "the budget comes before the health"
    );
    assert!(
        budget.starts_with(
            "<p id=\"budget\">Latency budget (measure.spike_threshold): \
             <span class=\"bad\">exceeded</span>: 1 wake-up over 100us in the last 1m, \
             2 since start.</p>"
        ),
        "{budget}"
    );
    assert!(cpu0.contains("<td>0 / 1</td>"), "over budget: {cpu0}");
    assert!(
        cpu2.contains("<td class=\"bad\">1 / 1</td>"),
        "over budget: {cpu2}"
    );
    // The plots, inline: the samplers', then timerlat's.
    if common::font_or_skip("status_page_shows_host_samplers_table_and_plot") {
        assert_eq!(page.matches("<svg").count(), 2);
        common::check_plot_svg(
            &page[page.find("<svg").unwrap()..page.find("</svg>").unwrap() + 6],
            &["CPU 0", "CPU 2"],
        );
        let timerlat = &page[page.find("id=\"timerlat-plot\"").expect("timerlat's plot")..];
        common::check_plot_svg(
            &timerlat[timerlat.find("<svg").unwrap()..timerlat.find("</svg>").unwrap() + 6],
            &TIMERLAT_SERIES,
        );
        // Without timerlat, its plot is not drawn.
        let mut off = state(true);
        *off.parts.of_mut::<TimerlatPart>().unwrap() = TimerlatPart::off(&off.config);
        let (_, _, page) = get(&app_with(off), "/").await;
        assert_eq!(page.matches("<svg").count(), 1);
        assert!(!page.contains("timerlat-plot"));
    }

    let (status, _, windowed) = get(&app, "/?window=60s").await;
    assert_eq!(status, StatusCode::OK);
    assert!(windowed.contains("over the last 1m"));
}

/// Checks `value` against an OpenAPI schema: types (with `null`),
/// `required`, `enum`, `minimum`, `items`, `$ref`, `allOf`, maps
/// (`additionalProperties` as a schema), and — stricter than JSON Schema —
/// that every property present is documented (unless the object is
/// free-form).
fn check_schema(doc: &Value, schema: &Value, value: &Value, at: &str) {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        return check_schema(doc, &doc["components"]["schemas"][name], value, at);
    }
    let mut properties = serde_json::Map::new();
    let mut required: Vec<String> = Vec::new();
    let mut parts = vec![schema];
    let resolved: Vec<Value> = schema["allOf"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|s| {
                    let name = s["$ref"]
                        .as_str()
                        .unwrap()
                        .trim_start_matches("#/components/schemas/");
                    doc["components"]["schemas"][name].clone()
                })
                .collect()
        })
        .unwrap_or_default();
    parts.extend(resolved.iter());
    for part in &parts {
        if let Some(p) = part["properties"].as_object() {
            properties.extend(p.clone());
        }
        if let Some(r) = part["required"].as_array() {
            required.extend(r.iter().map(|k| k.as_str().unwrap().to_string()));
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
        _ => vec![],
    };
    let actual = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    assert!(
        types.is_empty()
            || types.contains(&actual)
            || (actual == "integer" && types.contains(&"number")),
        "{at}: {actual} where the document says {types:?}"
    );
    if let Some(allowed) = schema["enum"].as_array() {
        assert!(allowed.contains(value), "{at}: {value} not in {allowed:?}");
    }
    if let (Some(min), Some(n)) = (schema["minimum"].as_f64(), value.as_f64()) {
        assert!(n >= min, "{at}: {n} below {min}");
    }
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_schema(doc, &schema["items"], item, &format!("{at}[{i}]"));
            }
        }
        Value::Object(map) => {
            for key in &required {
                assert!(map.contains_key(key), "{at}: required {key} missing");
            }
            for (key, item) in map {
                let sub = match properties.get(key) {
                    Some(sub) => sub.clone(),
                    None if schema["additionalProperties"].is_object() => {
                        schema["additionalProperties"].clone()
                    }
                    // A free-form object ({"type": "object"} alone).
                    None if properties.is_empty() => continue,
                    None => panic!("{at}.{key} is not in the OpenAPI document"),
                };
                check_schema(doc, &sub, item, &format!("{at}.{key}"));
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn metrics_are_gzipped_for_scrapers_that_accept_it() {
    let app = app(state(true));
    let (_, _, plain) = get(&app, "/metrics").await;
    for (accept, gzipped) in [
        ("gzip", true),
        ("deflate, gzip;q=0.5", true),
        ("gzip;q=0", false),
        ("br", false),
    ] {
        let response = app
            .clone()
            .oneshot(
                Request::builder()
                    .uri("/metrics")
                    .header("accept-encoding", accept)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        assert_eq!(headers["vary"], "Accept, Accept-Encoding");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let text = if gzipped {
            assert_eq!(headers["content-encoding"], "gzip", "{accept}");
            let mut text = String::new();
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut text)
                .unwrap();
            assert!(
                body.len() * 3 < text.len(),
                "{} of {}",
                body.len(),
                text.len()
            );
            text
        } else {
            assert!(headers.get("content-encoding").is_none(), "{accept}");
            String::from_utf8(body.to_vec()).unwrap()
        };
        // The render-time histogram counts each scrape; the rest is equal.
        let strip = |t: &str| {
            t.lines()
                .filter(|l| !l.starts_with("latencyd_metrics_render_duration_seconds"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(&text), strip(&plain), "{accept}");
    }
}

#[tokio::test]
async fn the_protobuf_exposition_carries_native_buckets_that_add_up() {
    use common::protobuf::MetricFamily;
    use prost::Message;
    let app = app(state(true));
    let response = app
        .clone()
        .oneshot(
            Request::builder()
                .uri("/metrics")
                .header(
                    "accept",
                    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;\
                     encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                )
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/vnd.google.protobuf")
    );
    let mut body = response.into_body().collect().await.unwrap().to_bytes();
    let (_, _, text) = get(&app, "/metrics").await;
    let mut names = Vec::new();
    while !body.is_empty() {
        let family = MetricFamily::decode_length_delimited(&mut body).unwrap();
        let name = family.name.clone().unwrap();
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "{name} is in the text too"
        );
        let native = name == "latencyd_wakeup_latency_seconds"
            || name == "latencyd_task_wakeup_latency_seconds";
        if name == "latencyd_wakeup_latency_seconds" {
            assert_eq!(family.metric.len(), 2, "one per CPU");
        }
        if name == "latencyd_task_wakeup_latency_seconds" {
            assert_eq!(family.metric.len(), 1, "the observed task");
            assert_eq!(
                family.metric[0].histogram.as_ref().unwrap().sample_count,
                Some(20)
            );
        }
        if native {
            for metric in &family.metric {
                let h = metric.histogram.as_ref().unwrap();
                assert_eq!(h.schema, Some(7));
                assert!(!h.bucket.is_empty(), "the classic buckets stay");
                let mut running = 0i64;
                let total: i64 = h
                    .positive_delta
                    .iter()
                    .map(|d| {
                        running += d;
                        running
                    })
                    .sum();
                assert_eq!(
                    total as u64,
                    h.sample_count.unwrap(),
                    "native counts add up"
                );
                let spans: u32 = h.positive_span.iter().map(|s| s.length.unwrap()).sum();
                assert_eq!(spans as usize, h.positive_delta.len());
            }
        }
        if name == "latencyd_wakeup_latency_seconds" {
            // CPU 2's capture is an exemplar of its bucket and of its native
            // histogram, with its id, exact latency and time.
            let cpu2 = family
                .metric
                .iter()
                .find(|m| m.label[0].value.as_deref() == Some("2"))
                .unwrap();
            let h = cpu2.histogram.as_ref().unwrap();
            let captured: Vec<_> = h
                .exemplars
                .iter()
                .filter(|e| e.label.iter().any(|l| l.value.as_deref() == Some(SPIKE_ID)))
                .collect();
            assert_eq!(captured.len(), 1, "{:?}", h.exemplars);
            assert_eq!(captured[0].value, Some(0.003));
            let t = captured[0].timestamp.as_ref().unwrap();
            assert_eq!((t.seconds, t.nanos), (1_795_315_538, 123_000_000));
            let bucket = h
                .bucket
                .iter()
                .find(|b| b.exemplar.as_ref() == Some(captured[0]))
                .expect("the capture rides on a classic bucket");
            assert!(bucket.upper_bound.unwrap() >= 0.003, "{bucket:?}");
        }
        names.push(name);
    }
    assert!(names.len() > 10, "{names:?}");
}

async fn get_accepting(
    app: &axum::Router,
    path: &str,
    accept: &str,
) -> (StatusCode, String, String) {
    let response = app
        .clone()
        .oneshot(
            Request::builder()
                .uri(path)
                .header("accept", accept)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn openmetrics_carries_the_exemplars_and_plain_text_never_does() {
    let revision = format!("revision=\"{REVISION}\"");
    let app = app(state(true));
    // Prometheus' own default Accept header.
    let (status, content_type, body) = get_accepting(
        &app,
        "/metrics",
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;\
         q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        content_type,
        latencyd::daemon::render::openmetrics::CONTENT_TYPE
    );
    let body = body.replace(&revision, "revision=\"<git revision>\"");
    common::check_expected("metrics-openmetrics.txt", &body);
    assert!(body.ends_with("# EOF\n"));
    assert!(
        body.contains(&format!(
            " # {{capture=\"{SPIKE_ID}\",cpu=\"2\"}} 0.003 1795315538.123000000\n"
        )),
        "{body}"
    );
    // Whoever asks for the Prometheus text format, or for nothing, gets it
    // as the text encoder writes it: no exemplar, nothing OpenMetrics adds.
    let registry = latencyd::daemon::render::metrics::registry(
        Arc::new(Mutex::new(state(true))),
        false,
        FIXED,
    );
    let plain = latencyd::daemon::render::metrics::render(&registry).unwrap();
    let strip = |t: &str| {
        t.lines()
            .filter(|l| {
                !l.contains("latencyd_metrics_render_duration_seconds")
                    && !l.contains("latencyd_http_")
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for accept in [
        "",
        "text/plain;version=0.0.4",
        "*/*",
        "text/plain, application/openmetrics-text;q=0.5",
    ] {
        let (_, content_type, text) = get_accepting(&app, "/metrics", accept).await;
        assert_eq!(
            content_type, "text/plain; version=0.0.4; charset=utf-8",
            "{accept}"
        );
        assert_eq!(strip(&text), strip(&plain), "{accept}");
        assert!(
            !text.contains(" # {") && !text.contains("# EOF"),
            "{accept}"
        );
    }
}

#[tokio::test]
async fn an_observed_tasks_capture_is_an_exemplar_of_its_series_only() {
    let s = state(true);
    {
        let journal = forensics_journal(&s);
        let mut journal = journal.lock();
        let mut task = journal.recent[0].clone();
        task.id = "1795315538500-cpu3".to_string();
        task.cpu = 3;
        task.at = "2026-11-22T02:45:38.500Z".to_string();
        task.latency_ns = 2_000_000;
        task.task = Some(latencyd::forensics::TaskRef {
            name: "rtapp".to_string(),
            pid: 900,
            container: "rtapp.service".to_string(),
        });
        // Another task of the same CPU, and one from before this run
        // started: neither is an exemplar of rtapp's series.
        let mut other = task.clone();
        other.id = "1795315538600-cpu3".to_string();
        other.at = "2026-11-22T02:45:38.600Z".to_string();
        other.task.as_mut().unwrap().name = "logger".to_string();
        let mut old = task.clone();
        old.id = "1795315000000-cpu3".to_string();
        old.at = "2026-11-22T02:36:40.000Z".to_string();
        for summary in [old, task, other] {
            journal.recent.push_front(summary);
        }
    }
    let app = app_with(s);
    let (_, _, body) = get_accepting(&app, "/metrics", "application/openmetrics-text").await;
    let exemplars: Vec<&str> = body
        .lines()
        .filter(|l| {
            l.starts_with("latencyd_task_wakeup_latency_seconds_bucket") && l.contains(" # {")
        })
        .collect();
    assert_eq!(
        exemplars,
        vec![
            "latencyd_task_wakeup_latency_seconds_bucket{container=\"rtapp.service\",cpu=\"3\",\
             task=\"rtapp\",le=\"0.005\"} 20 # {capture=\"1795315538500-cpu3\",cpu=\"3\"} 0.002 \
             1795315538.500000000"
        ],
        "{body}"
    );
    // Nor of the samplers' series.
    assert!(
        !body.contains("1795315538600-cpu3\",cpu=\"3\"} 0.002 1795315538.6"),
        "{body}"
    );
    assert!(!body.contains("1795315000000-cpu3"), "{body}");
}

#[tokio::test]
async fn a_capture_is_a_page_with_its_picture_and_bad_ids_are_refused_as_pages() {
    let app = app(state(true));
    let (status, content_type, page) = get(&app, &format!("/spikes/{SPIKE_ID}")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(content_type, "text/html; charset=utf-8");
    assert!(page.contains("<svg"), "the picture is inline");
    assert!(page.contains("culprit &lt;b&gt;") && !page.contains("culprit <b>"));
    // The verdict once (the heading says where, the picture has no
    // titles of its own), and scheduling written one way.
    assert_eq!(page.matches("woke 3.00ms late").count(), 1, "{page}");
    assert!(!page.contains("Main cause"), "{page}");
    assert!(
        page.contains("<td class=\"l\">SCHED_FIFO 95</td>"),
        "{page}"
    );
    for outside in ["<script", "<link", "src="] {
        assert!(!page.contains(outside), "{outside} in the page");
    }
    // The list links it.
    let (status, _, list) = get(&app, "/spikes").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        list.contains(&format!("<a href=\"/spikes/{SPIKE_ID}\">")),
        "{list}"
    );
    // Bad ids: 400 naming what is accepted, 404 for a well-formed unknown
    // one; both pages. A path outside the store is never an id.
    for (path, code, says) in [
        (
            "/spikes/..%2F..%2Fetc%2Fpasswd",
            400,
            "13 digits of Unix milliseconds",
        ),
        ("/spikes/%3Cb%3E", 400, "&lt;b&gt;"),
        (
            "/spikes/1795315538000-cpu2",
            404,
            "no capture 1795315538000-cpu2",
        ),
        ("/spikes/1795315538000-cpu2/x", 404, "no such path"),
    ] {
        let (status, content_type, page) = get(&app, path).await;
        assert_eq!(status.as_u16(), code, "{path}: {page}");
        assert_eq!(content_type, "text/html; charset=utf-8", "{path}");
        assert!(page.contains(says), "{path}: {page}");
        assert!(!page.contains("<b>"), "{path}: escaped");
    }
}

#[tokio::test]
async fn a_range_of_the_record_is_summed_per_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(state_with_record(dir.path()));
    let (status, _, body) = get(&app, "/api/v1/latency?from=-1h").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["intervals"], 4);
    assert_eq!(v["skipped_lines"], 0);
    assert_eq!(v["to"], "2026-11-22T03:00:38.000Z");
    let cpus = v["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 2);
    assert_eq!(
        (cpus[1]["cpu"].as_u64(), cpus[1]["count"].as_u64()),
        (Some(2), Some(200))
    );
    assert_eq!(cpus[1]["max_ns"], 2_000 + 5_000 + 99 * 100 + 1, "exact");
    assert!(cpus[1]["window_max_ns"].is_null());
    // Only the second interval: from 11 minutes back.
    let (_, _, body) = get(&app, "/api/v1/latency?from=-11m").await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["intervals"], 2);
    // An empty range is an answer, not an error.
    let (status, _, body) = get(&app, "/api/v1/latency?from=-5m").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["cpus"],
        serde_json::json!([])
    );
    let (status, _, body) = get(&app, "/plot.svg?window=30s&from=-1h").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("not both"), "{body}");
    // timerlat's entries plot from the record even with timerlat off now.
    let mut off = state_with_record(dir.path());
    *off.parts.of_mut::<TimerlatPart>().unwrap() = TimerlatPart::off(&off.config);
    if common::font_or_skip("a_range_of_the_record_is_summed_per_cpu (timerlat's plot)") {
        let (status, _, svg) = get(&app_with(off), "/plot.svg?source=timerlat&from=-1h").await;
        assert_eq!(status, StatusCode::OK, "{svg}");
        common::check_plot_svg(&svg, &["CPU 0 irq", "CPU 0 thread"]);
        assert!(svg.contains("CPU 0 thread (max 9 µs)"), "{svg}");
        assert!(svg.contains("timerlat latency (irq, thread, user) from"));
    }
    let (status, _, body) = get(&app, "/api/v1/latency?from=-1d&to=-2d").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("must be before to"), "{body}");
}

#[tokio::test]
async fn every_route_answers_as_the_openapi_document_says() {
    let app = app(state(true));
    let (status, content_type, text) = get(&app, "/api/v1/openapi.json").await;
    assert_eq!(
        (status, content_type.as_str()),
        (StatusCode::OK, "application/json")
    );
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    let documented: std::collections::BTreeSet<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let served: std::collections::BTreeSet<&str> = latencyd::daemon::http::routes()
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        documented, served,
        "the document lists exactly the served routes"
    );

    // Requests that provoke each documented status of each route.
    let mut exercised = std::collections::BTreeSet::new();
    let mut stuck = state(true);
    stuck.cpus[1].sampler.last_sample_ns = NOW_NS - 10 * S;
    let unhealthy = app_with(stuck);
    let record_dir = tempfile::tempdir().unwrap();
    let ranged = app_with(state_with_record(record_dir.path()));
    // A capture directory holding a file that is not a capture.
    let capture_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        capture_dir.path().join("1795315538999-cpu1.json"),
        "{\"id\": 1",
    )
    .unwrap();
    let broken = {
        let s = state(true);
        forensics_journal(&s).lock().dir = Some(capture_dir.path().to_path_buf());
        app_with(s)
    };
    let timerlat_off = {
        let mut s = state(true);
        *s.parts.of_mut::<TimerlatPart>().unwrap() = TimerlatPart::off(&s.config);
        app_with(s)
    };
    let hwnoise_stopped = app_with(hwnoise_stopped());
    for (route, path, target) in [
        ("/", "/", &app),
        ("/", "/?window=90m", &app),
        ("/plot.svg", "/plot.svg?source=timerlat", &timerlat_off),
        ("/api/v1/status", "/api/v1/status", &hwnoise_stopped),
        ("/plot.svg", "/plot.svg?window=30s", &app),
        ("/plot.svg", "/plot.svg?span=1", &app),
        ("/metrics", "/metrics", &app),
        ("/healthz", "/healthz", &app),
        ("/healthz", "/healthz", &unhealthy),
        ("/livez", "/livez", &unhealthy),
        ("/api/v1/status", "/api/v1/status", &app),
        ("/api/v1/host", "/api/v1/host", &app),
        ("/api/v1/observe", "/api/v1/observe", &app),
        ("/api/v1/observe", "/api/v1/observe", &ranged),
        ("/api/v1/latency", "/api/v1/latency", &app),
        ("/api/v1/latency", "/api/v1/latency?from=-1h", &ranged),
        ("/api/v1/latency", "/api/v1/latency?from=yesterday", &app),
        ("/api/v1/latency", "/api/v1/latency?from=-1h", &app),
        ("/plot.svg", "/plot.svg?from=-1h&to=-5m", &ranged),
        ("/plot.svg", "/plot.svg?from=-1h", &app),
        ("/api/v1/latency/{cpu}", "/api/v1/latency/2", &app),
        ("/api/v1/latency/{cpu}", "/api/v1/latency/x", &app),
        ("/api/v1/latency/{cpu}", "/api/v1/latency/3", &app),
        ("/api/v1/spikes", "/api/v1/spikes", &app),
        ("/api/v1/timerlat", "/api/v1/timerlat", &app),
        (
            "/api/v1/spikes/{id}",
            &format!("/api/v1/spikes/{SPIKE_ID}"),
            &app,
        ),
        ("/api/v1/spikes/{id}", "/api/v1/spikes/cpu2", &app),
        (
            "/api/v1/spikes/{id}",
            "/api/v1/spikes/1795315538000-cpu2",
            &app,
        ),
        ("/api/v1/openapi.json", "/api/v1/openapi.json", &app),
        ("/runbooks", "/runbooks", &app),
        ("/spikes", "/spikes", &app),
        ("/spikes/{id}", &format!("/spikes/{SPIKE_ID}"), &app),
        ("/spikes/{id}", "/spikes/..%2F..%2Fetc%2Fpasswd", &app),
        ("/spikes/{id}", "/spikes/1795315538000-cpu2", &app),
        ("/spikes/{id}", "/spikes/1795315538999-cpu1", &broken),
    ] {
        let (status, content_type, body) = get(target, path).await;
        let code = status.as_u16().to_string();
        let mut response = doc["paths"][route]["get"]["responses"][&code].clone();
        if let Some(reference) = response["$ref"].as_str() {
            let name = reference.trim_start_matches("#/components/responses/");
            response = doc["components"]["responses"][name].clone();
        }
        assert!(
            response.is_object(),
            "{path}: {code} is not documented for {route}"
        );
        let media = content_type.split(';').next().unwrap();
        let schema = &response["content"][media]["schema"];
        assert!(
            schema.is_object(),
            "{path}: {media} is not documented for {route} {code}"
        );
        if media == "application/json" {
            check_schema(&doc, schema, &serde_json::from_str(&body).unwrap(), path);
        }
        exercised.insert((route, code));
    }
    // Every documented status other than 401 (tests/full/web_config.rs) and the
    // font-less 500 was provoked.
    let font = common::font_or_skip("every_route_answers_as_the_openapi_document_says");
    for (route, item) in doc["paths"].as_object().unwrap() {
        for code in item["get"]["responses"].as_object().unwrap().keys() {
            // Without a font the plot is the 500 and its 200 cannot be.
            let drawn = if font { "500" } else { "200" };
            if code == "401" || (route == "/plot.svg" && code == drawn) {
                continue;
            }
            assert!(
                exercised.contains(&(route.as_str(), code.clone())),
                "{route} {code} is documented but not exercised"
            );
        }
    }
}

#[test]
fn docs_api_md_lists_every_route_of_the_openapi_document_with_its_statuses() {
    let doc: Value = serde_json::from_str(latencyd::daemon::http::openapi::document()).unwrap();
    let documented: Vec<(String, String)> = common::doc_table_rows("docs/api.md", "Every route")
        .into_iter()
        .map(|cells| (cells[0].clone(), cells[1].clone()))
        .collect();
    let described: Vec<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(route, item)| {
            let mut codes: Vec<&String> = item["get"]["responses"]
                .as_object()
                .unwrap()
                .keys()
                .collect();
            codes.sort();
            let codes: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
            (route.clone(), codes.join(", "))
        })
        .collect();
    let mut documented = documented;
    documented.sort();
    assert_eq!(
        documented, described,
        "docs/api.md's route table (left) differs from /api/v1/openapi.json (right)"
    );
    assert_eq!(
        documented.len(),
        latencyd::daemon::http::routes().len(),
        "every route is described"
    );
}

/// The documents and pages a refactoring must leave alone, byte for byte,
/// on the synthetic state: every JSON route, the OpenAPI document and
/// every page (the metrics
/// are checked by `metrics_match_the_expected_exposition` and its
/// OpenMetrics twin). The build's revision and version are placeholders.
#[tokio::test]
async fn every_document_and_page_is_byte_for_byte_as_expected() {
    let pages = [
        ("/api/v1/status", "api-status.json"),
        ("/api/v1/timerlat", "api-timerlat.json"),
        ("/api/v1/spikes", "api-spikes.json"),
        ("/healthz", "healthz.json"),
        ("/", "status-page.html"),
        ("/spikes", "spikes-page.html"),
        ("/plot.svg?source=timerlat", "plot-timerlat.svg"),
        ("/api/v1/openapi.json", "openapi.json"),
    ];
    for (state, suffix) in [(state(true), ""), (hwnoise_stopped(), "-hwnoise-stopped")] {
        let app = app(state);
        for (path, name) in pages {
            if !suffix.is_empty() && !path.starts_with("/api/v1/status") && path != "/" {
                continue;
            }
            let (status, _, body) = get(&app, path).await;
            assert_eq!(status, StatusCode::OK, "{path}: {body}");
            let body = body
                .replace(REVISION, "<git revision>")
                .replace(env!("CARGO_PKG_VERSION"), "<version>");
            let name = match name.rsplit_once('.') {
                Some((stem, ext)) => format!("surface/{stem}{suffix}.{ext}"),
                None => unreachable!("every name has an extension"),
            };
            common::check_expected(&name, &body);
        }
    }
}

/// A load window running (the cpu profile, until 300 s after now, 3
/// windows so far, 2 generator failures), with hwnoise's window running
/// too: both lines of the status page say so, and the status and metrics
/// show the window.
#[tokio::test]
async fn a_running_load_window_is_byte_for_byte_as_expected() {
    use latencyd::load::{Profile, Window};
    let mut s = state(true);
    let window = Window {
        start: std::time::UNIX_EPOCH + std::time::Duration::from_nanos(NOW_UNIX_NS - 60 * S),
        end: std::time::UNIX_EPOCH + std::time::Duration::from_nanos(NOW_UNIX_NS + 300 * S),
    };
    s.config.section_mut::<LoadConfig>().profile = Some(Profile::Cpu);
    let load = (s
        .parts
        .of_mut::<latencyd::instruments::load_windows::LoadPart>())
    .expect("the load windows are registered");
    load.config.profile = Some(Profile::Cpu);
    load.profile = Some(Profile::Cpu);
    load.active = Some(window);
    load.next = Some(window);
    load.windows_total = 3;
    load.failures.insert("stress-ng".to_string(), 2);
    let app = app(s);
    let revision = format!("revision=\"{REVISION}\"");
    for (path, name) in [
        ("/api/v1/status", "surface/api-status-loaded.json"),
        ("/", "surface/status-page-loaded.html"),
        ("/metrics", "surface/metrics-loaded.txt"),
    ] {
        let (status, _, body) = get(&app, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        let body = body
            .replace(&revision, "revision=\"<git revision>\"")
            .replace(REVISION, "<git revision>")
            .replace(env!("CARGO_PKG_VERSION"), "<version>");
        common::check_expected(name, &body);
    }
}
