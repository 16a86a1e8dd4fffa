//! `latencyd run`: the long-running service.
//!
//! Start-up does everything that can fail for a reason the operator must
//! fix before any thread starts: load and check the configuration (exit
//! 78, EX_CONFIG), bind the listener (a port in use is a configuration
//! error too). Then samplers start (exit 77, EX_NOPERM, if real-time
//! scheduling or memory locking is refused and required), the HTTP server
//! starts, and systemd hears READY=1.
//!
//! The exporter runs on a current-thread tokio runtime on the main thread:
//! one thread for the collector tick, the HTTP server, signals and the
//! watchdog, so the daemon adds a single ordinary thread next to its
//! samplers. The collector drains the samplers' handoffs every 250 ms into
//! `MonitorState`, which the HTTP handlers read.

pub mod http;
mod logging;
pub mod metrics;
mod notify;
pub mod page;
pub mod server;
pub mod state;

use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::signal::unix::{SignalKind, signal};
use tracing::{error, info, warn};

use crate::cli::RunArgs;
use crate::config::{self, Config, CpuSelection, EX_CONFIG, Sources};
use crate::cpulist::format_cpu_list;
use crate::engine::{Engine, EngineSpec};
use crate::host::HostInfo;
use crate::sampler::{FailedStep, LoopPlan, SamplerState};
use crate::stats::LatencyStats;
use crate::sys::{self, CpuDmaLatencyHold};
use crate::units::{NS_PER_SEC, format_duration_ns};
use state::{CpuView, MonitorState, SamplerView};

/// sysexits.h's EX_NOPERM: real-time scheduling or memory locking was
/// refused and `realtime.required` is true.
pub const EX_NOPERM: u8 = 77;
/// Samplers hand over their interval once a second: the window maximum
/// and `/metrics` are at most that old, and the collector's merge work
/// stays small even with hundreds of CPUs.
const PUBLISH_PERIOD_NS: u64 = NS_PER_SEC;
/// How often the collector drains the handoffs and copies heartbeats.
const COLLECT_PERIOD: Duration = Duration::from_millis(250);
/// How long a dead sampler is shown as such on /healthz before exiting.
const DEATH_GRACE: Duration = Duration::from_secs(1);
/// How long past one interval shutdown waits for the samplers to return.
const JOIN_SLACK: Duration = Duration::from_millis(300);
/// How long a CPU may be listed online while its sampler cannot be
/// restarted before that is logged.
const RESTART_PATIENCE: Duration = Duration::from_secs(10);
/// How often STATUS= is refreshed for `systemctl status`.
const STATUS_PERIOD: Duration = Duration::from_secs(10);

