//! `TimerlatPart`: what the kernel's timerlat measured (`[timerlat]`),
//! as its run took it in — per CPU and context (`irq`, `thread`,
//! `user`) the lifetime statistics, the window maximum by sample time, the
//! window's histograms for `/plot.svg?source=timerlat&window=`, the
//! Prometheus buckets and the native ones, exactly as for a sampler's CPU.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;

use super::source::{Source, Status};
use super::tally::{Tally, restarted, span};
use crate::config::Config;
use crate::instruments::event::Context;
use crate::instruments::shape::{Part, PlotLine};
use crate::series::{BucketCounts, NativeCounts, WindowHistogram, WindowMax};
use crate::stats::LatencyStats;

/// One CPU's one context.
#[derive(Debug, Clone)]
pub struct ContextView {
    pub lifetime: LatencyStats,
    pub window: WindowMax,
    pub recent: WindowHistogram,
    pub buckets: BucketCounts,
    pub native: NativeCounts,
}

#[derive(Debug, Clone)]
pub struct TimerlatPart {
    /// The source's own status (locked on its own, briefly).
    pub status: Arc<Mutex<Status>>,
    /// By (CPU, context).
    pub series: BTreeMap<(usize, Context), ContextView>,
    /// By CPU: the first and last period numbers of the kernel's current
    /// run, and the periods of earlier runs (the kernel counts from 1
    /// again when latencyd's threads start again).
    pub seqnums: BTreeMap<usize, (u32, u32, u64)>,
    /// By CPU: periods while a hwnoise window spun it, not counted.
    pub kept_apart: BTreeMap<usize, u64>,
    pub(super) window_ns: u64,
    spike_threshold_ns: u64,
    buckets_ns: Vec<u64>,
}

impl TimerlatPart {
    /// `timerlat.enabled = false`, as the status says.
    pub fn off(config: &Config) -> TimerlatPart {
        TimerlatPart::new(Source::disabled().status(), config)
    }

    pub fn new(status: Arc<Mutex<Status>>, config: &Config) -> TimerlatPart {
        TimerlatPart {
            status,
            series: BTreeMap::new(),
            seqnums: BTreeMap::new(),
            kept_apart: BTreeMap::new(),
            window_ns: config.export.max_window_ns,
            spike_threshold_ns: config.measure.spike_threshold_ns,
            buckets_ns: config.export.buckets_ns.clone(),
        }
    }

    /// The periods the kernel ran on `cpu` while latencyd read.
    pub fn periods(&self, cpu: usize) -> u64 {
        self.seqnums
            .get(&cpu)
            .map_or(0, |&(first, last, earlier)| earlier + span(first, last))
            .saturating_sub(self.kept_apart.get(&cpu).copied().unwrap_or(0))
    }

    /// A copy of the source's status.
    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Takes in one interval from the source.
    ///
    /// The CPUs a hwnoise window spins (`spun`) keep their period count
    /// in step, their samples out of the figures and periods; returns
    /// those periods per CPU.
    pub fn absorb(&mut self, interval: &Tally, spun: &BTreeSet<usize>) -> Vec<(usize, u64)> {
        let mut kept_apart = Vec::new();
        for cpu in &interval.cpus {
            if cpu.periods() > 0 {
                let (first, last, earlier) =
                    self.seqnums.entry(cpu.cpu).or_insert((u32::MAX, 0, 0));
                *earlier += cpu.earlier_periods;
                if cpu.earlier_periods > 0 || restarted(cpu.first_seqnum, *last) {
                    *earlier += span(*first, *last);
                    (*first, *last) = (cpu.first_seqnum, cpu.last_seqnum);
                }
                *first = (*first).min(cpu.first_seqnum);
                *last = (*last).max(cpu.last_seqnum);
            }
            if spun.contains(&cpu.cpu) {
                *self.kept_apart.entry(cpu.cpu).or_default() += cpu.periods();
                kept_apart.push((cpu.cpu, cpu.periods()));
                continue;
            }
            for context in Context::ALL {
                let stats = cpu.stats(context);
                if stats.count == 0 {
                    continue;
                }
                let view = self
                    .series
                    .entry((cpu.cpu, context))
                    .or_insert_with(|| ContextView {
                        lifetime: LatencyStats::new(self.spike_threshold_ns, None),
                        window: WindowMax::new(self.window_ns),
                        recent: WindowHistogram::new(self.window_ns),
                        buckets: BucketCounts::new(&self.buckets_ns),
                        native: NativeCounts::default(),
                    });
                // Same shape: both are plain HDR statistics.
                let _ = view.lifetime.merge(stats);
                if let Some(at) = stats.max_at_ns() {
                    view.window.record(at, stats.max_ns);
                }
                view.recent.record(stats);
                view.buckets.add(stats);
                view.native.add(stats);
            }
        }
        kept_apart
    }
}

impl Part for TimerlatPart {
    fn status(&self) -> Option<Box<RawValue>> {
        Some(super::render::status(self))
    }

    fn page_list(&self, now_ns: u64) -> Vec<String> {
        super::render::page_lines(self, now_ns)
    }

