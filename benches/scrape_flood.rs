//! Does scraping disturb what is measured? Runs the daemon (release
//! build) and alternates quiet phases with phases flooded by scrapes
//! (`RATE` per second of /metrics, plus one /api/v1/latency/{cpu} per 10),
//! A B A B. Each phase's sampler latencies are the difference of the HDR
//! histograms (from /api/v1/latency/{cpu}) at its end and its start; the
//! report gives per CPU the avg and p99 of quiet and flooded phases pooled
//! and the ratio flooded/quiet (target in issue 3: ≤ 1.05).
//!
//! Run as root: cargo build --release && cargo bench --bench scrape_flood
//! Environment: LATENCYD (binary), PHASES (6), PHASE_SECS (10), RATE (100),
//! FLOOD_PATH (scrape only this path instead of the /metrics + API mix),
//! FLOOD_CPU (pin the scraping thread to this CPU). Each phase's numbers
//! are printed too: on a noisy machine their spread is the honest error
//! bar of the pooled ratio.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => Err(std::io::Error::other(format!("bad response to {path}"))),
    }
}

/// Per CPU: (count, sum of latencies in ns, HDR histogram).
fn snapshot(addr: SocketAddr, cpus: &[u64]) -> Vec<(u64, f64, Histogram<u64>)> {
    cpus.iter()
        .map(|cpu| {
            let body = get(addr, &format!("/api/v1/latency/{cpu}")).expect("the API answers");
            let json: serde_json::Value = serde_json::from_str(&body).unwrap();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(json["hdr_histogram"].as_str().unwrap())
                .unwrap();
            let hdr = Deserializer::new()
                .deserialize(&mut bytes.as_slice())
                .unwrap();
            let count = json["count"].as_u64().unwrap();
            (count, json["avg_ns"].as_f64().unwrap() * count as f64, hdr)
        })
        .collect()
}

fn main() {
    let bin = std::env::var("LATENCYD").unwrap_or_else(|_| "target/release/latencyd".into());
    let (phases, phase_secs, rate) = (
        env_or("PHASES", 6),
        env_or("PHASE_SECS", 10),
        env_or("RATE", 100),
    );
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut daemon = Command::new(&bin)
        .args(["run", "--listen", "127.0.0.1:0"])
        .env("LATENCYD_MEASURE__WARMUP", "0s")
        .env(
            "LATENCYD_REALTIME__REQUIRED",
            if root { "true" } else { "false" },
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start {bin} ({e}); build it with cargo build --release")
        });
    let mut lines = BufReader::new(daemon.stderr.take().unwrap()).lines();
    let addr: SocketAddr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split("serving http://")
                .nth(1)
                .map(|a| a.trim().parse().unwrap())
        })
        .expect("the daemon logs where it serves");
    std::thread::spawn(move || lines.for_each(drop));
    std::thread::sleep(Duration::from_secs(2));
    let status: serde_json::Value =
        serde_json::from_str(&get(addr, "/api/v1/status").unwrap()).unwrap();
    let cpus: Vec<u64> = status["config"]["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    println!(
        "scrape_flood: {} CPUs, {} phases of {phase_secs}s, flood {rate} scrapes/s, real-time: {}",
        cpus.len(),
        phases,
        status["realtime"]
    );

    // [quiet, flooded] per CPU: (count, sum, histogram)
    let mut pooled: Vec<[(u64, f64, Histogram<u64>); 2]> = cpus
        .iter()
        .map(|_| {
            let empty = || {
                (
                    0,
                    0.0,
                    Histogram::new_with_bounds(1, 10_000_000_000, 3).unwrap(),
                )
            };
            [empty(), empty()]
        })
        .collect();
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
                    latencyd::sys::pin_current_thread(cpu).expect("FLOOD_CPU is a usable CPU");
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
        let mut line = format!(
            "phase {phase} {:>7}:",
            if flooded { "flooded" } else { "quiet" }
        );
        for (i, ((c0, s0, h0), (c1, s1, mut h1))) in before.into_iter().zip(after).enumerate() {
            h1.subtract(&h0).unwrap();
            line.push_str(&format!(
                "  CPU {} avg {:.2} us p99 {:.1} us;",
                cpus[i],
                (s1 - s0) / (c1 - c0).max(1) as f64 / 1000.0,
                h1.value_at_quantile(0.99) as f64 / 1000.0
            ));
            let slot = &mut pooled[i][usize::from(flooded)];
            slot.0 += c1 - c0;
            slot.1 += s1 - s0;
            slot.2.add(&h1).unwrap();
        }
        println!("{line}");
    }
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    let _ = daemon.wait();

    println!(
        "| CPU | quiet avg (us) | flooded avg (us) | avg ratio | quiet p99 (us) | flooded p99 (us) | p99 ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (cpu, [quiet, flooded]) in cpus.iter().zip(&pooled) {
        let avg = |(n, sum, _): &(u64, f64, Histogram<u64>)| sum / *n as f64 / 1000.0;
        let p99 =
            |(_, _, h): &(u64, f64, Histogram<u64>)| h.value_at_quantile(0.99) as f64 / 1000.0;
        println!(
            "| {cpu} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.2} |",
            avg(quiet),
            avg(flooded),
            avg(flooded) / avg(quiet),
            p99(quiet),
            p99(flooded),
            p99(flooded) / p99(quiet)
        );
    }
    let flooded_secs = (phases / 2) * phase_secs;
    println!(
        "scrapes: {} answered ({:.0}/s while flooding), {} errors, slowest {} us",
        scrapes.load(Ordering::Relaxed),
        scrapes.load(Ordering::Relaxed) as f64 / flooded_secs.max(1) as f64,
        errors.load(Ordering::Relaxed),
        slowest_us.load(Ordering::Relaxed)
    );
}
