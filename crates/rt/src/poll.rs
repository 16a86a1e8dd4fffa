//! The busy-poll instrument's loop: a thread per CPU that never sleeps,
//! reads the CPU's counter as fast as it can (after an optional `memmove`
//! workload) and files every gap between two reads. A polling thread
//! (DPDK's, a PLC's cyclic task that spins) sees exactly these gaps as the
//! time the OS took the CPU away: interrupts, softirqs, SMIs, a
//! preemption. oslat (rt-tests) measures the same; `latencyd oslat` prints
//! these tallies in its formats.
//!
//! A gap of `t` counter ticks at `mhz` ticks per µs is filed as
//! `⌊t · per_us / mhz⌋ + 1` units (µs, or ns when `unit_ns` is 1), as
//! oslat 2.x files it: a gap shorter than one unit counts as one. It goes
//! into linear buckets (oslat's histogram), into an HDR histogram in ns
//! (percentiles), and sets the minimum and maximum (the maximum also
//! exactly, in ns).
//!
//! Like a sampler, a poller allocates everything before the start signal
//! and nothing after it; the threads start together and stop together, so
//! no poller's exit disturbs another that still measures.
//!
//! ```
//! use latencyd_rt::poll::{BucketLayout, Tally};
//! let mut tally = Tally::new(0, 2_600, BucketLayout::oslat_default());
//! tally.file(2_600 * 3 + 5); // a gap of 3.001 µs is filed as 4 µs
//! tally.file(40); // a gap of 15 ns as 1 µs
//! tally.settle();
//! assert_eq!((tally.min, tally.max), (1, 4));
//! assert_eq!(tally.buckets[3], 1);
//! assert_eq!(tally.max_ns, 3_001);
//! assert!(tally.histogram.equivalent(tally.histogram.max(), 3_001));
//! ```

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use hdrhistogram::Histogram;

use crate::sys::{self, ClockSource, Counter, Policy};

/// oslat's bucket count when none is given.
pub const DEFAULT_BUCKETS: usize = 32;
/// The longest gap the HDR histogram tells apart from longer ones (1 h).
const HDR_MAX_NS: u64 = 3_600_000_000_000;
/// The most ticks per µs counted one by one (`Tally::short`): 10 GHz.
const MAX_SHORT_TICKS: u64 = 10_000;

/// How gaps are filed into linear buckets: `count` buckets of `width`
/// units each, after `bias` units are taken off (oslat's `--bias`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketLayout {
    pub count: usize,
    pub width: u64,
    /// One unit in ns: 1,000 (µs) or 1 (ns, oslat's `-W` not a multiple
    /// of 1,000).
    pub unit_ns: u64,
    pub bias: u64,
}

impl BucketLayout {
    /// oslat's defaults: 32 buckets of 1 µs, no bias.
    pub fn oslat_default() -> BucketLayout {
        BucketLayout {
            count: DEFAULT_BUCKETS,
            width: 1,
            unit_ns: 1_000,
            bias: 0,
        }
    }

    /// The upper bound, in units, of bucket `index` (its label).
    pub fn upper(&self, index: usize) -> u64 {
        self.bias + (index as u64 + 1) * self.width
    }
}

/// What one poller found.
#[derive(Debug, Clone)]
pub struct Tally {
    pub cpu: usize,
    /// Counter ticks per µs (oslat's "Counter Freq", in MHz).
    pub mhz: u64,
    pub layout: BucketLayout,
    /// Gaps filed.
    pub samples: u64,
    /// The shortest and longest gap, in units (`u64::MAX`, 0 before any).
    pub min: u64,
    pub max: u64,
    /// The longest gap in ns, exactly (to the counter's tick).
    pub max_ns: u64,
    pub buckets: Vec<u64>,
    /// Bucket widths beyond the last bucket, summed over the gaps that
    /// overflowed it (oslat's average counts them).
    pub overflow: u64,
    /// Every gap in ns.
    pub histogram: Histogram<u64>,
    /// Counter ticks from the first read to the last.
    pub ticks: u64,
    /// The poller ended off its CPU (the CPU went offline, or someone
    /// moved it): its figures are partly another CPU's.
    pub moved: bool,
    /// Gaps shorter than 1 µs counted by their length in ticks, filed
    /// into the rest by `settle` (the loop's common case costs one
    /// increment, so the loop turns about as fast as oslat's).
    short: Vec<u64>,
}