pub fn main(args: &RunArgs) -> ExitCode {
    let sources = args.sources();
    let config = match Config::load(&sources) {
        Ok(config) => config,
        Err(err) => return config_error(&err),
    };
    let host = HostInfo::detect();
    if let Err(err) = config.check_against(&host) {
        return config_error(&err);
    }
    let security = match config.web_security() {
        Ok(security) => security,
        Err(err) => return config_error(&err),
    };
    // Bound before any thread starts, so a port in use fails like any other
    // configuration error.
    let listener = match TcpListener::bind(config.export.listen).and_then(|l| {
        l.set_nonblocking(true)?;
        Ok(l)
    }) {
        Ok(listener) => listener,
        Err(err) => {
            return config_error(&config::key_error(
                &config.effective,
                "export.listen",
                format!("cannot listen there: {err}"),
            ));
        }
    };
    let log_level = match logging::init(&config.log) {
        Ok(handle) => handle,
        Err(err) => {
            eprintln!("latencyd: cannot set up logging: {err}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            error!("cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(config, host, sources, listener, security, log_level))
}

fn config_error(err: &config::ConfigError) -> ExitCode {
    eprintln!("latencyd: configuration error: {err}");
    ExitCode::from(EX_CONFIG)
}

/// `latencyd check-config FILE`: validate and print the effective
/// configuration with the source of every value.
pub fn check_config(file: &std::path::Path) -> ExitCode {
    let sources = Sources {
        file: Some(file.to_path_buf()),
        flags: vec![],
    };
    let config = match Config::load(&sources) {
        Ok(config) => config,
        Err(err) => return config_error(&err),
    };
    if let Err(err) = config.check_against(&HostInfo::detect()) {
        return config_error(&err);
    }
    if let Err(err) = config.web_security() {
        return config_error(&err);
    }
    print!("{}", config.to_annotated_toml());
    ExitCode::SUCCESS
}

async fn serve(
    config: Config,
    host: HostInfo,
    sources: Sources,
    listener: TcpListener,
    security: crate::webconfig::Security,
    log_level: logging::LevelHandle,
) -> ExitCode {
    let measure = &config.measure;
    let pm_qos_hold = if measure.pm_qos {
        match CpuDmaLatencyHold::acquire(0) {
            Ok(hold) => Some(hold),
            Err(err) => {
                error!(
                    "measure.pm_qos is true but {} cannot be held ({err}): it needs root or \
                     write access to the device (see deploy/ for a udev rule)",
                    sys::CPU_DMA_LATENCY_PATH
                );
                return ExitCode::from(EX_NOPERM);
            }
        }
    } else {
        None
    };

    let template = LatencyStats::new(measure.spike_threshold_ns, None);
    let spec = EngineSpec {
        cpus: measure.cpu_list(&host),
        policy: measure.policy,
        priority: measure.priority,
        plan: LoopPlan {
            interval_ns: measure.interval_ns,
            warmup_periods: measure.warmup_ns.div_ceil(measure.interval_ns),
            measure_periods: None,
            max_samples: None,
            publish_every_periods: (PUBLISH_PERIOD_NS / measure.interval_ns).max(1),
        },
        allow_non_rt: !config.realtime.required,
        template: template.clone(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut engine = match Engine::start(spec, &host, Arc::clone(&stop)) {
        Ok(engine) => engine,
        Err(err) => {
            error!("{err}");
            return if err.permission {
                ExitCode::from(EX_NOPERM)
            } else {
                ExitCode::FAILURE
            };
        }
    };
    for reason in &engine.non_rt_reasons {
        warn!("running without real-time guarantees: {reason}");
    }
    // Pinned after the samplers started: they pin themselves, and the
    // exporter keeps its system calls and cache traffic on housekeeping CPUs.
    if let CpuSelection::List(cpus) = &config.export.cpus {
        if let Err(err) = sys::set_current_thread_affinity(cpus) {
            error!(
                "cannot pin the exporter to CPUs {}: {err}",
                format_cpu_list(cpus)
            );
            return ExitCode::FAILURE;
        }
        info!("exporter pinned to CPUs {}", format_cpu_list(cpus));
    }

    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(err) => {
            error!("cannot use the listening socket: {err}");
            return ExitCode::FAILURE;
        }
    };
    let listen = listener.local_addr().unwrap_or(config.export.listen);
    let cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
    let state = Arc::new(Mutex::new(MonitorState {
        started_wall: SystemTime::now(),
        started_ns: sys::monotonic_now_ns(),
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
                    online: true,
                };
                CpuView::new(slot.cpu, &config, sampler)
            })
            .collect(),
        non_rt_reasons: engine.non_rt_reasons.clone(),
        reload_failures: 0,
        listen,
        host,
        config,
    }));

    let mut app = http::AppState::new(Arc::clone(&state), true);
    let served_as = security.describe();
    let tls = security.tls.is_some();
    app.security = Arc::new(std::sync::RwLock::new(Arc::new(security)));
    let security = Arc::clone(&app.security);
    let limits = {
        let export = &lock(&state).config.export;
        server::Limits {
            max_connections: export.max_connections,
            header_timeout: Duration::from_nanos(export.header_timeout_ns),
            request_timeout: Duration::from_nanos(export.request_timeout_ns),
        }
    };
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(server::serve(
        listener,
        http::router(app),
        Arc::clone(&security),
        limits,
        shutdown_rx,
    ));
    let summary = {
        let s = lock(&state);
        format!(
            "sampling CPUs {} every {} ({}), serving {}://{listen} ({served_as})",
            format_cpu_list(&cpus),
            format_duration_ns(s.config.measure.interval_ns),
            if s.non_rt_reasons.is_empty() {
                "real-time"
            } else {
                "NOT real-time"
            },
            if tls { "https" } else { "http" },
        )
    };
    // Signal handlers first: a SIGTERM sent as soon as READY=1 (or the
    // log line) is seen must find them, or it would kill the process
    // without the orderly shutdown.
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(err) => {
            error!("cannot watch for signals: {err}");
            return ExitCode::FAILURE;
        }
    };
    info!("{summary}");
    notify::ready(&summary);

    let interval_ns = lock(&state).config.measure.interval_ns;
    let exit_code = run_loop(
        &mut engine,
        &state,
        &sources,
        &log_level,
        &security,
        signals,
    )
    .await;

    notify::stopping();
    stop.store(true, Ordering::Relaxed);
    let _ = shutdown_tx.send(true);
    let started = Instant::now();
    // Samplers notice the flag at their next wake-up (at most one interval,
    // at most 1 s by configuration); their last intervals are kept.
    let now = sys::monotonic_now_ns();
    let timeout = Duration::from_nanos(interval_ns) + JOIN_SLACK;
    match engine.finish(timeout, |idx, interval| {
        lock(&state).cpus[idx].absorb(interval, now)
    }) {
        Ok(outcome) => {
            for cpu in outcome.stuck {
                error!(
                    "the sampler on CPU {cpu} did not stop within {timeout:?}; exiting without it"
                );
            }
        }
        Err(err) => error!("a sampler could not be joined: {err}"),
    }
    // In-flight requests get a moment; then the server is dropped.
    let _ = tokio::time::timeout(Duration::from_millis(300), server).await;
    drop(pm_qos_hold);
    info!("stopped in {:?}", started.elapsed());
    exit_code
}

