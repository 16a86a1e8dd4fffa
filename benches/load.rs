//! Load: many concurrent scrapers against the daemon (release build),
//! in phases quiet / loaded / quiet / loaded. Reports the errors (target
//! 0), the scrape latency p50/p99/max, the daemon's peak resident memory,
//! and the samplers' avg and p99 wake-up latency loaded/quiet from the
//! same run (target: ≤ 1.05).
//!
//! Each scraper is a closed loop of fresh connections: nine /metrics to
//! one /api/v1/latency and one /api/v1/status.
//!
//! Run as root: cargo build --release && cargo bench --bench load
//! Environment: LATENCYD (binary), SCRAPERS (64), PHASES (4), PHASE_SECS
//! (30). export.max_connections stays at its default (256).

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use support::{Daemon, add_phase, empty_snapshot, env_or, get, print_ratio_table, snapshot};

fn main() {
    let (scrapers, phases, phase_secs) = (
        env_or("SCRAPERS", 64),
        env_or("PHASES", 4),
        env_or("PHASE_SECS", 30),
    );
    let daemon = Daemon::start(&[]);
    let (addr, cpus) = (daemon.addr, daemon.cpus.clone());
    println!(
        "load: {} CPUs, {phases} phases of {phase_secs}s, {scrapers} concurrent scrapers when loaded, real-time: {}",
        cpus.len(),
        daemon.realtime
    );
    let mut quiet: Vec<_> = cpus.iter().map(|_| empty_snapshot()).collect();
    let mut loaded: Vec<_> = cpus.iter().map(|_| empty_snapshot()).collect();
    let latency = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap(),
    ));
    let (answered, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut peak_rss_kib = 0;
    for phase in 0..phases {
        let busy = phase % 2 == 1;
        let before = snapshot(addr, &cpus);
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..if busy { scrapers } else { 0 })
            .map(|i| {
                let (stop, latency, answered, errors) = (
                    stop.clone(),
                    latency.clone(),
                    answered.clone(),
                    errors.clone(),
                );
                let cpu0 = cpus[0];
                std::thread::spawn(move || {
                    let mut mine = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
                    let mut n = i;
                    while !stop.load(Ordering::Relaxed) {
                        let path = match n % 11 {
                            9 => format!("/api/v1/latency/{cpu0}"),
                            10 => "/api/v1/status".to_string(),
                            _ => "/metrics".to_string(),
                        };
                        let started = Instant::now();
                        match get(addr, &path) {
                            Ok(_) => {
                                answered.fetch_add(1, Ordering::Relaxed);
                                let _ = mine.record(started.elapsed().as_micros().max(1) as u64);
                            }
                            Err(_) => {
                                errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        n += 1;
                    }
                    latency.lock().unwrap().add(&mine).unwrap();
                })
            })
            .collect();
        let end = Instant::now() + Duration::from_secs(phase_secs);
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(200));
            peak_rss_kib = peak_rss_kib.max(daemon.memory_kib("VmRSS"));
        }
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        std::thread::sleep(Duration::from_millis(1_300));
        let after = snapshot(addr, &cpus);
        let pool = if busy { &mut loaded } else { &mut quiet };
        println!(
            "phase {phase} {:>6}:{}",
            if busy { "loaded" } else { "quiet" },
            add_phase(&cpus, before, after, pool)
        );
    }
    let hwm = daemon.memory_kib("VmHWM");
    daemon.stop();
    print_ratio_table(&cpus, &quiet, &loaded, "loaded");
    let latency = latency.lock().unwrap();
    let loaded_secs = (phases / 2) * phase_secs;
    println!(
        "scrapes: {} answered ({:.0}/s while loaded), {} errors; scrape latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        answered.load(Ordering::Relaxed),
        answered.load(Ordering::Relaxed) as f64 / loaded_secs.max(1) as f64,
        errors.load(Ordering::Relaxed),
        latency.value_at_quantile(0.5) as f64 / 1000.0,
        latency.value_at_quantile(0.99) as f64 / 1000.0,
        latency.max() as f64 / 1000.0,
    );
    println!("daemon resident memory: peak {hwm} KiB (VmHWM), highest sampled {peak_rss_kib} KiB");
}