impl Tally {
    /// An empty tally; its memory is all allocated here.
    pub fn new(cpu: usize, mhz: u64, layout: BucketLayout) -> Tally {
        let histogram = Histogram::new_with_bounds(1, HDR_MAX_NS, 3)
            .unwrap_or_else(|_| Histogram::new(3).expect("3 significant figures are valid"));
        Tally {
            cpu,
            mhz: mhz.max(1),
            layout,
            samples: 0,
            min: u64::MAX,
            max: 0,
            max_ns: 0,
            buckets: vec![0; layout.count.max(1)],
            overflow: 0,
            histogram,
            ticks: 0,
            moved: false,
            short: vec![0; mhz.clamp(1, MAX_SHORT_TICKS) as usize],
        }
    }

    /// Files one gap of `ticks` counter ticks. A gap under 1 µs reaches
    /// the buckets, the histogram and the extremes at `settle`.
    #[inline(always)]
    pub fn file(&mut self, ticks: u64) {
        // Compared as u64: on 32-bit Arm a long gap must not wrap into a
        // short one.
        if ticks < self.short.len() as u64 {
            self.short[ticks as usize] += 1;
        } else {
            self.file_n(ticks, 1);
        }
    }

    /// Files the short gaps counted so far (the poller does when it
    /// stops).
    pub fn settle(&mut self) {
        for ticks in 0..self.short.len() {
            let n = std::mem::take(&mut self.short[ticks]);
            if n > 0 {
                self.file_n(ticks as u64, n);
            }
        }
    }

    /// A gap of `ticks` in units, as oslat files it.
    pub fn units_of(&self, ticks: u64) -> u64 {
        ticks.saturating_mul(1_000 / self.layout.unit_ns.max(1)) / self.mhz + 1
    }

    /// The fewest ticks a gap of at least `units` units has.
    pub fn ticks_for(&self, units: u64) -> u64 {
        let per_us = 1_000 / self.layout.unit_ns.max(1);
        units
            .saturating_sub(1)
            .saturating_mul(self.mhz)
            .div_ceil(per_us)
    }

    #[inline(never)]
    fn file_n(&mut self, ticks: u64, n: u64) {
        let units = self.units_of(ticks);
        self.samples += n;
        self.min = self.min.min(units);
        self.max = self.max.max(units);
        let above = units.saturating_sub(1).saturating_sub(self.layout.bias);
        let index = above / self.layout.width.max(1);
        let last = self.buckets.len() - 1;
        let slot = if index > last as u64 {
            self.overflow = self
                .overflow
                .saturating_add((index - self.buckets.len() as u64).saturating_mul(n));
            last
        } else {
            index as usize
        };
        self.buckets[slot] += n;
        let ns = ticks.saturating_mul(1_000) / self.mhz;
        self.max_ns = self.max_ns.max(ns);
        let _ = self.histogram.record_n(ns.clamp(1, HDR_MAX_NS), n);
    }

    /// oslat's average, in units: every gap counted at its bucket's upper
    /// bound, plus the overflowed widths.
    pub fn bucket_average(&self) -> f64 {
        if self.samples == 0 {
            return 0.0;
        }
        let sum: f64 = self
            .buckets
            .iter()
            .enumerate()
            .map(|(j, &n)| n as f64 * self.layout.upper(j) as f64)
            .sum::<f64>()
            + self.overflow as f64 * self.layout.width as f64;
        sum / self.samples as f64
    }

    /// Seconds from the first read to the last.
    pub fn duration_secs(&self) -> f64 {
        self.ticks as f64 / (self.mhz as f64 * 1e6)
    }
}

/// One poller to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollSpec {
    pub cpu: usize,
    /// `SCHED_FIFO` at this priority; `None`: the policy latencyd has.
    pub fifo_priority: Option<i32>,
    /// Bytes moved by `memmove` before each read (0: no workload).
    pub workload_bytes: usize,
    pub layout: BucketLayout,
    /// A gap of at least this many units stops every poller (oslat's
    /// `--trace-threshold`).
    pub stop_at_units: Option<u64>,
}