fn lock(state: &Mutex<MonitorState>) -> std::sync::MutexGuard<'_, MonitorState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The signals the daemon handles.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }
}

/// Runs until SIGTERM/SIGINT (exit 0) or a dead sampler (exit 1).
async fn run_loop(
    engine: &mut Engine,
    state: &Mutex<MonitorState>,
    sources: &Sources,
    log_level: &logging::LevelHandle,
    security: &http::SharedSecurity,
    mut signals: Signals,
) -> ExitCode {
    let mut collect_tick = tokio::time::interval(COLLECT_PERIOD);
    let mut status_tick = tokio::time::interval(STATUS_PERIOD);
    // systemd wants a ping within WatchdogSec; ping at half of it, and only
    // while every sampler's heartbeat advances.
    let mut watchdog_tick = notify::watchdog_interval().map(|d| tokio::time::interval(d / 2));
    let mut dying_since: Option<Instant> = None;
    // CPUs whose sampler could not be restarted yet: since when, and
    // whether that was logged.
    let mut restart_errors: std::collections::HashMap<usize, (Instant, bool)> =
        std::collections::HashMap::new();
    loop {
        tokio::select! {
            _ = collect_tick.tick() => {
                match collect(engine, state) {
                    Ok(found) => {
                        for (cpu, why) in found.dead {
                            error!("the sampler on CPU {cpu} has died ({why}); /healthz reports it and latencyd exits so that it is restarted");
                            dying_since.get_or_insert_with(Instant::now);
                        }
                        for cpu in found.offline {
                            warn!("CPU {cpu} went offline (or the sampler was moved off it): its sampler stopped; sampling resumes when it is back online");
                        }
                        for cpu in found.resumed {
                            info!("CPU {cpu} is back online: sampling it again");
                            restart_errors.remove(&cpu);
                        }
                        for (cpu, why) in found.not_resumed {
                            // While a CPU goes down it may still be listed
                            // online; only a failure that lasts is news.
                            let since = restart_errors.entry(cpu).or_insert_with(|| (Instant::now(), false));
                            if !since.1 && since.0.elapsed() >= RESTART_PATIENCE {
                                warn!("CPU {cpu} is online but its sampler has not started for {RESTART_PATIENCE:?} (still retrying): {why}");
                                since.1 = true;
                            }
                        }
                    }
                    Err(err) => {
                        error!("cannot merge a sampler's interval: {err}");
                        return ExitCode::FAILURE;
                    }
                }
                if dying_since.is_some_and(|since| since.elapsed() >= DEATH_GRACE) {
                    return ExitCode::FAILURE;
                }
            }
            _ = status_tick.tick() => notify::status(&status_line(&lock(state))),
            _ = async {
                match watchdog_tick.as_mut() {
                    Some(tick) => tick.tick().await,
                    None => std::future::pending().await,
                }
            } => {
                let health = lock(state).health(sys::monotonic_now_ns());
                if health.healthy {
                    notify::watchdog();
                } else {
                    warn!("withholding the watchdog ping: samplers not advancing: {:?}", health.stale);
                }
            }
            _ = signals.hup.recv() => reload(state, sources, log_level, security),
            _ = signals.term.recv() => { info!("SIGTERM: stopping"); return ExitCode::SUCCESS; }
            _ = signals.int.recv() => { info!("SIGINT: stopping"); return ExitCode::SUCCESS; }
        }
    }
}

