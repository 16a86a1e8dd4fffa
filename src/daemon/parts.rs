//! The parts of the daemon as start-up brings them up, in its order
//! (`startup.rs`): the PM QoS hold, the engine and its samplers, the
//! exporter's pinning, the listeners, the CPUs left unmeasured, the
//! summary line, the registered instruments, the record, and the first
//! state.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tracing::{error, info, warn};

use super::error::StartupError;
use super::http::server;
use super::http::webconfig::Security;
use super::state::{CpuView, MonitorState, Parts, ReloadRecord, SamplerView};
use crate::config::Config;
use crate::cpulist::format_cpu_list;
use crate::host::HostInfo;
use crate::instruments::registry::INSTRUMENTS;
use crate::instruments::shape::Start;
use crate::record::{Accumulator, Context, Keeper};
use crate::rt::engine::{DEFAULT_START_TIMEOUT, Engine, EngineSpec, StartError, ThreadSetup};
use crate::rt::sampler::LoopPlan;
use crate::rt::sys::{self, CpuDmaLatencyHold};
use crate::sampling::{CpuSelection, Unmeasured, unmeasured_cpus};
use crate::stats::LatencyStats;
use crate::units::{format_duration_ns, unix_now_ns};

/// `measure.pm_qos`: `/dev/cpu_dma_latency` held at 0 while the daemon runs.
pub(super) fn hold_pm_qos(config: &Config) -> Result<Option<CpuDmaLatencyHold>, StartupError> {
    if !config.measure.pm_qos {
        return Ok(None);
    }
    CpuDmaLatencyHold::acquire(0).map(Some).map_err(|err| {
        StartupError::Permission(format!(
            "measure.pm_qos is true but {} cannot be held ({err}): it needs root or write \
             access to the device (see deploy/ for a udev rule)",
            sys::CPU_DMA_LATENCY_PATH
        ))
    })
}

/// One sampler per configured CPU; what keeps them from real-time said.
pub(super) fn start_engine(
    config: &Config,
    host: &HostInfo,
    stop: &Arc<AtomicBool>,
) -> Result<Engine, StartupError> {
    let measure = &config.measure;
    let plan = LoopPlan {
        interval_ns: measure.interval_ns,
        warmup_periods: measure.warmup_ns.div_ceil(measure.interval_ns),
        measure_periods: None,
        max_samples: None,
        publish_period_ns: super::collector::PUBLISH_PERIOD_NS,
    };
    let spec = EngineSpec {
        threads: ThreadSetup::one_per_cpu(&measure.cpu_list(host), measure.priority, plan),
        policy: measure.policy,
        allow_non_rt: !config.realtime.required,
        template: LatencyStats::new(measure.spike_threshold_ns, None),
        start_timeout: DEFAULT_START_TIMEOUT,
        limits: host.rt_limits(),
        tolerate_offline: true,
    };
    let engine = Engine::start(spec, Arc::clone(stop)).map_err(|err| match err {
        StartError::Permission(message) => StartupError::Permission(message),
        StartError::Failed(message) => StartupError::Failure(message),
    })?;
    for reason in &engine.non_rt_reasons {
        warn!("running without real-time guarantees: {reason}");
    }
    Ok(engine)
}

/// `export.cpus`: the calling (exporter's) thread pinned.
pub(super) fn pin_exporter(config: &Config) -> Result<(), StartupError> {
    if let CpuSelection::List(cpus) = &config.export.cpus {
        sys::set_current_thread_affinity(cpus).map_err(|err| {
            StartupError::Failure(format!(
                "cannot pin the exporter to CPUs {}: {err}",
                format_cpu_list(cpus)
            ))
        })?;
        info!("exporter pinned to CPUs {}", format_cpu_list(cpus));
    }
    Ok(())
}

