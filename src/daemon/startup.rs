//! The daemon's start-up order and its shutdown: configuration and host
//! checks, the listener, logging, the runtime, PM QoS, the engine, the
//! exporter's pinning, the server, signals, READY=1; then the event loop;
//! then stop, join and exit.

use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{error, info, warn};

use super::cpu_watch::CpuWatch;
use super::error::StartupError;
use super::event_loop::{self, Signals};
use super::host_watch;
use super::http::webconfig::Security;
use super::http::{self, server};
use super::logging;
use super::notify;
use super::render::metrics::SYSTEM_CLOCKS;
use super::state::{
    CpuView, LoadState, MonitorState, ObserveState, ReloadRecord, SamplerView, lock,
};
use crate::cli::RunArgs;
use crate::config::{self, Config, Sources};
use crate::cpulist::format_cpu_list;
use crate::forensics::Recorder;
use crate::host::HostInfo;
use crate::record::{Accumulator, Context, Keeper};
use crate::rt::engine::{DEFAULT_START_TIMEOUT, Engine, EngineSpec, StartError, ThreadSetup};
use crate::rt::sampler::LoopPlan;
use crate::rt::sys::{self, CpuDmaLatencyHold};
use crate::sampling::{CpuSelection, Unmeasured, unmeasured_cpus};
use crate::stats::LatencyStats;
use crate::units::{format_duration_ns, unix_now_ns};

/// How long past one interval shutdown waits for the samplers to return.
const JOIN_SLACK: Duration = Duration::from_millis(300);

/// `latencyd run`.
pub fn main(args: &RunArgs) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(err) => {
            if err.before_logging() {
                eprintln!("latencyd: {err}");
            } else {
                error!("{err}");
            }
            ExitCode::from(err.exit_code())
        }
    }
}

