//! The simulated fleet itself, shared by the simulator's binary
//! (`benches/fleet_sim.rs`, which says what it simulates) and the test
//! of the alerts across a fleet (`tests/full/fleet_alerts.rs`): hosts drawn
//! from a seed, their states evolved every second, each served as its
//! own `/metrics` by latencyd's renderer.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use latencyd::daemon::render::clock::SYSTEM_CLOCKS;
use latencyd::daemon::render::metrics;
use latencyd::daemon::state::MonitorState;
use latencyd::host::{Fact, Fingerprint, HostInfo};
use latencyd::instruments::host_facts::{ChangeSeen, HostFactsPart};
use latencyd::rt::sys;
use latencyd::stats::LatencyStats;
use latencyd::units::unix_now_ns;
#[path = "synthetic.rs"]
mod synthetic;

const CPU_COUNTS: [(usize, u64); 7] = [
    (2, 20),
    (4, 25),
    (8, 20),
    (16, 15),
    (32, 10),
    (64, 6),
    (128, 4),
];
pub const KERNELS: [&str; 3] = [
    "6.1.0-37-rt-amd64",
    "6.12.38+deb13-rt-amd64",
    "6.12.38+deb13-amd64",
];
const UPGRADED: &str = "6.12.41+deb13-rt-amd64";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Story {
    Steady,
    Spike,
    Regress,
    Upgrade,
    Restart,
    Stale,
    CpuOffline,
}

/// Per cent of hosts per story (the rest are steady).
const STORIES: [(Story, u64); 6] = [
    (Story::Spike, 3),
    (Story::Regress, 2),
    (Story::Upgrade, 2),
    (Story::Restart, 2),
    (Story::Stale, 2),
    (Story::CpuOffline, 2),
];
/// What to simulate.
pub struct Spec {
    pub hosts: usize,
    pub seed: u64,
    /// Events happen between these seconds after start.
    pub events_from: u64,
    pub events_to: u64,
    /// How long a stale host answers 503.
    pub stale_secs: u64,
    /// Samples a CPU a second.
    pub rate: u64,
    /// No host has more CPUs (the CPU counts above it are left out).
    pub max_cpus: usize,
    /// `export.per_cpu_histograms`: the latency histogram per CPU (the
    /// default) or once per host.
    pub per_cpu_histograms: bool,
}

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn weighted<T: Copy>(&mut self, table: &[(T, u64)]) -> T {
        let mut pick = self.below(table.iter().map(|(_, w)| w).sum());
        for &(item, weight) in table {
            if pick < weight {
                return item;
            }
            pick -= weight;
        }
        table[0].0
    }
}

/// One simulated host.
pub struct Host {
    pub cpus: usize,
    pub kernel: usize,
    pub site: usize,
    pub story: Story,
    /// Seconds after start of its event (none for steady hosts).
    pub at_s: u64,
    /// The CPU a spike or an offline CPU is on, and the spike's size.
    pub cpu: usize,
    pub spike_ns: u64,
    /// Its state in `Fleet::sims`.
    pub sim: usize,
}

/// A state and what drives it.
pub struct Sim {
    state: Mutex<MonitorState>,
    kernel: usize,
    /// A longer tail from its host's upgrade on (`Regress`).
    regressed: AtomicBool,
    /// The latest text rendered, and the second it was rendered in.
    text: Mutex<(u64, Arc<String>)>,
}

pub struct Fleet {
    pub hosts: Vec<Host>,
    pub sims: Vec<Sim>,
    pub started: std::time::Instant,
    pub stale_secs: u64,
    pub rate: u64,
    pub per_cpu_histograms: bool,
    pub base_facts: Fingerprint,
    pub host_info: HostInfo,
    /// The process metrics every host serves beside its own (this
    /// process's: the same series a daemon has).
    pub process: prometheus::Registry,
}

fn facts(base: &Fingerprint, kernel: &str) -> Fingerprint {
    let mut facts = base.clone();
    facts.insert("kernel.release", Fact::known(kernel));
    facts
}

