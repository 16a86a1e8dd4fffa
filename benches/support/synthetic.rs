//! Synthetic exporter states, built as the daemon builds its own but
//! without samplers: what the rendering benches and the fleet simulator
//! render with latencyd's own renderer.

use latencyd::config::Config;
use latencyd::daemon::state::{CpuView, MonitorState, Parts, ReloadRecord, SamplerView};
use latencyd::host::{CpuTopology, Fingerprint, HostInfo};
use latencyd::instruments::host_facts::{HostFactsPart, HostTrack};
use latencyd::rt::sys::Policy;

/// A running real-time sampler on `cpu`, last seen at `now_ns`.
pub fn sampler(cpu: usize, now_ns: u64) -> SamplerView {
    SamplerView {
        tid: 1000 + cpu as i32,
        policy: Policy::Fifo,
        priority: 80,
        realtime: true,
        last_sample_ns: now_ns,
        alive: true,
        online: true,
        sampling: true,
        unsampled_since_ns: None,
        running_since_ns: now_ns,
        stalls: 0,
        scheduling: Default::default(),
        scheduling_changes: 0,
    }
}

/// A machine of `n_cpus`: 32 CPUs a package and a NUMA node, 16 cores a
/// package, two SMT siblings a core.
pub fn topology(n_cpus: usize) -> Vec<CpuTopology> {
    (0..n_cpus)
        .map(|cpu| CpuTopology {
            cpu,
            package: Some((cpu / 32) as i64),
            core: Some((cpu % 16) as i64),
            node: Some(cpu / 32),
            smt_siblings: Some(format!("{},{}", cpu - cpu % 2, cpu - cpu % 2 + 1)),
        })
        .collect()
}

/// A state with an empty view of each of `n_cpus` CPUs, started at
/// `now_ns` (`CLOCK_MONOTONIC`) on a host with `facts`.
pub fn state(
    config: Config,
    host: HostInfo,
    facts: Fingerprint,
    n_cpus: usize,
    now_ns: u64,
) -> MonitorState {
    let cpus = (0..n_cpus)
        .map(|cpu| CpuView::new(cpu, &config, sampler(cpu, now_ns)))
        .collect();
    MonitorState {
        host,
        parts: {
            let mut parts = Parts::new(&config);
            if let Some(part) = parts.of_mut::<HostFactsPart>() {
                part.track =
                    HostTrack::new(facts, topology(n_cpus), latencyd::units::unix_now_ns(), 0);
            }
            parts
        },
        gaps: Default::default(),
        started_ns: now_ns,
        cpus,
        non_rt_reasons: vec![],
        unmeasured: vec![],
        reload: ReloadRecord::started(now_ns),
        listen: vec!["127.0.0.1:9479".parse().unwrap()],
        record: Default::default(),
        pm_qos_held_us: None,
        config,
    }
}
