//! Does scraping disturb what is measured? Runs the daemon (release
//! build) and alternates quiet phases with phases flooded by scrapes
//! (`RATE` per second of /metrics, plus one /api/v1/latency/{cpu} per 10),
//! A B A B. Each phase's sampler latencies are the difference of the HDR
//! histograms (from /api/v1/latency/{cpu}) at its end and its start; the
//! report gives per CPU the avg and p99 of quiet and flooded phases pooled
//! and the ratio flooded/quiet (target: ≤ 1.05).
//!
//! Run as root: cargo build --release && cargo bench --bench scrape_flood
//! Environment: LATENCYD (binary), PHASES (6), PHASE_SECS (10), RATE (100),
//! FLOOD_PATH (scrape only this path instead of the /metrics + API mix),
//! FLOOD_CPU (pin the scraping thread to this CPU). Each phase's numbers
//! are printed too: on a noisy machine their spread is the honest error
//! bar of the pooled ratio.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use support::{Daemon, add_phase, empty_snapshot, env_or, get, print_ratio_table, snapshot};

fn main() {
    let (phases, phase_secs, rate) = (
        env_or("PHASES", 6),
        env_or("PHASE_SECS", 10),
        env_or("RATE", 100),
    );
    let daemon = Daemon::start(&[]);
    let (addr, cpus) = (daemon.addr, daemon.cpus.clone());
    println!(
        "scrape_flood: {} CPUs, {} phases of {phase_secs}s, flood {rate} scrapes/s, real-time: {}",
        cpus.len(),
        phases,
        daemon.realtime
    );

    // Quiet and flooded phases pooled, per CPU.
    let mut quiet: Vec<_> = cpus.iter().map(|_| empty_snapshot()).collect();
    let mut loaded: Vec<_> = cpus.iter().map(|_| empty_snapshot()).collect();
    let (scrapes, errors, slowest_us) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    for phase in 0..phases {
        let flooded = phase % 2 == 1;
        let before = snapshot(addr, &cpus);
        let stop = Arc::new(AtomicBool::new(false));
        let flood = flooded.then(|| {
            let (stop, scrapes, errors, slowest_us) = (
                stop.clone(),
                scrapes.clone(),
                errors.clone(),
                slowest_us.clone(),
            );
            let cpu0 = cpus[0];
            let only_path = std::env::var("FLOOD_PATH").ok();
            let pin = std::env::var("FLOOD_CPU").ok().and_then(|c| c.parse().ok());
            std::thread::spawn(move || {
                if let Some(cpu) = pin {
                    latencyd::rt::sys::pin_current_thread(cpu).expect("FLOOD_CPU is a usable CPU");
                }
                let period = Duration::from_nanos(1_000_000_000 / rate);
                let mut next = Instant::now();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let path = match &only_path {
                        Some(path) => path.clone(),
                        None if i % 10 == 9 => format!("/api/v1/latency/{cpu0}"),
                        None => "/metrics".into(),
                    };
                    let started = Instant::now();
                    match get(addr, &path) {
                        Ok(_) => scrapes.fetch_add(1, Ordering::Relaxed),
                        Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                    };
                    slowest_us.fetch_max(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                    i += 1;
                    next += period;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            })
        });
        std::thread::sleep(Duration::from_secs(phase_secs));
        stop.store(true, Ordering::Relaxed);
        if let Some(flood) = flood {
            flood.join().unwrap();
        }
        // Let the last second's interval arrive before reading.
        std::thread::sleep(Duration::from_millis(1_300));
        let after = snapshot(addr, &cpus);
        let pool = if flooded { &mut loaded } else { &mut quiet };
        println!(
            "phase {phase} {:>7}:{}",
            if flooded { "flooded" } else { "quiet" },
            add_phase(&cpus, before, after, pool)
        );
    }
    daemon.stop();
    print_ratio_table(&cpus, &quiet, &loaded, "flooded");
    let flooded_secs = (phases / 2) * phase_secs;
    println!(
        "scrapes: {} answered ({:.0}/s while flooding), {} errors, slowest {} us",
        scrapes.load(Ordering::Relaxed),
        scrapes.load(Ordering::Relaxed) as f64 / flooded_secs.max(1) as f64,
        errors.load(Ordering::Relaxed),
        slowest_us.load(Ordering::Relaxed)
    );
}
