//! What the daemon benches share: per-CPU snapshots of the samplers'
//! histograms from the API (whose differences give a phase's latencies)
//! and their tables. Starting the daemon and HTTP come from the tests'
//! helpers (`tests/common`), so both are written once.

#![allow(dead_code)]

#[path = "../../tests/common/mod.rs"]
mod common;

#[allow(unused_imports)] // only the lag bench makes spikes
pub use common::busy_real_time_thread;

use std::net::SocketAddr;
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
    match common::http_get(addr, path)? {
        (200, body) => Ok(body),
        (status, _) => Err(std::io::Error::other(format!("{path} answered {status}"))),
    }
}

/// A running daemon (the bench profile's binary, or `$LATENCYD`) on a free
/// loopback port, with no warm-up; real-time when run as root. Started and
/// watched by the tests' `common::Daemon`; stopped with SIGTERM by `stop`.
pub struct Daemon {
    inner: common::Daemon,
    pub addr: SocketAddr,
    pub cpus: Vec<u64>,
    pub realtime: bool,
}

impl Daemon {
    pub fn start(extra_env: &[(&str, &str)]) -> Daemon {
        let mut cmd = match std::env::var_os("LATENCYD") {
            Some(bin) => std::process::Command::new(bin),
            None => common::latencyd(),
        };
        cmd.args(["run", "--listen", "127.0.0.1:0"])
            .env("LATENCYD_MEASURE__WARMUP", "0s")
            .env(
                "LATENCYD_REALTIME__REQUIRED",
                if common::privileged() {
                    "true"
                } else {
                    "false"
                },
            )
            .envs(extra_env.iter().copied());
        let inner = common::Daemon::start(&mut cmd);
        let addr = inner.addr;
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
            inner,
            addr,
            cpus,
            realtime: status["realtime"] == true,
        }
    }

    /// A /proc/PID/status field in KiB (VmRSS, VmHWM).
    pub fn memory_kib(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.inner.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0)
    }

    pub fn stop(mut self) {
        self.inner.signal(libc::SIGTERM);
        let _ = self.inner.wait_with_log();
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
