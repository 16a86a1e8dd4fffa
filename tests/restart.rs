//! A sampler restart that does not report running in time is cancelled
//! and joined before its CPU gets another sampler: never two samplers on
//! one CPU. Driven through the engine with the test-only fault injection
//! (a restarted sampler that takes 1 s to report running, against a
//! 300 ms start timeout), in its own test binary because the faults are
//! read from the process environment. Cargo builds it only with the
//! feature (`required-features` in Cargo.toml).

mod common;

#[test]
fn a_late_restart_is_stopped_and_joined_before_the_cpu_gets_another() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    use latencyd::host::HostInfo;
    use latencyd::rt::engine::{Engine, EngineSpec, RestartOutcome, ThreadSetup};
    use latencyd::rt::sampler::LoopPlan;
    use latencyd::rt::sys::Policy;
    use latencyd::stats::LatencyStats;

    let host = HostInfo::detect();
    let cpu = host.usable_cpus[0];
    // SAFETY: this is the only test of this binary and no other thread of
    // it reads the environment while the variable is set.
    unsafe {
        std::env::set_var(
            "FAULT_INJECTION_LATENCYD",
            format!("displace:{cpu}:200,slowstart:{cpu}:1000"),
        );
    }
    let plan = LoopPlan {
        interval_ns: 1_000_000,
        warmup_periods: 0,
        measure_periods: None,
        max_samples: None,
        publish_period_ns: 10_000_000,
    };
    let spec = EngineSpec {
        threads: ThreadSetup::one_per_cpu(&[cpu], 0, plan),
        // The start-up protocol is the same for every policy; `other` runs
        // without privileges too.
        policy: Policy::Other,
        allow_non_rt: true,
        template: LatencyStats::new(u64::MAX, None),
        start_timeout: Duration::from_millis(300),
        limits: host.rt_limits(),
        tolerate_offline: false,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut engine = Engine::start(spec, Arc::clone(&stop)).expect("the samplers start");
    let samplers_on_cpu = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim() == format!("sampler-cpu{cpu}"))
            .count()
    };
    let mut most_at_once = 0;
    let mut offline = 0;
    let mut restarts_started = 0;
    let mut cancelled = 0;
    let deadline = Instant::now() + Duration::from_secs(15);
    // Two whole rounds: displaced, restarted, given up on, joined, and
    // restarted again after that.
    while (cancelled < 2 || restarts_started < 3) && Instant::now() < deadline {
        engine.drain(|_, _| Ok(())).unwrap();
        offline += engine.reap_offline(|_, _| Ok(())).unwrap().len();
        for job in engine.restart_jobs(None) {
            let idx = job.idx;
            let candidate = job.run();
            if matches!(candidate, Ok(Some(_))) {
                restarts_started += 1;
            }
            engine
                .adopt(idx, candidate, Instant::now())
                .expect("the thread starts");
        }
        for outcome in engine.poll_restarts(Instant::now()) {
            match outcome {
                RestartOutcome::NotResumed { why, .. } => {
                    assert!(why.contains("did not start within 300ms"), "{why}");
                    cancelled += 1;
                }
                RestartOutcome::Resumed { .. } => {
                    panic!("a restart reported running although it was given up on")
                }
            }
        }
        most_at_once = most_at_once.max(samplers_on_cpu());
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let report = engine
        .finish(Duration::from_secs(3), |_, _| Ok(()))
        .unwrap();
    assert!(
        offline >= 1 && cancelled >= 2 && restarts_started >= 3,
        "offline {offline}, restarts {restarts_started}, cancelled {cancelled}"
    );
    assert_eq!(most_at_once, 1, "samplers seen at once on CPU {cpu}");
    assert!(report.stuck.is_empty(), "stuck: {:?}", report.stuck);
    assert_eq!(samplers_on_cpu(), 0, "every sampler thread was joined");
}