/// `latencyd check-config FILE`: validate and print the effective
/// configuration with the source of every value.
pub fn check_config(file: &std::path::Path) -> ExitCode {
    let sources = Sources {
        file: Some(file.to_path_buf()),
        flags: vec![],
    };
    let checked = Config::load(&sources).and_then(|config| {
        super::check::check_whole(&config, &HostInfo::detect())?;
        Ok(config)
    });
    match checked {
        Ok(config) => {
            print!("{}", config.to_annotated_toml());
            ExitCode::SUCCESS
        }
        Err(err) => {
            let err = StartupError::Config(err);
            eprintln!("latencyd: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

fn run(args: &RunArgs) -> Result<ExitCode, StartupError> {
    let sources = Sources {
        file: args.config.clone(),
        flags: args.config_flags(),
    };
    let config = Config::load(&sources)?;
    let host = HostInfo::detect();
    let security = super::check::check_whole(&config, &host)?;
    // Bound before any thread starts, so a port in use fails like any other
    // configuration error.
    let mut listeners = Vec::new();
    let mut fallbacks = Vec::new();
    for addr in &config.export.listen {
        let bound = super::listen::bind(*addr).map_err(|err| {
            config::key_error(
                &config.effective,
                "export.listen",
                format!("cannot listen on {addr}: {err}"),
            )
        })?;
        listeners.push(bound.listener);
        fallbacks.extend(bound.fallback);
    }
    let log_level = logging::init(&config.log).map_err(StartupError::Logging)?;
    for fallback in fallbacks {
        warn!("{fallback}");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The blocking pool's threads (restarts, reloads, file reads,
        // range reads, bcrypt) at most; more work waits in its queue.
        // Expensive HTTP work has its own, smaller bounds (http/busy.rs).
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
        .map_err(|err| StartupError::Failure(format!("cannot start the async runtime: {err}")))?;
    runtime.block_on(serve(config, host, sources, listeners, security, log_level))
}

/// Threads the blocking pool may have at once (tokio's default is 512: a
/// flood of credential checks once started 515 threads).
const MAX_BLOCKING_THREADS: usize = 32;

async fn serve(
    config: Config,
    host: HostInfo,
    sources: Sources,
    listeners: Vec<TcpListener>,
    security: Security,
    log_level: logging::LevelHandle,
) -> Result<ExitCode, StartupError> {
    let measure = &config.measure;
    let pm_qos_hold = if measure.pm_qos {
        Some(CpuDmaLatencyHold::acquire(0).map_err(|err| {
            StartupError::Permission(format!(
                "measure.pm_qos is true but {} cannot be held ({err}): it needs root or write \
                 access to the device (see deploy/ for a udev rule)",
                sys::CPU_DMA_LATENCY_PATH
            ))
        })?)
    } else {
        None
    };

    let plan = LoopPlan {
        interval_ns: measure.interval_ns,
        warmup_periods: measure.warmup_ns.div_ceil(measure.interval_ns),
        measure_periods: None,
        max_samples: None,
        publish_period_ns: super::collector::PUBLISH_PERIOD_NS,
    };
    let spec = EngineSpec {
        threads: ThreadSetup::one_per_cpu(&measure.cpu_list(&host), measure.priority, plan),
        policy: measure.policy,
        allow_non_rt: !config.realtime.required,
        template: LatencyStats::new(measure.spike_threshold_ns, None),
        start_timeout: DEFAULT_START_TIMEOUT,
        limits: host.rt_limits(),
        tolerate_offline: true,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut engine = Engine::start(spec, Arc::clone(&stop)).map_err(|err| match err {
        StartError::Permission(message) => StartupError::Permission(message),
        StartError::Failed(message) => StartupError::Failure(message),
    })?;
    for reason in &engine.non_rt_reasons {
        warn!("running without real-time guarantees: {reason}");
    }
    // Pinned after the samplers started: they pin themselves, and the
    // exporter keeps its system calls and cache traffic on housekeeping CPUs.
    if let CpuSelection::List(cpus) = &config.export.cpus {
        sys::set_current_thread_affinity(cpus).map_err(|err| {
            StartupError::Failure(format!(
                "cannot pin the exporter to CPUs {}: {err}",
                format_cpu_list(cpus)
            ))
        })?;
        info!("exporter pinned to CPUs {}", format_cpu_list(cpus));
    }

    let listeners = listeners
        .into_iter()
        .map(tokio::net::TcpListener::from_std)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| StartupError::Failure(format!("cannot use a listening socket: {err}")))?;
    let listen: Vec<std::net::SocketAddr> = listeners
        .iter()
        .zip(&config.export.listen)
        .map(|(l, configured)| l.local_addr().unwrap_or(*configured))
        .collect();
    let cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
    let unmeasured = unmeasured_cpus(&host, &cpus);
    for &(cpu, reason) in &unmeasured {
        if reason != Unmeasured::Config {
            warn!(
                cpu,
                reason = reason.name(),
                "CPU {cpu} is not measured: {}",
                reason.explain()
            );
        }
    }
    let interval_ns = config.measure.interval_ns;
    let limits = server::Limits {
        max_connections: config.export.max_connections,
        header_timeout: Duration::from_nanos(config.export.header_timeout_ns),
        request_timeout: Duration::from_nanos(config.export.request_timeout_ns),
    };
    let summary = format!(
        "sampling CPUs {} every {} ({}), serving {} ({})",
        format_cpu_list(&cpus),
        format_duration_ns(interval_ns),
        if engine.non_rt_reasons.is_empty() {
            "real-time"
        } else {
            "NOT real-time"
        },
        {
            let scheme = if security.tls.is_some() {
                "https"
            } else {
                "http"
            };
            listen
                .iter()
                .map(|addr| format!("{scheme}://{addr}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
        security.describe(),
    );
    // After the pinning: the recorder's and the record's threads run
    // where the exporter does.
    let recorder = start_forensics(&config, &engine);
    let observer = super::observe::start(&config, &host, &cpus);
    let observe_state = ObserveState::new(observer.status(), &config);
    let record = start_record(&config, &host);
    let record_status = record.as_ref().map_or_else(
        || Keeper::disabled().status(),
        |(_, keeper)| keeper.status(),
    );
    let record_dir = record.as_ref().map(|_| config.record.dir.clone());
    let first_facts = host_watch::FirstRead::take(&cpus, record_dir).await;
    let reread = Duration::from_nanos(config.host.reread_interval_ns);
    let started_ns = sys::monotonic_now_ns();
    let load_state = LoadState::new(&config);
    let state = Arc::new(Mutex::new(MonitorState {
        fingerprint: first_facts.track(),
        started_ns,
        pm_qos_held_us: pm_qos_hold.as_ref().map(|hold| hold.latency_us),
        cpus: engine
            .slots
            .iter()
            .map(|slot| {
                let sampler = SamplerView {
                    tid: slot.shared().tid(),
                    policy: config.measure.policy,
                    priority: config.measure.priority,
                    realtime: slot.realtime,
                    last_sample_ns: 0,
                    alive: true,
                    online: !slot.is_offline(),
                    sampling: !slot.is_offline(),
                    unsampled_since_ns: None,
                    running_since_ns: 0,
                    stalls: 0,
                };
                CpuView::new(slot.cpu, &config, sampler)
            })
            .collect(),
        non_rt_reasons: engine.non_rt_reasons.clone(),
        unmeasured,
        reload: ReloadRecord::started(started_ns),
        listen,
        host,
        config,
        forensics: recorder.journal(),
        record: record_status,
        observe: observe_state,
        load: load_state,
        gaps: Default::default(),
    }));

    tokio::spawn(host_watch::watch(first_facts, Arc::clone(&state), reread));
    let mut app = http::AppState::new(Arc::clone(&state), true, SYSTEM_CLOCKS);
    app.security = Arc::new(std::sync::RwLock::new(Arc::new(security)));
    let security = Arc::clone(&app.security);
    let refused = app.counters.refused_connections.clone();
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(server::serve(
        listeners,
        http::router(app),
        Arc::clone(&security),
        limits,
        refused,
        shutdown_rx,
    ));
    // Signal handlers first: a SIGTERM sent as soon as READY=1 (or the
    // log line) is seen must find them, or it would kill the process
    // without the orderly shutdown.
    let signals = Signals::install()
        .map_err(|err| StartupError::Failure(format!("cannot watch for signals: {err}")))?;
    info!("{summary}");
    notify::ready(&summary);

    let cpu_watch = {
        let s = lock(&state);
        let grows = s.config.measure.cpus == CpuSelection::All;
        CpuWatch::new(grows, s.host.allowed_cpus.clone())
    };
    let mut collector =
        super::collector::Collector::new(recorder, observer, record, cpu_watch, unix_now_ns);
    collector.load = {
        let s = lock(&state);
        super::load::LoadWindows::new(&s.config, &s.host)
    };
    let reload = super::reload::Reload {
        sources,
        log_level,
        security,
    };
    let exit_code = event_loop::run(&mut engine, &mut collector, &state, &reload, signals).await;

    notify::stopping();
    stop.store(true, Ordering::Relaxed);
    let _ = shutdown_tx.send(true);
    let started = Instant::now();
    // A restart under way hands its sampler to the engine, which stops it.
    collector.settle(&mut engine).await;
    // A load window's generators stop before the samplers do.
    if let Some(mut windows) = collector.load.take() {
        windows.stop(&state).await;
    }
    let mut recorder = collector.take_recorder();
    // Joining the recorder waits for a capture under way and removes the
    // tracefs instance: not on the runtime's thread.
    let stopped_recorder = tokio::task::spawn_blocking(move || recorder.stop());
    let mut observer = collector.take_observer();
    let stopped_observer = tokio::task::spawn_blocking(move || observer.stop());
    // Samplers notice the flag at their next wake-up (at most one interval,
    // at most 1 s by configuration); their last intervals are kept. The
    // join waits, so it runs off the runtime thread.
    let timeout = Duration::from_nanos(interval_ns) + JOIN_SLACK;
    let joined_state = Arc::clone(&state);
    collector.close_gaps();
    let mut record = collector.record.take();
    let finished = tokio::task::spawn_blocking(move || {
        let cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
        let outcome = engine.finish(timeout, |idx, interval| {
            if let Some((accumulator, _)) = &mut record {
                accumulator.add(cpus[idx], interval);
            }
            lock(&joined_state).cpus[idx].absorb(interval)
        });
        // The interval in progress is written with its true length.
        if let Some((mut accumulator, mut keeper)) = record {
            accumulator.set_fingerprint(Arc::clone(&lock(&joined_state).fingerprint.current));
            if let Some(batch) = accumulator.take(unix_now_ns(), true) {
                keeper.submit(batch);
            }
            keeper.stop();
        }
        outcome
    })
    .await;
    match finished {
        Ok(Ok(outcome)) => {
            for cpu in outcome.stuck {
                error!(
                    "the sampler on CPU {cpu} did not stop within {timeout:?}; exiting without it"
                );
            }
        }
        Ok(Err(err)) => error!("a sampler could not be joined: {err}"),
        Err(err) => error!("the samplers could not be joined: {err}"),
    }
    if stopped_recorder.await.is_err() {
        error!("the forensics thread could not be stopped cleanly");
    }
    if !matches!(stopped_observer.await, Ok(true)) {
        error!("the observer thread could not be stopped cleanly");
    }
    // In-flight requests get the server's grace, counted from the shutdown
    // signal above (it closes what is still open then); dropping the
    // server sooner would cut answers it is still writing.
    let grace_left =
        (server::SHUTDOWN_GRACE + Duration::from_millis(100)).saturating_sub(started.elapsed());
    let _ = tokio::time::timeout(grace_left, server).await;
    drop(pm_qos_hold);
    info!("stopped in {:?}", started.elapsed());
    Ok(exit_code)
}

/// Starts the record's writer thread when the configuration asks for it.
fn start_record(config: &Config, host: &HostInfo) -> Option<(Accumulator, Keeper)> {
    let r = &config.record;
    if !r.on() {
        info!(
            "record: off (record.enabled = {}); the on-disk history is not kept",
            match r.enabled {
                crate::config::RecordSwitch::Auto => "\"auto\" and no state directory",
                _ => "false",
            }
        );
        return None;
    }
    let context = Context::of(
        host,
        config.measure.interval_ns,
        config.measure.policy.name(),
        config.measure.priority,
    );
    match Keeper::start(r.settings(), context, unix_now_ns) {
        Ok(keeper) => {
            if let Some(why) = crate::files::loose_permissions(&r.dir) {
                warn!("record: {why}");
            }
            info!(
                "record: every {} into {} (retention {}, at most {} bytes)",
                format_duration_ns(r.interval_ns),
                r.dir.display(),
                format_duration_ns(r.retention_ns),
                r.max_bytes
            );
            let accumulator = Accumulator::new(
                r.interval_ns,
                config.measure.spike_threshold_ns,
                unix_now_ns(),
            );
            Some((accumulator, keeper))
        }
        Err(err) => {
            error!("record: cannot start its thread: {err}; measuring goes on without it");
            None
        }
    }
}

/// Starts spike forensics when the configuration asks for it, and says
/// in the log what it can do here or why it cannot run.
fn start_forensics(config: &Config, engine: &Engine) -> Recorder {
    let f = &config.forensics;
    if !f.enabled {
        return Recorder::disabled();
    }
    let cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
    let recorder = Recorder::start(f.settings(), &cpus);
    let journal = recorder.journal();
    let data = journal.lock();
    if data.available {
        info!(
            "forensics: capturing wake-ups {} or later on CPUs {} ({} KiB ring buffer per CPU) into {}",
            format_duration_ns(f.threshold_ns),
            format_cpu_list(&cpus),
            f.buffer_size_kb,
            f.dir.display()
        );
        for cap in &data.capabilities {
            let how = if cap.available { "yes" } else { "no" };
            info!("forensics: {}: {how}: {}", cap.name, cap.detail);
        }
    } else {
        warn!(
            "forensics is enabled but unavailable: {}; latencyd measures without it",
            data.reason.as_deref().unwrap_or("unknown reason")
        );
    }
    drop(data);
    recorder
}