    fn plot_lines(&self) -> Vec<PlotLine<'_>> {
        (self.series.iter())
            .map(|(&(cpu, context), v)| PlotLine {
                cpu,
                line: context.name(),
                lifetime: &v.lifetime,
                recent: &v.recent,
                window: &v.window,
            })
            .collect()
    }

    fn unplotted(&self) -> Option<String> {
        super::render::unplotted(self)
    }

    /// The kernel's `timerlat/N` threads, while they are latencyd's
    /// timerlat's workload (where the kernel has no `timerlat_fd`).
    fn owns_kernel_thread(&self, comm: &[u8]) -> bool {
        let status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        status.available && !status.user_threads && comm.starts_with(b"timerlat/")
    }

    /// The windows at a new `export.max_window` (a live reload), keeping
    /// what they hold.
    fn resize_window(&mut self, window_ns: u64, now_ns: u64) {
        self.window_ns = window_ns;
        for view in self.series.values_mut() {
            view.window = view.window.resized(window_ns, now_ns);
            view.recent = view.recent.resized(window_ns, now_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruments::event::TimerlatSample;

    #[test]
    fn intervals_add_up_by_cpu_and_context() {
        let config = crate::instruments::registry::builtin_config();
        let mut state = TimerlatPart::off(&config);
        for round in 1..=3u32 {
            let mut interval = Tally::new(&[0, 1], 0, config.measure.spike_threshold_ns);
            let sample = |context, latency_ns| TimerlatSample {
                seqnum: round,
                context,
                latency_ns,
            };
            interval.record(
                0,
                sample(Context::Irq, 2_000 * u64::from(round)),
                u64::from(round),
            );
            interval.record(0, sample(Context::Thread, 9_000), u64::from(round));
            state.absorb(&interval, &BTreeSet::new());
        }
        let irq = &state.series[&(0, Context::Irq)];
        assert_eq!((irq.lifetime.count, irq.lifetime.max_ns), (3, 6_000));
        assert_eq!(irq.window.max(3), Some(6_000));
        let (bins, _) = irq.recent.bins_within(3, 1_000_000_000);
        assert_eq!(bins.values().sum::<u64>(), 3, "the window's histogram");
        assert_eq!(state.series[&(0, Context::Thread)].lifetime.count, 3);
        assert!(
            !state.series.contains_key(&(1, Context::Irq)),
            "no samples, no series"
        );
        assert_eq!(state.periods(0), 3);
        // The threads started again: the kernel's periods count from 1.
        let mut interval = Tally::new(&[0, 1], 0, config.measure.spike_threshold_ns);
        for seqnum in 1..=2 {
            let sample = TimerlatSample {
                seqnum,
                context: Context::Irq,
                latency_ns: 1_000,
            };
            interval.record(0, sample, 10);
        }
        state.absorb(&interval, &BTreeSet::new());
        assert_eq!(state.periods(0), 5);
        assert_eq!(state.periods(1), 0);
        assert!(!state.status().enabled);
        // A hwnoise window spins CPU 0: its periods and samples stay out.
        let mut interval = Tally::new(&[0, 1], 0, config.measure.spike_threshold_ns);
        for seqnum in 3..=4 {
            let sample = TimerlatSample {
                seqnum,
                context: Context::Irq,
                latency_ns: 400_000_000,
            };
            interval.record(0, sample, 20);
        }
        let kept = state.absorb(&interval, &BTreeSet::from([0]));
        assert_eq!(kept, vec![(0, 2)]);
        assert_eq!(state.periods(0), 5, "counts and periods stay equal");
        assert_eq!(state.series[&(0, Context::Irq)].lifetime.count, 5);
        assert_eq!(state.series[&(0, Context::Irq)].lifetime.max_ns, 6_000);
        // A reload to a 10 s window keeps what the windows hold.
        state.resize_window(10_000_000_000, 20);
        let irq = &state.series[&(0, Context::Irq)];
        assert_eq!(irq.window.max(20), Some(6_000));
        let bins = irq.recent.bins_within(20, 10_000_000_000).0;
        assert_eq!(bins.keys().copied().collect::<Vec<_>>(), [1, 2, 4, 6]);
        assert_eq!(state.window_ns, 10_000_000_000, "and new series get it");
    }

    #[test]
    fn the_kernels_timerlat_threads_are_its_own_only_while_they_are_its_workload() {
        let config = crate::instruments::registry::builtin_config();
        let running = |available, user_threads| {
            let status = Status {
                enabled: true,
                available,
                user_threads,
                ..Status::default()
            };
            TimerlatPart::new(Arc::new(Mutex::new(status)), &config)
        };
        let kernel_threads = running(true, false);
        assert!(kernel_threads.owns_kernel_thread(b"timerlat/3"));
        assert!(!kernel_threads.owns_kernel_thread(b"ktimers/3"));
        // Its own threads (timerlat_fd) are latencyd's process's: the
        // observer leaves those out itself. Off or unavailable, the
        // kernel's threads are someone else's (rtla's).
        assert!(!running(true, true).owns_kernel_thread(b"timerlat/3"));
        assert!(!running(false, false).owns_kernel_thread(b"timerlat/3"));
        assert!(!TimerlatPart::off(&config).owns_kernel_thread(b"timerlat/3"));
    }
}
