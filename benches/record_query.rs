//! The record at fleet size: a synthetic day of intervals at the default
//! `record.interval` (5 min) for 2 and 64 CPUs, written by the real
//! writer, then read back over the whole day the way
//! `/api/v1/latency?from=-1d` and `latencyd report` read it.
//!
//! Prints, per CPU count: bytes on disk per CPU per day, the time the
//! range query took (median of 5) and the query's peak resident memory
//! (`VmHWM` of a child process doing only the query), so memory is shown
//! not to grow with the range.
//!
//! Each synthetic interval is what a CPU sampled at 1 kHz for 5 minutes
//! gives on a 2-vCPU VM: 300,000 samples, a body around 20 µs spread like the
//! measured ones (~25 % relative), a tail to a few hundred µs.
//!
//! Run: `cargo bench --bench record_query` (no privileges needed).

use std::path::Path;
use std::time::Instant;

use hdrhistogram::Histogram;
use latencyd::record::{Batch, Entry, LogWriter, Range, Settings, Target, summarize, writer};
use latencyd::stats::{
    Exact, HDR_HIGHEST_NS, HDR_LOWEST_NS, LatencyStats, RECORD_SIGNIFICANT_DIGITS,
};

const INTERVAL_S: u64 = 300;
const DAY_S: u64 = 86_400;
const SAMPLES: u64 = 300_000;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn interval(rng: &mut Rng) -> LatencyStats {
    let mut hdr =
        Histogram::new_with_bounds(HDR_LOWEST_NS, HDR_HIGHEST_NS, RECORD_SIGNIFICANT_DIGITS)
            .unwrap();
    let (mut sum, mut min, mut max, mut left) = (0u128, u64::MAX, 0u64, SAMPLES);
    // The body: 3000 groups of 100 samples, lognormal-ish around 20 µs.
    while left > 0 {
        let n = left.min(100);
        left -= n;
        let z: f64 = (0..4).map(|_| rng.unit()).sum::<f64>() - 2.0;
        let mut v = (20_000.0 * (z * 0.45).exp()) as u64;
        if rng.unit() < 0.01 {
            v += (rng.unit() * 400_000.0) as u64;
        }
        let v = v.max(2_000);
        hdr.record_n(v, n).unwrap();
        sum += u128::from(v) * u128::from(n);
        min = min.min(v);
        max = max.max(v);
    }
    let exact = Exact {
        count: SAMPLES,
        sum_ns: sum,
        min_ns: min,
        max_ns: max,
        missed: 0,
        hdr_overflows: 0,
        spikes: 0,
    };
    LatencyStats::from_parts(100_000, &hdr, exact)
}

fn write_day(dir: &Path, cpus: usize) -> u64 {
    let mut writer = LogWriter::new(Target::Dir(Settings {
        dir: dir.to_path_buf(),
        interval_ns: INTERVAL_S * 1_000_000_000,
        retention_ns: u64::MAX / 2,
        max_bytes: u64::MAX / 2,
    }));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let t0: u64 = 1_795_305_600; // a UTC midnight
    // A small pool of distinct intervals, reused: writing is what is
    // measured here, not generating.
    let pool: Vec<LatencyStats> = (0..64).map(|_| interval(&mut rng)).collect();
    for k in 0..DAY_S / INTERVAL_S {
        let start = (t0 + k * INTERVAL_S) * 1_000_000_000;
        let entries = (0..cpus)
            .map(|cpu| Entry {
                cpu,
                start_ns: start,
                length_ns: INTERVAL_S * 1_000_000_000,
                stats: pool[(k as usize * 7 + cpu * 13) % pool.len()].clone(),
                fingerprint: Some("0123456789ab".to_string()),
                load: None,
                hwnoise: false,
                timerlat: None,
            })
            .collect();
        let batch = Batch {
            gaps: Vec::new(),
            hwnoise: Vec::new(),
            entries,
            fingerprint: None,
        };
        writer
            .write(&batch, start + INTERVAL_S * 1_000_000_000)
            .unwrap();
    }
    writer::list(dir).unwrap().iter().map(|f| f.2).sum()
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn query(dir: &Path) -> (f64, u64) {
    let files: Vec<_> = writer::list(dir)
        .unwrap()
        .into_iter()
        .map(|f| f.0)
        .collect();
    let start = Instant::now();
    let (summary, report) = summarize(&files, Range::ALL, None).unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(report.corrupt, 0);
    (secs, summary.cpus.values().map(|s| s.count).sum())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // The child: one query, then its peak memory.
    if let Some(pos) = args.iter().position(|a| a == "--query-child") {
        let (secs, count) = query(Path::new(&args[pos + 1]));
        println!("{secs} {count} {}", vm_hwm_kib());
        return;
    }
    println!("record: a day at a 5 min interval, 300,000 samples per CPU per interval");
    println!("cpus  bytes/CPU/day  day total  query s (median of 5)  query peak RSS");
    for cpus in [2usize, 64] {
        let dir = tempfile::tempdir().unwrap();
        let bytes = write_day(dir.path(), cpus);
        let mut runs: Vec<(f64, u64, u64)> = (0..5)
            .map(|_| {
                let out = std::process::Command::new(std::env::current_exe().unwrap())
                    .arg("--query-child")
                    .arg(dir.path())
                    .output()
                    .unwrap();
                let text = String::from_utf8(out.stdout).unwrap();
                let f: Vec<&str> = text.split_whitespace().collect();
                (
                    f[0].parse().unwrap(),
                    f[1].parse().unwrap(),
                    f[2].parse().unwrap(),
                )
            })
            .collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (secs, count, hwm) = runs[2];
        assert_eq!(count, cpus as u64 * SAMPLES * (DAY_S / INTERVAL_S));
        println!(
            "{cpus:4}  {:13}  {:7.1} MB  {secs:21.3}  {:10} MiB",
            bytes / cpus as u64,
            bytes as f64 / 1e6,
            hwm / 1024
        );
    }
}
