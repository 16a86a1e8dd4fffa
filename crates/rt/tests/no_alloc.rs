//! The sampler's hot loop must not allocate or free. This test binary
//! installs a global allocator that counts calls made by a thread while
//! that thread is "armed", arms a thread around `sampler::hot_loop` with
//! the real clock, and fails on any count — including in the paths that
//! publish, that find no free buffer, and that record `-h` overflows;
//! and the busy-poll loop's tally as it files gaps and settles.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use latencyd_rt::clock::MonotonicClock;
use latencyd_rt::handoff;
use latencyd_rt::sampler::{self, LoopEndReason, LoopPlan};
use latencyd_rt::stats::{LatencyStats, LinearHistogram};

struct CountingAllocator;

thread_local! {
    // const-initialised, so using them never allocates. Both are per
    // thread: tests run in parallel, and another test's allocations must
    // not be counted against this one.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static ARMED_CALLS: Cell<usize> = const { Cell::new(0) };
}

fn note_call() {
    if ARMED.with(Cell::get) {
        ARMED_CALLS.with(|calls| calls.set(calls.get() + 1));
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_call();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_call();
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_call();
        // SAFETY: forwarded with the caller's arguments.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Runs `f` with this thread armed and returns how many allocator calls it
/// made.
fn allocator_calls_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ARMED_CALLS.with(Cell::get);
    ARMED.with(|armed| armed.set(true));
    let value = f();
    ARMED.with(|armed| armed.set(false));
    (value, ARMED_CALLS.with(Cell::get) - before)
}

#[test]
fn the_detector_sees_allocations() {
    // Without this, a broken detector would make the real test pass.
    let (_, calls) = allocator_calls_during(|| {
        let buffer = vec![1u8; 64];
        std::hint::black_box(&buffer);
    });
    assert!(
        calls >= 2,
        "an allocation and a free were made, {calls} seen"
    );
}

#[test]
fn the_hot_loop_never_allocates() {
    const PERIODS: u64 = 3_000;
    // Two bins of 1 µs: nearly every sample overflows, exercising the
    // overflow list up to its capacity and beyond.
    let template = LatencyStats::new(20_000, Some(LinearHistogram::new(2, 1_000)));
    let (mut publisher, mut collector) = handoff::channel(&template, 3);
    let stop = Arc::new(AtomicBool::new(false));
    let heartbeat = Arc::new(AtomicU64::new(0));
    let plan = LoopPlan {
        interval_ns: 50_000,
        warmup_periods: 10,
        measure_periods: Some(PERIODS),
        max_samples: None,
        publish_period_ns: 250_000,
    };

    let sampler = {
        let (stop, heartbeat) = (Arc::clone(&stop), Arc::clone(&heartbeat));
        std::thread::spawn(move || {
            let mut clock = MonotonicClock;
            let start = latencyd_rt::sys::monotonic_now_ns() + plan.interval_ns;
            let (end, calls) = allocator_calls_during(|| {
                sampler::hot_loop(&mut clock, &plan, start, &mut publisher, &stop, &heartbeat)
            });
            (end, calls, publisher.into_remainder())
        })
    };
    // The consumer drains for a while, then stops draining for a while so
    // that the sampler finds no free buffer, then drains again.
    let mut total = template.clone();
    let mut rounds = 0u64;
    while !sampler.is_finished() {
        rounds += 1;
        let paused = rounds % 40 >= 20;
        if !paused {
            collector.drain(|s| total.merge(s)).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let (end, calls, remainder) = sampler.join().unwrap();
    collector.drain(|s| total.merge(s)).unwrap();
    total.merge(&remainder).unwrap();

    assert_eq!(end.reason, LoopEndReason::Completed);
    assert_eq!(calls, 0, "the hot loop called the allocator {calls} times");
    assert_eq!(total.count + total.missed, PERIODS);
    assert_eq!(end.periods, PERIODS);
    assert!(heartbeat.load(Ordering::Relaxed) > 0);
}

#[test]
fn the_busy_poll_tally_files_and_settles_without_allocating() {
    use latencyd_rt::poll::{BucketLayout, Tally};
    let mut tally = Tally::new(0, 2_600, BucketLayout::oslat_default());
    let ((), calls) = allocator_calls_during(|| {
        // Short gaps, gaps of some µs, overflows of the last bucket and
        // one beyond the histogram's range.
        for i in 0..1_000_000u64 {
            tally.file(i % 97 * 7 + (i % 1_000 == 0) as u64 * 2_600 * (i % 100));
        }
        tally.file(u64::MAX / 2_000);
        tally.settle();
    });
    assert_eq!(calls, 0, "filing gaps and settling allocated");
    assert_eq!(tally.samples, 1_000_001);
}
