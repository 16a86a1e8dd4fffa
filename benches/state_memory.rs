//! Memory per CPU of what the daemon keeps for each sampled CPU, at
//! default settings: the sampler's stack (its touched, hence locked,
//! part), its handoff (`DEFAULT_BUFFERS` interval buffers), the
//! exporter's `CpuView` (lifetime statistics, window maxima, window
//! histograms after a full window of samples, bucket counts) and the
//! record's accumulator after a full record interval. Heap bytes are
//! counted by a global allocator that tallies live bytes; the stack is
//! the resident size of a thread shaped like a sampler (same stack size,
//! same prefault), read from /proc/self/smaps. Built for 2, 64, 256 and
//! 512 CPUs, for two workloads:
//! - `typical`: 1 kHz, 90 % of wake-ups 3 to 12 µs, 9 % to 60 µs, 1 % to
//!   2 ms: about 60 distinct 1 µs bins a second, as measured on a 2-vCPU VM
//!   (53 to 109 a second, 333 in a minute);
//! - `wide`: 1 kHz spread evenly over 5 to 205 µs, 200 bins a second, the
//!   baseline's workload (a noisy host).
//!
//! Run: `cargo bench --bench state_memory`.

use std::sync::atomic::Ordering;

use latencyd::daemon::state::CpuView;
use latencyd::record::Accumulator;
use latencyd::rt::handoff;
use latencyd::stats::LatencyStats;

#[path = "support/counting.rs"]
mod counting;
// Only its sampler is used here.
#[allow(dead_code)]
#[path = "support/synthetic.rs"]
mod synthetic;

use counting::{Counting, LIVE};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Resident bytes of the stack of a thread built like a sampler, after
/// its prefault: what `mlockall(MCL_ONFAULT)` locks of it.
fn sampler_stack_bytes() -> usize {
    std::thread::Builder::new()
        .stack_size(latencyd::rt::thread::SAMPLER_STACK_BYTES)
        .spawn(|| {
            latencyd::rt::sys::prefault_stack::<{ latencyd::rt::thread::PREFAULT_STACK_BYTES }>();
            let local = std::hint::black_box(0u8);
            let here = std::ptr::addr_of!(local) as usize;
            let smaps = std::fs::read_to_string("/proc/self/smaps").expect("Linux /proc");
            let mut inside = false;
            for line in smaps.lines() {
                if let Some((range, _)) = line.split_once(' ')
                    && let Some((lo, hi)) = range.split_once('-')
                    && let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&here);
                } else if inside && let Some(kb) = line.strip_prefix("Rss:") {
                    let kb: usize = kb.trim().trim_end_matches("kB").trim().parse().unwrap();
                    return kb * 1024;
                }
            }
            panic!("the stack's mapping is not in /proc/self/smaps")
        })
        .unwrap()
        .join()
        .unwrap()
}

/// One second of samples (1 kHz) of a workload, taken at `second`.
fn second_of(workload: &str, second: u64, interval: &mut LatencyStats, x: &mut u64) {
    interval.reset();
    for i in 0..1_000u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        let r = *x;
        let latency = match workload {
            "typical" => match r % 100 {
                0 => 60_000 + (r >> 8) % 1_940_000,
                1..=9 => 12_000 + (r >> 8) % 48_000,
                _ => 3_000 + (r >> 8) % 9_000,
            },
            _ => 5_000 + r % 200_000,
        };
        interval.record_at(latency, i, second * 1_000_000_000 + i * 1_000_000);
    }
}

fn main() {
    let config = latencyd::instruments::registry::builtin_config();
    let template = LatencyStats::new(config.measure.spike_threshold_ns, None);
    let window_s = config.export.max_window_ns / 1_000_000_000;
    let record_s = config.record.interval_ns / 1_000_000_000;
    let stack = sampler_stack_bytes();
    println!(
        "bytes per CPU at default settings (export.max_window = {window_s} s, record.interval = \
         {record_s} s, {} handoff buffers)",
        handoff::DEFAULT_BUFFERS
    );
    println!("workload  cpus  stack  handoff  exporter  record  total  KiB");
    for workload in ["typical", "wide"] {
        for n_cpus in [2usize, 64, 256, 512] {
            let before = LIVE.load(Ordering::Relaxed);
            let handoffs: Vec<_> = (0..n_cpus)
                .map(|_| handoff::channel(&template, handoff::DEFAULT_BUFFERS))
                .collect();
            let after_handoff = LIVE.load(Ordering::Relaxed);
            let mut views: Vec<CpuView> = (0..n_cpus)
                .map(|cpu| CpuView::new(cpu, &config, synthetic::sampler(cpu, 0)))
                .collect();
            let after_views_made = LIVE.load(Ordering::Relaxed);
            let mut record = Accumulator::new(
                config.record.interval_ns,
                config.measure.spike_threshold_ns,
                0,
            );
            // A full record interval; the window keeps its last minute.
            let mut interval = template.empty_interval();
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            let mut views_bytes = 0;
            for second in 0..record_s.max(window_s) {
                second_of(workload, second, &mut interval, &mut x);
                let views_before = LIVE.load(Ordering::Relaxed);
                for view in &mut views {
                    view.absorb(&interval).unwrap();
                }
                views_bytes += LIVE.load(Ordering::Relaxed) as isize - views_before as isize;
                for cpu in 0..n_cpus {
                    record.add(cpu, &interval);
                }
            }
            if n_cpus == 512 {
                let view = &views[0];
                eprintln!(
                    "  {workload}: lifetime histogram {} B, window histograms {} B",
                    view.lifetime.hdr().heap_bytes(),
                    view.recent.heap_bytes()
                );
            }
            let after = LIVE.load(Ordering::Relaxed);
            let handoff_b = (after_handoff - before) / n_cpus;
            let exporter_b =
                ((after_views_made - after_handoff) as isize + views_bytes) as usize / n_cpus;
            let record_b = (after - before) / n_cpus - handoff_b - exporter_b;
            let total = stack + handoff_b + exporter_b + record_b;
            println!(
                "{workload:8}  {n_cpus:4}  {stack:5}  {handoff_b:7}  {exporter_b:8}  {record_b:6}  \
                 {total:5}  {:.1}",
                total as f64 / 1024.0
            );
            drop(record);
            drop(views);
            drop(handoffs);
        }
    }
}