/// What a collector tick found.
#[derive(Debug, Default)]
struct Collected {
    /// CPUs whose sampler has newly died, and why.
    dead: Vec<(usize, String)>,
    /// CPUs whose sampler stopped because the CPU went offline.
    offline: Vec<usize>,
    /// CPUs back online whose new sampler runs.
    resumed: Vec<usize>,
    /// CPUs back online whose sampler could not be started yet, and why.
    not_resumed: Vec<(usize, String)>,
}

/// Drains every sampler's handoff into the state and copies the samplers'
/// heartbeats; joins the samplers whose CPU went offline and starts new
/// ones on CPUs that came back.
fn collect(
    engine: &mut Engine,
    state: &Mutex<MonitorState>,
) -> Result<Collected, Box<dyn std::error::Error>> {
    let now = sys::monotonic_now_ns();
    let mut s = lock(state);
    engine.drain(|idx, interval| s.cpus[idx].absorb(interval, now))?;
    let mut found = Collected {
        offline: engine.reap_offline(|idx, interval| s.cpus[idx].absorb(interval, now))?,
        ..Collected::default()
    };
    let waiting: Vec<usize> = (0..engine.slots.len())
        .filter(|&idx| engine.slots[idx].is_offline() && engine.slots[idx].is_finished())
        .collect();
    if !waiting.is_empty() {
        let online = crate::host::online_cpus().unwrap_or_default();
        for idx in waiting {
            let cpu = engine.slots[idx].cpu;
            if !online.contains(&cpu) {
                continue;
            }
            match engine.restart(idx, &s.host) {
                Ok(()) => found.resumed.push(cpu),
                Err(err) => found.not_resumed.push((cpu, err.message)),
            }
        }
    }
    for (slot, view) in engine.slots.iter().zip(s.cpus.iter_mut()) {
        let shared = slot.shared();
        // Relaxed: the heartbeat is a liveness hint ordering nothing else.
        view.sampler.last_sample_ns = shared.heartbeat_ns.load(Ordering::Relaxed);
        view.sampler.online = !slot.is_offline();
        view.sampler.tid = shared.tid();
        view.sampler.realtime = slot.realtime;
        let died =
            (slot.is_finished() && !slot.is_offline()) || shared.state() == SamplerState::Failed;
        if died && view.sampler.alive {
            view.sampler.alive = false;
            let why = match shared.failure() {
                (FailedStep::Sleep, err) => format!("clock_nanosleep failed: {err}"),
                (FailedStep::Affinity, err) => format!("pinning it failed: {err}"),
                (FailedStep::Policy, err) => format!("its scheduling policy was refused: {err}"),
                (FailedStep::None, _) => "its thread ended".to_string(),
            };
            found.dead.push((slot.cpu, why));
        }
    }
    Ok(found)
}