/// Why a poller could not run.
#[derive(Debug)]
pub struct PollError {
    pub cpu: usize,
    pub step: &'static str,
    pub error: io::Error,
}

impl std::fmt::Display for PollError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CPU {}: {}: {}", self.cpu, self.step, self.error)
    }
}

impl std::error::Error for PollError {}

/// The gap that stopped a run (`stop_at_units`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tripped {
    pub cpu: usize,
    pub units: u64,
}

const WAIT: u8 = 0;
const GO: u8 = 1;
const STOP: u8 = 2;

struct Shared {
    command: AtomicU8,
    started: AtomicUsize,
    running: AtomicUsize,
    finished: AtomicUsize,
    failed: AtomicBool,
    /// `cpu << 32 | units` + 1 of the first gap over the threshold (0: none).
    tripped: AtomicU64,
    pollers: usize,
}

/// Measures the counter's rate in ticks per µs: 20 ms against
/// `CLOCK_MONOTONIC`, again until two measurements agree within 0.1 %.
pub fn counter_mhz(counter: Counter) -> u64 {
    if let Some(hz) = counter.stated_hz() {
        return (hz / 1_000_000).max(1);
    }
    let measure = || {
        let (t0, c0) = (sys::clock_now_ns(ClockSource::Monotonic), counter.read());
        let mut t1 = t0;
        while t1 - t0 < 20_000_000 {
            t1 = sys::clock_now_ns(ClockSource::Monotonic);
        }
        let c1 = counter.read();
        // A counter read on another CPU may be behind: never below 0.
        c1.saturating_sub(c0) as f64 * 1e3 / (t1 - t0) as f64
    };
    let mut previous = measure();
    for _ in 0..50 {
        let now = measure();
        if (now - previous).abs() <= now / 1_000.0 {
            return (now as u64).max(1);
        }
        previous = now;
    }
    (previous as u64).max(1)
}

/// Runs one poller per spec for `duration` from their common start, or
/// until `stop` is set or a gap trips a threshold, all starting and
/// stopping together, and returns their tallies in the specs' order.
pub fn run(
    specs: &[PollSpec],
    counter: Counter,
    mhz: u64,
    duration: std::time::Duration,
    stop: &AtomicBool,
) -> Result<(Vec<Tally>, Option<Tripped>), PollError> {
    let shared = Arc::new(Shared {
        command: AtomicU8::new(WAIT),
        started: AtomicUsize::new(0),
        running: AtomicUsize::new(0),
        finished: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        tripped: AtomicU64::new(0),
        pollers: specs.len(),
    });
    let handles: Vec<(usize, JoinHandle<Result<Tally, PollError>>)> = specs
        .iter()
        .map(|&spec| {
            let shared = Arc::clone(&shared);
            let handle = std::thread::Builder::new()
                .name(format!("poll-cpu{}", spec.cpu))
                .spawn(move || poller(spec, counter, mhz, &shared));
            (spec.cpu, handle)
        })
        .map(|(cpu, handle)| match handle {
            Ok(h) => Ok((cpu, h)),
            Err(error) => Err(PollError {
                cpu,
                step: "starting its thread",
                error,
            }),
        })
        .collect::<Result<_, _>>()
        .inspect_err(|_| shared.command.store(STOP, Ordering::SeqCst))?;
    while shared.started.load(Ordering::SeqCst) < specs.len()
        && !shared.failed.load(Ordering::SeqCst)
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    if shared.failed.load(Ordering::SeqCst) {
        shared.command.store(STOP, Ordering::SeqCst);
    } else {
        shared.command.store(GO, Ordering::SeqCst);
        let until = std::time::Instant::now() + duration;
        while std::time::Instant::now() < until
            && !stop.load(Ordering::Relaxed)
            && shared.command.load(Ordering::Relaxed) == GO
            && shared.finished.load(Ordering::Relaxed) == 0
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        shared.command.store(STOP, Ordering::SeqCst);
    }
    let mut tallies = Vec::with_capacity(handles.len());
    let mut first_error = None;
    for (cpu, handle) in handles {
        match handle.join() {
            Ok(Ok(tally)) => tallies.push(tally),
            Ok(Err(err)) => first_error = first_error.or(Some(err)),
            Err(_) => {
                first_error = first_error.or(Some(PollError {
                    cpu,
                    step: "polling",
                    error: io::Error::other("the poller panicked"),
                }))
            }
        }
    }
    if let Some(err) = first_error {
        return Err(err);
    }
    let tripped = match shared.tripped.load(Ordering::SeqCst) {
        0 => None,
        v => Some(Tripped {
            cpu: ((v - 1) >> 32) as usize,
            units: (v - 1) & 0xffff_ffff,
        }),
    };
    Ok((tallies, tripped))
}

