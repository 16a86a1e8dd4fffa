//! Criterion benchmarks of what a sampler does per period besides
//! sleeping: recording one sample, and publishing an interval through the
//! handoff. Targets: record ≤ 20 ns median, publish ≤ 1 µs
//! (its tail is measured by `publish_tail`).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use latencyd::rt::handoff;
use latencyd::stats::{LatencyStats, LinearHistogram};

/// Latency-like values: mostly a few µs, some tens, rarely hundreds.
fn samples() -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 100 {
                0 => 100_000 + x % 400_000,
                1..=9 => 10_000 + x % 40_000,
                _ => 1_500 + x % 6_000,
            }
        })
        .collect()
}

fn record(c: &mut Criterion) {
    let values = samples();
    let mut group = c.benchmark_group("record");
    let mut stats = LatencyStats::new(100_000, None);
    let mut i = 0usize;
    group.bench_function("hdr", |b| {
        b.iter(|| {
            stats.record(black_box(values[i & 4095]), i as u64);
            i = i.wrapping_add(1);
        })
    });
    // What the sampler calls: the sample with its time (the interval keeps
    // its first, last and maximum's times for the windows).
    let mut stats = LatencyStats::new(100_000, None);
    group.bench_function("hdr_with_time", |b| {
        b.iter(|| {
            stats.record_at(
                black_box(values[i & 4095]),
                i as u64,
                black_box(i as u64 * 1_000),
            );
            i = i.wrapping_add(1);
        })
    });
    let mut stats = LatencyStats::new(100_000, Some(LinearHistogram::new(1_000, 1_000)));
    group.bench_function("hdr_and_cyclictest_histogram", |b| {
        b.iter(|| {
            stats.record(black_box(values[i & 4095]), i as u64);
            i = i.wrapping_add(1);
        })
    });
    group.finish();
}

fn publish(c: &mut Criterion) {
    let template = LatencyStats::new(100_000, None);
    let mut group = c.benchmark_group("publish");
    // A buffer is free: one pop and one push. The consumer recycles it
    // outside the timed section (iter_batched's setup is not timed), so
    // only the sampler's side is measured.
    let (mut publisher, mut collector) = handoff::channel(&template, 4);
    group.bench_function("buffer_free", |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                publisher.stats_mut().record(5_000, 0);
                let start = std::time::Instant::now();
                black_box(publisher.publish());
                total += start.elapsed();
                let _ = collector.drain(|_| Ok::<_, ()>(()));
            }
            total
        })
    });
    // What a triple_buffer design would do at every publish instead: copy
    // the cumulative statistics (their 200 KiB HDR histogram) into the
    // back buffer.
    let mut cumulative = LatencyStats::new(100_000, None);
    for (i, v) in samples().into_iter().enumerate() {
        cumulative.record(v, i as u64);
    }
    let mut back_buffer = LatencyStats::new(100_000, None);
    group.bench_function("cumulative_copy", |b| {
        b.iter(|| {
            back_buffer.reset();
            back_buffer.merge(black_box(&cumulative)).unwrap();
        })
    });
    // No buffer is free (consumer behind): one failed pop.
    let (mut publisher, _collector) = handoff::channel(&template, 2);
    publisher.publish();
    group.bench_function("consumer_behind", |b| {
        b.iter(|| black_box(publisher.publish()))
    });
    group.finish();
}

/// The hotplug check every wake-up makes: which CPU am I on (glibc's
/// sched_getcpu, from the rseq area, no system call).
fn displaced(c: &mut Criterion) {
    use latencyd::rt::clock::{Clock, PinnedClock};
    let cpu = latencyd::rt::sys::current_cpu().unwrap_or(0);
    let _ = latencyd::rt::sys::pin_current_thread(cpu);
    let mut clock = PinnedClock::monotonic(cpu);
    c.bench_function("displaced_check", |b| {
        b.iter(|| std::hint::black_box(clock.displaced()))
    });
}

criterion_group!(benches, record, publish, displaced);
criterion_main!(benches);
