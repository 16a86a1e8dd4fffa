//! The daemon's start-up order: configuration and host checks, the
//! listener, logging, the runtime, then (`parts.rs`) PM QoS, the engine,
//! the exporter's pinning, the registered instruments (forensics first), the
//! record and the first state; the server, signals, READY=1; then the event loop; then
//! the orderly stop (`shutdown.rs`) and the exit code.

use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tracing::{error, info, warn};

use super::cpu_watch::CpuWatch;
use super::error::StartupError;
use super::event_loop::{self, Signals};
use super::http::webconfig::Security;
use super::http::{self, server};
use super::render::metrics::SYSTEM_CLOCKS;
use super::state::lock;
use super::{logging, notify, parts, shutdown};
use crate::cli::RunArgs;
use crate::config::{self, Config, Sources};
use crate::host::HostInfo;
use crate::sampling::CpuSelection;
use crate::units::unix_now_ns;

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
    let checked = crate::instruments::registry::load_config(&sources)
        .map_err(StartupError::Configs)
        .and_then(|config| {
            super::check::check_whole(&config, &HostInfo::detect())?;
            Ok(config)
        });
    match checked {
        Ok(config) => {
            print!("{}", config.to_annotated_toml());
            ExitCode::SUCCESS
        }
        Err(err) => {
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
    let config =
        crate::instruments::registry::load_config(&sources).map_err(StartupError::Configs)?;
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
    let served = runtime.block_on(serve(config, host, sources, listeners, security, log_level));
    // A blocking job that never ends (a reload past its deadline, stuck in
    // the kernel) must not hold the exit: dropping the runtime would wait
    // for it for ever.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    served
}

/// How long the exit waits for the blocking pool's jobs still running.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

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
    let pm_qos_hold = parts::hold_pm_qos(&config)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut engine = parts::start_engine(&config, &host, &stop)?;
    // Pinned after the samplers started: they pin themselves, and the
    // exporter keeps its system calls and cache traffic on housekeeping CPUs.
    parts::pin_exporter(&config)?;
    let (listeners, listen) = parts::async_listeners(listeners, &config)?;
    let cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
    let unmeasured = parts::unmeasured_said(&host, &cpus);
    let summary = parts::summary(&cpus, &config, &engine, &security, &listen);
    let limits = parts::limits(&config);
    let interval_ns = config.measure.interval_ns;
    // After the pinning: the instruments' threads (forensics' recorder,
    // the observer's reader) and the record's run where the exporter does.
    let (instruments, runs) = parts::start_instruments(&config, &host, &cpus);
    let record = parts::start_record(&config, &host);
    let first = parts::First {
        engine: &engine,
        pm_qos_held_us: pm_qos_hold.as_ref().map(|hold| hold.latency_us),
        unmeasured,
        listen,
        instruments,
        record: record.as_ref().map(|(_, keeper)| keeper),
    };
    let state = Arc::new(Mutex::new(first.state(config, host)));
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

    let mut collector = {
        let s = lock(&state);
        let grows = s.config.measure.cpus == CpuSelection::All;
        let cpu_watch = CpuWatch::new(grows, s.host.allowed_cpus.clone());
        super::collector::Collector::new(runs, record, cpu_watch, unix_now_ns)
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
    shutdown::stop(engine, collector, &state, interval_ns, server).await;
    drop(pm_qos_hold);
    Ok(exit_code)
}