fn new_state(
    fleet_facts: &Fingerprint,
    info: &HostInfo,
    cpus: usize,
    kernel: &str,
    per_cpu_histograms: bool,
) -> MonitorState {
    let mut config = latencyd::instruments::registry::builtin_config();
    config.export.per_cpu_histograms = per_cpu_histograms;
    let now = sys::monotonic_now_ns();
    synthetic::state(config, info.clone(), facts(fleet_facts, kernel), cpus, now)
}

/// Draws the fleet from the seed; steady and stale hosts share a state
/// per CPU count and kernel.
pub fn build(o: &Spec) -> Fleet {
    let mut rng = Rng(o.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let base_facts = latencyd::host::FactReader::live(&[0]).read();
    let host_info = HostInfo::detect();
    let mut stories: Vec<(Story, u64)> = STORIES.to_vec();
    stories.push((
        Story::Steady,
        100 - STORIES.iter().map(|(_, p)| p).sum::<u64>(),
    ));
    let mut shared: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let (mut hosts, mut sims) = (Vec::with_capacity(o.hosts), Vec::new());
    for _ in 0..o.hosts {
        let counts: Vec<_> = CPU_COUNTS
            .iter()
            .copied()
            .filter(|(n, _)| *n <= o.max_cpus)
            .collect();
        let cpus = rng.weighted(&counts);
        let kernel = rng.below(KERNELS.len() as u64) as usize;
        let story = rng.weighted(&stories);
        let at_s = o.events_from + rng.below(o.events_to - o.events_from);
        let cpu = rng.below(cpus as u64) as usize;
        let spike_ns = 300_000 + rng.below(4_700_000);
        let mut add_sim = || {
            sims.push(Sim {
                state: Mutex::new(new_state(
                    &base_facts,
                    &host_info,
                    cpus,
                    KERNELS[kernel],
                    o.per_cpu_histograms,
                )),
                kernel,
                regressed: AtomicBool::new(false),
                text: Mutex::new((u64::MAX, Arc::new(String::new()))),
            });
            sims.len() - 1
        };
        let sim = match story {
            Story::Steady | Story::Stale => *shared.entry((cpus, kernel)).or_insert_with(add_sim),
            _ => add_sim(),
        };
        let site = rng.below(10) as usize;
        hosts.push(Host {
            cpus,
            kernel,
            site,
            story,
            at_s,
            cpu,
            spike_ns,
            sim,
        });
    }
    Fleet {
        hosts,
        sims,
        started: std::time::Instant::now(),
        stale_secs: o.stale_secs,
        rate: o.rate,
        per_cpu_histograms: o.per_cpu_histograms,
        base_facts,
        host_info,
        process: metrics::process_registry(true),
    }
}

/// A kernel's latencies: a body of a few µs, a tail below the 100 µs
/// budget (four times as long once regressed, which crosses it).
fn shape(kernel: usize, regressed: bool) -> (u64, u64) {
    let generic = KERNELS[kernel].ends_with("-amd64") && !KERNELS[kernel].contains("-rt-");
    let (body, tail) = if generic {
        (20_000, 80_000)
    } else {
        (10_000, 45_000)
    };
    (body, if regressed { tail * 4 } else { tail })
}

/// A kernel's latencies in parts, each (wake-ups in 1000, width above
/// 2 µs): 1 anywhere in the tail, 30 in its first half, the rest in the
/// body.
fn parts(kernel: usize, regressed: bool) -> [(u64, u64); 3] {
    let (body, tail) = shape(kernel, regressed);
    [(1, tail), (30, tail / 2), (969, body)]
}

/// One wake-up latency of a kernel, from its parts.
fn latency_ns(rng: &mut Rng, kernel: usize, regressed: bool) -> u64 {
    let x = rng.next();
    let mut pick = x % 1000;
    for (per_mille, width) in parts(kernel, regressed) {
        if pick < per_mille {
            return 2_000 + x % width;
        }
        pick -= per_mille;
    }
    unreachable!("the parts add up to 1000")
}

/// The worst of `wakeups` wake-ups as `latency_ns` draws them, without
/// drawing each: how many fall in each part of the distribution (a
/// Poisson count), then the largest of that many uniform draws over the
/// part (its width times U^(1/k)).
pub fn window_max_ns(rng: &mut Rng, kernel: usize, regressed: bool, wakeups: u64) -> u64 {
    let mut worst = 0;
    for (per_mille, width) in parts(kernel, regressed) {
        let k = poisson(rng, (per_mille * wakeups) as f64 / 1000.0);
        if k > 0 {
            let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            worst = worst.max((width as f64 * u.powf(1.0 / k as f64)) as u64);
        }
    }
    2_000 + worst
}

/// A Poisson count of the given mean (Knuth's method; a mean over 500
/// stands for itself: the largest of that many uniform draws is the top
/// of the range within 1 %).
fn poisson(rng: &mut Rng, mean: f64) -> u64 {
    if mean > 500.0 {
        return mean.round() as u64;
    }
    let (limit, mut product, mut k) = ((-mean).exp(), 1.0, 0);
    loop {
        product *= (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        if product <= limit {
            return k;
        }
        k += 1;
    }
}

/// One second of every state: the events due in `seconds`, then an
/// interval of samples on every CPU whose sampler runs.
pub fn tick(fleet: &Fleet, seconds: std::ops::Range<u64>, rng: &mut Rng) {
    let mut spikes: BTreeMap<usize, Vec<(usize, u64)>> = BTreeMap::new();
    for host in fleet.hosts.iter().filter(|h| seconds.contains(&h.at_s)) {
        let sim = &fleet.sims[host.sim];
        let mut state = sim.state.lock().unwrap();
        let upgrade = |state: &mut MonitorState| {
            let now = unix_now_ns();
            let facts = facts(&fleet.base_facts, UPGRADED);
            let topology = synthetic::topology(host.cpus);
            if let Some(part) = state.parts.of_mut::<HostFactsPart>() {
                part.track
                    .take_read(facts, topology, now, 0, ChangeSeen::Running);
            }
        };
        match host.story {
            Story::Spike => spikes
                .entry(host.sim)
                .or_default()
                .push((host.cpu, host.spike_ns)),
            Story::Regress => {
                upgrade(&mut state);
                sim.regressed.store(true, Ordering::Relaxed);
            }
            Story::Upgrade => upgrade(&mut state),
            Story::Restart => {
                *state = new_state(
                    &fleet.base_facts,
                    &fleet.host_info,
                    host.cpus,
                    KERNELS[host.kernel],
                    fleet.per_cpu_histograms,
                );
            }
            Story::CpuOffline => {
                let sampler = &mut state.cpus[host.cpu].sampler;
                (sampler.online, sampler.sampling, sampler.alive) = (false, false, false);
            }
            Story::Steady | Story::Stale => {}
        }
    }
    let now = sys::monotonic_now_ns();
    for (idx, sim) in fleet.sims.iter().enumerate() {
        let regressed = sim.regressed.load(Ordering::Relaxed);
        let mut state = sim.state.lock().unwrap();
        let threshold = state.config.measure.spike_threshold_ns;
        for view in state.cpus.iter_mut().filter(|v| v.sampler.sampling) {
            let mut interval = LatencyStats::for_sampler(threshold, None);
            for i in 0..fleet.rate {
                let at = now - (fleet.rate - i) * 1_000_000_000 / fleet.rate;
                interval.record_at(latency_ns(rng, sim.kernel, regressed), i, at);
            }
            for &(_, ns) in spikes
                .get(&idx)
                .into_iter()
                .flatten()
                .filter(|(c, _)| *c == view.cpu)
            {
                interval.record_at(ns, fleet.rate, now);
                // A wake-up that late slept through whole 1 ms periods.
                interval.missed += ns / 1_000_000;
            }
            view.absorb(&interval)
                .expect("one shape for every interval");
            view.sampler.last_sample_ns = now;
        }
    }
}

/// Host N's `/metrics`: 503 while it is stale, else its state rendered
/// (once a second for a state several hosts share).
async fn host_metrics(State(fleet): State<Arc<Fleet>>, Path(n): Path<usize>) -> Response {
    let Some(host) = fleet.hosts.get(n) else {
        return (StatusCode::NOT_FOUND, "no such host\n").into_response();
    };
    let second = fleet.started.elapsed().as_secs();
    if host.story == Story::Stale && (host.at_s..host.at_s + fleet.stale_secs).contains(&second) {
        return (StatusCode::SERVICE_UNAVAILABLE, "stale\n").into_response();
    }
    let sim = &fleet.sims[host.sim];
    let mut cached = sim.text.lock().unwrap();
    if cached.0 != second {
        *cached = (second, Arc::new(render(fleet.as_ref(), n)));
    }
    let text = Arc::clone(&cached.1);
    drop(cached);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text.as_str().to_owned(),
    )
        .into_response()
}

/// Host N's state as latencyd renders its `/metrics`.
pub fn render(fleet: &Fleet, n: usize) -> String {
    let state = fleet.sims[fleet.hosts[n].sim].state.lock().unwrap();
    let mut families = metrics::families(&state, SYSTEM_CLOCKS.read());
    families.extend(fleet.process.gather());
    metrics::render_families(&families).expect("the text encoder takes any family")
}

pub fn instance(n: usize) -> String {
    format!("host-{n:05}:9479")
}

/// `targets.json` for Prometheus' file_sd and `truth.json`: every host's
/// story, and the Unix time of its event.
pub fn write_files(
    fleet: &Fleet,
    o: &Spec,
    out: &std::path::Path,
    addr: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let start_unix = unix_now_ns() / 1_000_000_000;
    let targets: Vec<_> = (0..fleet.hosts.len())
        .map(|n| {
            serde_json::json!({
                "targets": [addr],
                "labels": {
                    "__metrics_path__": format!("/host/{n}/metrics"),
                    "instance": instance(n),
                    "site": format!("site-{}", fleet.hosts[n].site),
                },
            })
        })
        .collect();
    let truth: Vec<_> = fleet
        .hosts
        .iter()
        .enumerate()
        .map(|(n, h)| {
            serde_json::json!({
                "instance": instance(n),
                "cpus": h.cpus,
                "kernel": KERNELS[h.kernel],
                "story": format!("{:?}", h.story).to_lowercase(),
                "at_unix": (h.story != Story::Steady).then_some(start_unix + h.at_s),
                "cpu": matches!(h.story, Story::Spike | Story::CpuOffline).then_some(h.cpu),
                "spike_seconds": (h.story == Story::Spike).then_some(h.spike_ns as f64 / 1e9),
            })
        })
        .collect();
    let write = |name: &str, value: serde_json::Value| {
        std::fs::write(
            out.join(name),
            serde_json::to_string_pretty(&value).unwrap() + "\n",
        )
    };
    write("targets.json", serde_json::Value::Array(targets))?;
    let stale_secs = o.stale_secs;
    write(
        "truth.json",
        serde_json::json!({ "start_unix": start_unix, "stale_secs": stale_secs, "hosts": truth }),
    )
}

/// Serves the fleet on `listener` and moves its states on every second;
/// never returns.
pub async fn serve(fleet: Arc<Fleet>, listener: tokio::net::TcpListener) {
    let ticker = Arc::clone(&fleet);
    tokio::spawn(async move {
        let mut rng = Rng(0x5eed ^ ticker.hosts.len() as u64);
        let mut every = tokio::time::interval(Duration::from_secs(1));
        let mut done = 0;
        loop {
            every.tick().await;
            let second = ticker.started.elapsed().as_secs();
            let fleet = Arc::clone(&ticker);
            let mut r = Rng(rng.next() | 1);
            // The samples take a while for a large fleet: off the thread
            // that answers scrapes. A late tick takes in every event since
            // the last one.
            let due = done..second + 1;
            done = second + 1;
            let _ = tokio::task::spawn_blocking(move || tick(&fleet, due, &mut r)).await;
        }
    });
    let app = Router::new()
        .route("/host/{n}/metrics", get(host_metrics))
        .with_state(fleet);
    axum::serve(listener, app).await.unwrap();
}
