//! Soak: the daemon (release build) scraped every 100 ms for a long run
//! (10 minutes by default). Reports resident memory after 1 minute and at
//! the end (target: growth ≤ 256 KiB), the scrape errors, and
//! whether each CPU's sample count matches the run: samples + missed =
//! (sampling time) / interval, within the one-second publishing lag.
//!
//! Run as root: cargo build --release && cargo bench --bench soak
//! Environment: LATENCYD (binary), SOAK_SECS (600), SCRAPE_MS (100),
//! SOAK_PATHS (comma-separated paths to cycle instead of the default five).

mod support;

use std::time::{Duration, Instant};

use support::{Daemon, env_or, get};

fn main() {
    let (soak_secs, scrape_ms) = (env_or("SOAK_SECS", 600), env_or("SCRAPE_MS", 100));
    let daemon = Daemon::start(&[]);
    let addr = daemon.addr;
    let paths_text = std::env::var("SOAK_PATHS")
        .unwrap_or_else(|_| "/metrics,/api/v1/latency,/api/v1/status,/healthz,/plot.svg".into());
    let paths: Vec<&str> = paths_text.split(',').collect();
    println!(
        "soak: {} CPUs for {soak_secs}s, a scrape every {scrape_ms} ms cycling {paths_text}, real-time: {}",
        daemon.cpus.len(),
        daemon.realtime
    );
    let started = Instant::now();
    let period = Duration::from_millis(scrape_ms);
    let (mut scrapes, mut errors) = (0u64, 0u64);
    let mut rss_at_1m = None;
    let mut next = started;
    let mut i = 0;
    while started.elapsed() < Duration::from_secs(soak_secs) {
        // /healthz is 503 while a sampler is stale: an answer either way.
        match get(addr, paths[i % paths.len()]) {
            Ok(_) => scrapes += 1,
            Err(_) if paths[i % paths.len()] == "/healthz" => scrapes += 1,
            Err(_) => errors += 1,
        }
        i += 1;
        if rss_at_1m.is_none() && started.elapsed() >= Duration::from_secs(60) {
            rss_at_1m = Some(daemon.memory_kib("VmRSS"));
            println!("after 1 minute: VmRSS {} KiB", rss_at_1m.unwrap());
        }
        if i % 600 == 0 {
            println!(
                "{:>4}s: VmRSS {} KiB",
                started.elapsed().as_secs(),
                daemon.memory_kib("VmRSS")
            );
        }
        next += period;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let rss_end = daemon.memory_kib("VmRSS");
    let hwm = daemon.memory_kib("VmHWM");
    // Let the last published intervals arrive, then compare the counts
    // with the time sampled.
    std::thread::sleep(Duration::from_millis(1_300));
    let status: serde_json::Value =
        serde_json::from_str(&get(addr, "/api/v1/status").unwrap()).unwrap();
    let latency: serde_json::Value =
        serde_json::from_str(&get(addr, "/api/v1/latency").unwrap()).unwrap();
    let uptime_ns = status["uptime_ns"].as_u64().unwrap();
    let interval_ns = status["config"]["interval_ns"].as_u64().unwrap();
    daemon.stop();

    let growth = rss_end as i64 - rss_at_1m.unwrap_or(rss_end) as i64;
    println!(
        "resident memory: {} KiB after 1 minute, {rss_end} KiB at the end: growth {growth} KiB (target ≤ 256); peak {hwm} KiB",
        rss_at_1m.unwrap_or(0)
    );
    println!("scrapes: {scrapes} answered, {errors} errors");
    // Samplers start within the first interval after start-up (no
    // warm-up); what is published lags by at most one publishing period
    // (1 s) plus a collector tick (250 ms).
    let expected = uptime_ns / interval_ns;
    let lag = 1_250_000_000 / interval_ns;
    println!(
        "| CPU | samples | missed | samples + missed | uptime / interval | short by | within lag ({lag}) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    for cpu in latency["cpus"].as_array().unwrap() {
        let (count, missed) = (
            cpu["count"].as_u64().unwrap(),
            cpu["missed"].as_u64().unwrap(),
        );
        let short = expected as i64 - (count + missed) as i64;
        println!(
            "| {} | {count} | {missed} | {} | {expected} | {short} | {} |",
            cpu["cpu"],
            count + missed,
            if (0..=lag as i64).contains(&short) {
                "yes"
            } else {
                "NO"
            }
        );
    }
}
