//! Memory per CPU of what the daemon keeps for each sampled CPU, at
//! default settings: the sampler's handoff (`DEFAULT_BUFFERS` interval
//! buffers) and the exporter's `CpuView` (lifetime statistics, window
//! maxima, window histograms after a full window of samples, bucket
//! counts), counted by a global allocator that tallies live bytes. Built
//! for 2, 64, 256 and 512 CPUs; prints bytes per CPU.
//!
//! This is the baseline the fleet-scale work (64 KiB per CPU) is measured
//! against. Run: `cargo bench --bench state_memory`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use latencyd::config::Config;
use latencyd::daemon::state::{CpuView, SamplerView};
use latencyd::rt::handoff;
use latencyd::rt::sys::Policy;
use latencyd::stats::LatencyStats;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to the system allocator with the caller's
// layout and pointer; the counter only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc` is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn main() {
    let config = Config::builtin();
    let template = LatencyStats::new(config.measure.spike_threshold_ns, None);
    let window_s = config.export.max_window_ns / 1_000_000_000;
    println!("bytes per CPU at default settings (export.max_window = {window_s} s)");
    println!("cpus  handoff  exporter state  total");
    for n_cpus in [2usize, 64, 256, 512] {
        let before = LIVE.load(Ordering::Relaxed);
        let handoffs: Vec<_> = (0..n_cpus)
            .map(|_| handoff::channel(&template, handoff::DEFAULT_BUFFERS))
            .collect();
        let after_handoff = LIVE.load(Ordering::Relaxed);
        let mut views: Vec<CpuView> = (0..n_cpus)
            .map(|cpu| {
                let sampler = SamplerView {
                    tid: 1,
                    policy: Policy::Fifo,
                    priority: 80,
                    realtime: true,
                    last_sample_ns: 0,
                    alive: true,
                    online: true,
                };
                CpuView::new(cpu, &config, sampler)
            })
            .collect();
        // A full window of 1 kHz samples spread over ~200 distinct µs, in
        // the 200 ms intervals the samplers publish.
        let mut interval = template.clone();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for publish in 0..(window_s * 5) {
            interval.reset();
            for i in 0..200u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = publish * 200_000_000 + i * 1_000_000;
                interval.record_at(5_000 + x % 200_000, i, at);
            }
            for view in &mut views {
                view.absorb(&interval).unwrap();
            }
        }
        let after_views = LIVE.load(Ordering::Relaxed);
        let per = |bytes: usize| bytes / n_cpus;
        println!(
            "{n_cpus:4}  {:7}  {:14}  {:5}",
            per(after_handoff - before),
            per(after_views - after_handoff),
            per(after_views - before)
        );
        drop(views);
        drop(handoffs);
    }
}