/// One line for `systemctl status`.
fn status_line(s: &MonitorState) -> String {
    let now = sys::monotonic_now_ns();
    let max = s.cpus.iter().map(|v| v.lifetime.max_ns).max().unwrap_or(0);
    let window = s.cpus.iter().filter_map(|v| v.window.max(now)).max();
    let missed: u64 = s.cpus.iter().map(|v| v.lifetime.missed).sum();
    format!(
        "{} CPUs: max {}us, last {}s max {}, {missed} missed{}",
        s.cpus.len(),
        max / 1_000,
        s.config.export.max_window_ns / NS_PER_SEC,
        window.map_or_else(|| "-".to_string(), |w| format!("{}us", w / 1_000)),
        if s.health(now).healthy {
            ""
        } else {
            ", UNHEALTHY"
        },
    )
}

/// SIGHUP: reads the configuration again. Keys that can change while
/// running are applied; the others are logged as needing a restart. The
/// web configuration file is read again too (renewed certificates, changed
/// users), and applies to new connections. An invalid configuration is
/// refused and counted; the running one stays.
fn reload(
    state: &Mutex<MonitorState>,
    sources: &Sources,
    log_level: &logging::LevelHandle,
    security: &http::SharedSecurity,
) {
    notify::reloading();
    let mut s = lock(state);
    let loaded = Config::load(sources).and_then(|new| {
        new.check_against(&s.host)?;
        let web = new.web_security()?;
        Ok((new, web))
    });
    match loaded {
        Err(err) => {
            s.reload_failures += 1;
            error!(
                "configuration reload refused, still running on the previous configuration: {err}"
            );
        }
        Ok((new, web)) => {
            // Switching between TLS and plain HTTP changes what clients
            // must do, so it waits for a restart; anything else applies to
            // the next connection.
            let was_tls = security
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .tls
                .is_some();
            let web_applies = web.tls.is_some() == was_tls;
            if web_applies {
                info!("reload: web configuration: {}", web.describe());
                *security.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(web);
            } else {
                warn!(
                    "reload: the new web configuration {} TLS; restart latencyd to switch \
                     between TLS and plain HTTP (the previous one stays in force)",
                    if was_tls { "drops" } else { "adds" }
                );
            }
            let now = sys::monotonic_now_ns();
            for key in s.config.changed_keys(&new) {
                let applied = match key.as_str() {
                    "log.level" => {
                        let applied = log_level
                            .modify(|f| *f = logging::level_filter(new.log.level))
                            .is_ok();
                        if applied {
                            s.config.log.level = new.log.level;
                        }
                        applied
                    }
                    "export.max_window" => {
                        s.config.export.max_window_ns = new.export.max_window_ns;
                        for view in &mut s.cpus {
                            view.window = view.window.resized(new.export.max_window_ns, now);
                            view.recent = view.recent.resized(new.export.max_window_ns, now);
                        }
                        true
                    }
                    "export.per_cpu_histograms" => {
                        s.config.export.per_cpu_histograms = new.export.per_cpu_histograms;
                        true
                    }
                    // Applied above unless TLS would be switched.
                    "export.web_config_file" => {
                        if web_applies {
                            s.config.export.web_config_file = new.export.web_config_file.clone();
                        }
                        web_applies
                    }
                    _ => false,
                };
                if applied {
                    if let Some(e) = new.effective.get(&key) {
                        s.config.effective.insert(key.clone(), e.clone());
                    }
                    info!("reload: applied {key} = {}", new.effective[&key].toml_value);
                } else {
                    warn!(
                        "reload: {key} changed to {}; restart latencyd to apply it",
                        new.effective[&key].toml_value
                    );
                }
            }
        }
    }
    drop(s);
    notify::ready(&status_line(&lock(state)));
}