fn poller(spec: PollSpec, counter: Counter, mhz: u64, shared: &Shared) -> Result<Tally, PollError> {
    let fail = |step: &'static str, error: io::Error| {
        shared.failed.store(true, Ordering::SeqCst);
        PollError {
            cpu: spec.cpu,
            step,
            error,
        }
    };
    sys::pin_current_thread(spec.cpu).map_err(|e| fail("pinning it to its CPU", e))?;
    if let Some(priority) = spec.fifo_priority {
        sys::set_current_thread_policy(Policy::Fifo, priority)
            .map_err(|e| fail("setting SCHED_FIFO", e))?;
    }
    let mut tally = Tally::new(spec.cpu, mhz, spec.layout);
    let mut src = vec![0u8; spec.workload_bytes];
    let mut dst = vec![0u8; spec.workload_bytes];
    shared.started.fetch_add(1, Ordering::SeqCst);
    while shared.command.load(Ordering::SeqCst) == WAIT {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    if shared.command.load(Ordering::SeqCst) == STOP {
        return Ok(tally);
    }
    shared.running.fetch_add(1, Ordering::SeqCst);
    while shared.running.load(Ordering::Relaxed) < shared.pollers {
        std::hint::spin_loop();
    }
    let limit = spec.stop_at_units.map_or(u64::MAX, |u| tally.ticks_for(u));
    let start = counter.read();
    let mut previous = start;
    loop {
        if !src.is_empty() {
            dst.copy_from_slice(&src);
            std::hint::black_box(&mut dst);
            std::mem::swap(&mut src, &mut dst);
        }
        let now = counter.read();
        let gap = now.wrapping_sub(previous);
        tally.file(gap);
        previous = now;
        if gap >= limit {
            let units = tally.units_of(gap);
            let mark = ((spec.cpu as u64) << 32 | units.min(0xffff_ffff)) + 1;
            let _ = shared
                .tripped
                .compare_exchange(0, mark, Ordering::SeqCst, Ordering::SeqCst);
            shared.command.store(STOP, Ordering::SeqCst);
            break;
        }
        if shared.command.load(Ordering::Relaxed) != GO {
            break;
        }
    }
    tally.ticks = previous.wrapping_sub(start);
    tally.moved = !sys::still_pinned_to(spec.cpu);
    tally.settle();
    shared.finished.fetch_add(1, Ordering::SeqCst);
    while shared.finished.load(Ordering::Relaxed) < shared.pollers {
        std::hint::spin_loop();
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn gaps_are_filed_as_oslat_files_them() {
        let mut tally = Tally::new(0, 1_000, BucketLayout::oslat_default());
        for (ticks, units) in [(0, 1), (999, 1), (1_000, 2), (31_999, 32), (40_000, 41)] {
            assert_eq!(tally.units_of(ticks), units, "{ticks} ticks");
            assert!(tally.ticks_for(units) <= ticks, "{units} units");
            assert_eq!(
                tally.units_of(tally.ticks_for(units)),
                units,
                "{units} units"
            );
            tally.file(ticks);
        }
        assert_eq!(
            tally.samples, 3,
            "the gaps of 1 µs and more so far; the rest at settle"
        );
        tally.settle();
        assert_eq!(tally.buckets[0], 2);
        assert_eq!(tally.buckets[1], 1);
        assert_eq!(
            tally.buckets[31], 2,
            "32 µs and the overflow share the last bucket"
        );
        assert_eq!(tally.overflow, 40 - 32);
        assert_eq!((tally.min, tally.max, tally.samples), (1, 41, 5));
        assert_eq!(tally.max_ns, 40_000);
        assert!(tally.histogram.equivalent(tally.histogram.max(), 40_000));
        // A gap of 2^32 + 5 ticks is long, on 32-bit builds too.
        tally.file((1 << 32) + 5);
        tally.settle();
        assert_eq!(tally.max, (1u64 << 32) / 1_000 + 1);
    }

    #[test]
    fn a_bias_and_wider_buckets_shift_the_labels() {
        let layout = BucketLayout {
            count: 4,
            width: 2,
            unit_ns: 1_000,
            bias: 3,
        };
        let mut tally = Tally::new(0, 1_000, layout);
        tally.file(3_500); // 4 µs: 1 above the bias, the first bucket (3, 5]
        tally.file(5_000); // 6 µs: the second bucket (5, 7]
        tally.settle();
        assert_eq!(tally.buckets, vec![1, 1, 0, 0]);
        assert_eq!((layout.upper(0), layout.upper(1)), (5, 7));
        assert!((tally.bucket_average() - 6.0).abs() < 1e-9);
    }

    #[test]
    fn nanosecond_units_file_nanoseconds() {
        let layout = BucketLayout {
            count: 64,
            width: 500,
            unit_ns: 1,
            bias: 0,
        };
        let mut tally = Tally::new(0, 2_000, layout);
        assert_eq!(tally.units_of(3_000), 1_501);
        tally.file(3_000);
        tally.file(1_999); // 999.5 ns: 1,000 ns, in the second bucket (500, 1000]
        tally.settle();
        assert_eq!((tally.buckets[1], tally.buckets[3]), (1, 1));
        assert_eq!((tally.min, tally.max), (1_000, 1_501));
    }

    fn spec_here(stop_at_units: Option<u64>) -> PollSpec {
        PollSpec {
            cpu: sys::current_cpu().unwrap_or(0),
            fifo_priority: None,
            workload_bytes: 4_096,
            layout: BucketLayout::oslat_default(),
            stop_at_units,
        }
    }

    #[test]
    fn pollers_run_until_asked_to_stop() {
        let counter = Counter::native();
        let mhz = counter_mhz(counter);
        let stop = AtomicBool::new(false);
        let spec = spec_here(None);
        let (tallies, tripped) = run(&[spec], counter, mhz, Duration::from_millis(100), &stop)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tripped, None);
        let tally = &tallies[0];
        assert!(tally.samples > 1_000, "{} gaps in 100 ms", tally.samples);
        assert_eq!(tally.buckets.iter().sum::<u64>(), tally.samples);
        assert!(tally.duration_secs() > 0.05, "{} s", tally.duration_secs());
        assert!(tally.min >= 1 && tally.min <= tally.max);
    }

    #[test]
    fn a_gap_over_the_threshold_stops_the_run_and_names_its_cpu() {
        let counter = Counter::native();
        let stop = AtomicBool::new(false);
        let spec = spec_here(Some(1));
        let mhz = counter_mhz(counter);
        let (tallies, tripped) = run(&[spec], counter, mhz, Duration::from_secs(60), &stop)
            .unwrap_or_else(|e| panic!("{e}"));
        let tripped = tripped.expect("every gap is at least 1 unit");
        assert_eq!((tripped.cpu, tallies[0].samples), (spec.cpu, 1));
        assert!(
            !stop.load(Ordering::SeqCst),
            "the caller's flag is left alone"
        );
    }

    #[test]
    fn a_cpu_that_does_not_exist_is_named_in_the_error() {
        let counter = Counter::native();
        let mut spec = spec_here(None);
        spec.cpu = crate::cpulist::MAX_CPUS - 1;
        let err = run(
            &[spec],
            counter,
            1_000,
            Duration::from_secs(60),
            &AtomicBool::new(false),
        )
        .expect_err("no such CPU");
        assert_eq!((err.cpu, err.step), (spec.cpu, "pinning it to its CPU"));
    }
}