/// The bound listeners handed to tokio, and the addresses they serve
/// (the port chosen for `:0`).
pub(super) fn async_listeners(
    listeners: Vec<TcpListener>,
    config: &Config,
) -> Result<(Vec<tokio::net::TcpListener>, Vec<SocketAddr>), StartupError> {
    let listeners = listeners
        .into_iter()
        .map(tokio::net::TcpListener::from_std)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| StartupError::Failure(format!("cannot use a listening socket: {err}")))?;
    let listen = (listeners.iter().zip(&config.export.listen))
        .map(|(l, configured)| l.local_addr().unwrap_or(*configured))
        .collect();
    Ok((listeners, listen))
}

/// The online CPUs without a sampler, each said at warn unless the
/// configuration left it out.
pub(super) fn unmeasured_said(host: &HostInfo, cpus: &[usize]) -> Vec<(usize, Unmeasured)> {
    let unmeasured = unmeasured_cpus(host, cpus);
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
    unmeasured
}

/// The line logged and sent as STATUS= once the daemon is ready.
pub(super) fn summary(
    cpus: &[usize],
    config: &Config,
    engine: &Engine,
    security: &Security,
    listen: &[SocketAddr],
) -> String {
    let scheme = if security.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let urls: Vec<String> = listen.iter().map(|a| format!("{scheme}://{a}")).collect();
    format!(
        "sampling CPUs {} every {} ({}), serving {} ({})",
        format_cpu_list(cpus),
        format_duration_ns(config.measure.interval_ns),
        if engine.non_rt_reasons.is_empty() {
            "real-time"
        } else {
            "NOT real-time"
        },
        urls.join(", "),
        security.describe(),
    )
}

/// The server's limits from `[export]`.
pub(super) fn limits(config: &Config) -> server::Limits {
    server::Limits {
        max_connections: config.export.max_connections,
        header_timeout: Duration::from_nanos(config.export.header_timeout_ns),
        request_timeout: Duration::from_nanos(config.export.request_timeout_ns),
    }
}

/// What the first state is made of besides the configuration and host.
pub(super) struct First<'a> {
    pub engine: &'a Engine,
    pub pm_qos_held_us: Option<i32>,
    pub unmeasured: Vec<(usize, Unmeasured)>,
    pub listen: Vec<SocketAddr>,
    /// The registered instruments' first parts.
    pub instruments: Parts,
    pub record: Option<&'a Keeper>,
}

impl First<'_> {
    /// The state as the server first serves it: every sampler started,
    /// none has woken yet.
    pub(super) fn state(self, config: Config, host: HostInfo) -> MonitorState {
        let started_ns = sys::monotonic_now_ns();
        let cpus = (self.engine.slots.iter())
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
                    scheduling: Default::default(),
                    scheduling_changes: 0,
                };
                CpuView::new(slot.cpu, &config, sampler)
            })
            .collect();
        MonitorState {
            started_ns,
            pm_qos_held_us: self.pm_qos_held_us,
            cpus,
            non_rt_reasons: self.engine.non_rt_reasons.clone(),
            unmeasured: self.unmeasured,
            reload: ReloadRecord::started(started_ns),
            listen: self.listen,
            record: self
                .record
                .map_or_else(|| Keeper::disabled().status(), Keeper::status),
            parts: self.instruments,
            gaps: Default::default(),
            host,
            config,
        }
    }
}

/// Starts the record's writer thread when the configuration asks for it.
pub(super) fn start_record(config: &Config, host: &HostInfo) -> Option<(Accumulator, Keeper)> {
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
    match Keeper::start(crate::record::Settings::of(r), context, unix_now_ns) {
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

/// The registered instruments started as their sections say: their
/// first parts, and the runs of those turned on.
pub(super) fn start_instruments(
    config: &Config,
    host: &HostInfo,
    measured: &[usize],
) -> (Parts, super::runs::Runs) {
    let start = Start {
        config,
        host,
        measured,
    };
    let mut parts = Vec::new();
    let mut runs = Vec::new();
    for entry in INSTRUMENTS {
        let started = (entry.start)(&start);
        parts.push((entry.name, started.part));
        runs.extend(started.run.map(|run| (entry.name, run)));
    }
    (Parts::started(parts), runs)
}
