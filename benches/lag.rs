//! The lag from one late wake-up to `/metrics`: how long after a sampler
//! wakes up late its `latencyd_spikes_total` shows the spike. Target
//!: p99 ≤ 500 ms; by design at most one publish period (200 ms)
//! plus one collector tick (100 ms).
//!
//! Needs root: each spike is real. A SCHED_FIFO thread one priority above
//! the samplers, pinned to a sampled CPU, spins for 3 ms; the sampler wakes
//! up the moment it stops, which is when the lag starts. The bench then
//! reads `/metrics` every 2 ms until that CPU's spike counter has risen
//! (the reading's own time, ~0.3 ms, and the 2 ms poll are included, so
//! the numbers are upper bounds). Spikes are 200 to 700 ms apart, at
//! pseudo-random phases of the publish and collect cadences, alternating
//! over the CPUs.
//!
//! Run: cargo bench --bench lag   (LAG_SPIKES=N, default 100; LATENCYD=PATH
//! measures another build of the daemon, e.g. an older one)

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use support::{Daemon, env_or, get};

/// The daemon's default sampler priority (config.example.toml).
const SAMPLER_PRIORITY: i32 = 80;
const BUSY: Duration = Duration::from_millis(3);
const POLL: Duration = Duration::from_millis(2);

/// Spins on `cpu` above the samplers for `BUSY`; returns when it stopped.
fn spike(cpu: usize) -> Instant {
    support::busy_real_time_thread(cpu, SAMPLER_PRIORITY + 1, BUSY).1
}

fn spikes_of(daemon: &Daemon, cpu: u64) -> f64 {
    let scrape = get(daemon.addr, "/metrics").expect("/metrics answers");
    let series = format!("latencyd_spikes_total{{cpu=\"{cpu}\"}} ");
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
        .expect("a spike counter per CPU")
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "lag: needs root (a SCHED_FIFO thread above the samplers makes each spike); \
             nothing measured"
        );
        std::process::exit(2);
    }
    let spikes = env_or("LAG_SPIKES", 100);
    // A budget below the spike and above most of a VM's own noise.
    let daemon = Daemon::start(&[("LATENCYD_MEASURE__SPIKE_THRESHOLD", "1500us")]);
    assert!(
        daemon.realtime,
        "the daemon did not get real-time scheduling"
    );
    let mut lags = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut unrelated = 0;
    for i in 0..spikes {
        let cpu = daemon.cpus[i as usize % daemon.cpus.len()];
        // xorshift: a phase that does not line up with 100 or 200 ms.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(200 + seed % 500));
        let before = spikes_of(&daemon, cpu);
        let woke = spike(cpu as usize);
        loop {
            let now = Instant::now();
            let seen = spikes_of(&daemon, cpu);
            if seen > before {
                lags.record((now - woke).as_nanos() as u64).unwrap();
                break;
            }
            assert!(
                now - woke < Duration::from_secs(10),
                "CPU {cpu}: no spike counted 10 s after it"
            );
            std::thread::sleep(POLL);
        }
        // A spike of the VM's own just before ours would count as ours;
        // it cannot be told apart, only counted.
        if spikes_of(&daemon, cpu) > before + 1.0 {
            unrelated += 1;
        }
    }
    let ms = |q: f64| lags.value_at_quantile(q) as f64 / 1e6;
    println!(
        "lag from a late wake-up to /metrics over {} spikes on CPUs {:?}: \
         p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms, max {:.0} ms, min {:.0} ms \
         ({} with more than one spike counted)",
        lags.len(),
        daemon.cpus,
        ms(0.5),
        ms(0.9),
        ms(0.99),
        lags.max() as f64 / 1e6,
        lags.min() as f64 / 1e6,
        unrelated
    );
    daemon.stop();
}
