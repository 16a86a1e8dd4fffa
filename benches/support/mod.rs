//! What the daemon benches share: starting a release daemon, plain HTTP
//! GETs, and per-CPU snapshots of the samplers' histograms from the API
//! (whose differences give a phase's latencies).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;

pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// GET `path`; the body of a 200 answer, else an error.
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
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

/// A running release daemon on a free loopback port, with no warm-up;
/// real-time when run as root. Killed with SIGTERM by `stop`.
pub struct Daemon {
    pub child: Child,
    pub addr: SocketAddr,
    pub cpus: Vec<u64>,
    pub realtime: bool,
}

impl Daemon {
    pub fn start(extra_env: &[(&str, &str)]) -> Daemon {
        let bin = std::env::var("LATENCYD").unwrap_or_else(|_| "target/release/latencyd".into());
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mut child = Command::new(&bin)
            .args(["run", "--listen", "127.0.0.1:0"])
            .env("LATENCYD_MEASURE__WARMUP", "0s")
            .env(
                "LATENCYD_REALTIME__REQUIRED",
                if root { "true" } else { "false" },
            )
            .envs(extra_env.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {bin} ({e}); build it with cargo build --release")
            });
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr: SocketAddr = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                l.split("serving http://").nth(1).map(|a| {
                    a.split_whitespace()
                        .next()
                        .unwrap()
                        .parse()
                        .expect("an address")
                })
            })
            .expect("the daemon logs where it serves");
        std::thread::spawn(move || lines.for_each(drop));
        std::thread::sleep(Duration::from_secs(2));
        let status: serde_json::Value =
            serde_json::from_str(&get(addr, "/api/v1/status").unwrap()).unwrap();
        let cpus = status["config"]["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .collect();
        Daemon {
            child,
            addr,
            cpus,
            realtime: status["realtime"] == true,
        }
    }

    /// A /proc/PID/status field in KiB (VmRSS, VmHWM).
    pub fn memory_kib(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0)
    }

    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// One CPU's state at a moment: count, sum of latencies (ns), histogram.
pub type Snapshot = (u64, f64, Histogram<u64>);

pub fn snapshot(addr: SocketAddr, cpus: &[u64]) -> Vec<Snapshot> {
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

pub fn empty_snapshot() -> Snapshot {
    (
        0,
        0.0,
        Histogram::new_with_bounds(1, 10_000_000_000, 3).unwrap(),
    )
}

/// Adds what happened between `before` and `after` to `into`, and
/// returns a printable summary per CPU of that phase.
pub fn add_phase(
    cpus: &[u64],
    before: Vec<Snapshot>,
    after: Vec<Snapshot>,
    into: &mut [Snapshot],
) -> String {
    let mut line = String::new();
    for (i, ((c0, s0, h0), (c1, s1, mut h1))) in before.into_iter().zip(after).enumerate() {
        h1.subtract(&h0).unwrap();
        line.push_str(&format!(
            "  CPU {} avg {:.2} us p99 {:.1} us;",
            cpus[i],
            (s1 - s0) / (c1 - c0).max(1) as f64 / 1000.0,
            h1.value_at_quantile(0.99) as f64 / 1000.0
        ));
        let slot = &mut into[i];
        slot.0 += c1 - c0;
        slot.1 += s1 - s0;
        slot.2.add(&h1).unwrap();
    }
    line
}

/// The table of pooled quiet vs loaded phases, per CPU, with ratios.
pub fn print_ratio_table(cpus: &[u64], quiet: &[Snapshot], loaded: &[Snapshot], what: &str) {
    println!(
        "| CPU | quiet avg (us) | {what} avg (us) | avg ratio | quiet p99 (us) | {what} p99 (us) | p99 ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let avg = |(n, sum, _): &Snapshot| sum / *n as f64 / 1000.0;
    let p99 = |(_, _, h): &Snapshot| h.value_at_quantile(0.99) as f64 / 1000.0;
    for (i, cpu) in cpus.iter().enumerate() {
        let (q, l) = (&quiet[i], &loaded[i]);
        println!(
            "| {cpu} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.2} |",
            avg(q),
            avg(l),
            avg(l) / avg(q),
            p99(q),
            p99(l),
            p99(l) / p99(q)
        );
    }
}
