//! What timerlat measured on each CPU, by context: exact count, minimum,
//! maximum and sum, the HDR histogram every latency figure of latencyd
//! keeps, and 1 µs bins as `rtla timerlat hist` prints them.

use crate::instruments::event::{Context, TimerlatSample};
use crate::stats::LatencyStats;
use crate::stats::LinearHistogram;

/// One CPU's statistics.
#[derive(Debug, Clone)]
pub struct CpuTally {
    pub cpu: usize,
    /// By `Context::index`: IRQ, thread, user.
    pub contexts: [LatencyStats; 3],
    /// The lowest and highest period numbers seen (`u32::MAX` and 0
    /// while none): the kernel counts its periods from 1 when it starts,
    /// so the span is the periods it ran while latencyd read.
    pub first_seqnum: u32,
    pub last_seqnum: u32,
    /// Periods of earlier runs: the kernel counts from 1 again when
    /// latencyd's threads start again.
    pub earlier_periods: u64,
    /// The period whose thread was latest, split.
    pub worst: Option<Split>,
    /// The latest IRQ sample (period number, latency): the thread sample
    /// of the same period comes after it.
    last_irq: Option<(u32, u64)>,
}

/// One period's wake-up split into its parts, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    pub seqnum: u32,
    /// How late the timer's IRQ ran (None: its sample was not read with
    /// the thread's).
    pub irq_ns: Option<u64>,
    pub thread_ns: u64,
    /// How late latencyd's thread came back to user space (the `user`
    /// context, read after the thread's).
    pub user_ns: Option<u64>,
    /// When the thread ran, `CLOCK_MONOTONIC`.
    pub thread_at_ns: u64,
}

impl CpuTally {
    /// The periods the kernel ran from the first one read to the last:
    /// each has an IRQ and a thread sample unless events were lost.
    pub fn periods(&self) -> u64 {
        self.earlier_periods + span(self.first_seqnum, self.last_seqnum)
    }

    pub fn stats(&self, context: Context) -> &LatencyStats {
        &self.contexts[context.index()]
    }
}

impl CpuTally {
    /// Keeps the worst thread period's split: its IRQ sample came before
    /// it, its user sample comes after.
    fn split(&mut self, sample: TimerlatSample, at_ns: u64) {
        let latency = sample.latency_ns;
        match sample.context {
            Context::Irq => self.last_irq = Some((sample.seqnum, latency)),
            Context::Thread if self.worst.is_none_or(|w| latency > w.thread_ns) => {
                self.worst = Some(Split {
                    seqnum: sample.seqnum,
                    irq_ns: (self.last_irq)
                        .filter(|&(seq, _)| seq == sample.seqnum)
                        .map(|(_, ns)| ns),
                    thread_ns: latency,
                    user_ns: None,
                    thread_at_ns: at_ns,
                });
            }
            Context::User => {
                if let Some(w) = self.worst.as_mut().filter(|w| w.seqnum == sample.seqnum) {
                    w.user_ns = Some(latency);
                }
            }
            Context::Thread => {}
        }
    }
}

/// The periods from `first` to `last` (0 while `last < first`).
pub fn span(first: u32, last: u32) -> u64 {
    if last < first {
        0
    } else {
        u64::from(last - first) + 1
    }
}

/// Whether `seqnum` starts a new run after `last` (the kernel numbers each
/// run's periods from 1; within a run a context's sample may come one
/// period behind another's).
pub fn restarted(seqnum: u32, last: u32) -> bool {
    seqnum.saturating_add(1) < last
}

/// Every measured CPU's statistics.
#[derive(Debug, Clone)]
pub struct Tally {
    pub cpus: Vec<CpuTally>,
}

impl Tally {
    /// Empty statistics for `cpus`, with `bins` bins of 1 µs (0: none),
    /// counting latencies over `threshold_ns` as spikes.
    pub fn new(cpus: &[usize], bins: usize, threshold_ns: u64) -> Tally {
        let stats = || {
            let linear = (bins > 0).then(|| LinearHistogram::new(bins, 1000));
            LatencyStats::new(threshold_ns, linear)
        };
        Tally {
            cpus: cpus
                .iter()
                .map(|&cpu| CpuTally {
                    cpu,
                    contexts: [stats(), stats(), stats()],
                    first_seqnum: u32::MAX,
                    last_seqnum: 0,
                    earlier_periods: 0,
                    worst: None,
                    last_irq: None,
                })
                .collect(),
        }
    }

    /// The empty tally of the next interval: each CPU's latest IRQ sample
    /// carried over, for a thread sample of the same period read later
    /// (a thread held 100 ms or more is read in a later interval).
    pub fn next(&self, bins: usize, threshold_ns: u64) -> Tally {
        let cpus: Vec<usize> = self.cpus.iter().map(|c| c.cpu).collect();
        let mut next = Tally::new(&cpus, bins, threshold_ns);
        for (n, c) in next.cpus.iter_mut().zip(&self.cpus) {
            n.last_irq = c.last_irq;
        }
        next
    }

    /// Files one sample of `cpu`, taken at `at_ns` (`CLOCK_MONOTONIC`); a
    /// CPU not measured is ignored.
    pub fn record(&mut self, cpu: usize, sample: TimerlatSample, at_ns: u64) {
        let Some(tally) = self.cpus.iter_mut().find(|t| t.cpu == cpu) else {
            return;
        };
        let stats = &mut tally.contexts[sample.context.index()];
        let idx = stats.count;
        stats.record_at(sample.latency_ns, idx, at_ns);
        tally.split(sample, at_ns);
        if restarted(sample.seqnum, tally.last_seqnum) {
            tally.earlier_periods += span(tally.first_seqnum, tally.last_seqnum);
            tally.first_seqnum = sample.seqnum;
            tally.last_seqnum = sample.seqnum;
        }
        tally.first_seqnum = tally.first_seqnum.min(sample.seqnum);
        tally.last_seqnum = tally.last_seqnum.max(sample.seqnum);
    }
}

/// A finished timerlat run as plain data.
#[derive(Debug, Clone)]
pub struct TimerlatReport {
    pub period_us: u64,
    /// Whether latencyd's own threads were the workload (the `user`
    /// context measured).
    pub user: bool,
    /// How long it ran.
    pub seconds: f64,
    pub tally: Tally,
    /// What happened on the way: settings changed and set back, another
    /// program that started timerlat or osnoise beside it, lost events.
    pub notes: Vec<String>,
}

impl TimerlatReport {
    /// The contexts measured, in the kernel's order.
    pub fn contexts(&self) -> Vec<Context> {
        Context::ALL
            .into_iter()
            .filter(|&c| c != Context::User || self.user)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_filed_by_cpu_and_context() {
        let mut tally = Tally::new(&[0, 2], 10, 5_000);
        let sample = |seqnum, context, latency_ns| TimerlatSample {
            seqnum,
            context,
            latency_ns,
        };
        tally.record(0, sample(1, Context::Irq, 1_500), 10);
        tally.record(0, sample(1, Context::Thread, 7_200), 20);
        tally.record(2, sample(4, Context::Irq, 900), 30);
        tally.record(1, sample(9, Context::Irq, 900), 40);
        let cpu0 = &tally.cpus[0];
        assert_eq!(cpu0.stats(Context::Irq).count, 1);
        assert_eq!(cpu0.stats(Context::Thread).max_ns, 7_200);
        assert_eq!(cpu0.stats(Context::Thread).spikes, 1);
        assert_eq!(cpu0.stats(Context::Thread).linear().unwrap().bins()[7], 1);
        assert_eq!(cpu0.periods(), 1);
        assert_eq!(cpu0.stats(Context::Thread).max_at_ns(), Some(20));
        assert_eq!(tally.cpus[1].periods(), 1, "period 4 alone");
        tally.record(2, sample(7, Context::Irq, 900), 50);
        assert_eq!(tally.cpus[1].periods(), 4, "periods 4 to 7");
        // The threads started again: the kernel counts from 1 again.
        tally.record(2, sample(1, Context::Irq, 900), 60);
        tally.record(2, sample(2, Context::Irq, 900), 70);
        assert_eq!(tally.cpus[1].periods(), 6, "4 to 7, then 1 to 2");
        assert!(tally.cpus.iter().all(|c| c.stats(Context::User).count == 0));
    }

    #[test]
    fn the_worst_thread_period_is_split_into_its_irq_thread_and_user_parts() {
        let mut tally = Tally::new(&[0], 0, 5_000);
        let sample = |seqnum, context, latency_ns| TimerlatSample {
            seqnum,
            context,
            latency_ns,
        };
        tally.record(0, sample(1, Context::Irq, 9_000), 10);
        tally.record(0, sample(1, Context::Thread, 12_000), 11);
        tally.record(0, sample(1, Context::User, 13_000), 12);
        // Period 2: a late IRQ, an on-time thread after it.
        tally.record(0, sample(2, Context::Irq, 40_000), 20);
        tally.record(0, sample(2, Context::Thread, 41_000), 21);
        // Period 3: a spinner held the thread; its IRQ was on time.
        tally.record(0, sample(3, Context::Irq, 2_000), 30);
        tally.record(0, sample(3, Context::Thread, 100_000_000), 31);
        tally.record(0, sample(2, Context::User, 42_000), 32);
        tally.record(0, sample(3, Context::User, 100_001_000), 33);
        tally.record(0, sample(4, Context::Thread, 3_000), 40);
        let worst = tally.cpus[0].worst.unwrap();
        assert_eq!(
            worst,
            Split {
                seqnum: 3,
                irq_ns: Some(2_000),
                thread_ns: 100_000_000,
                user_ns: Some(100_001_000),
                thread_at_ns: 31,
            },
            "another period's user sample is not taken"
        );
        // Read in the next interval, the thread still finds its IRQ.
        let mut first = Tally::new(&[0], 0, 5_000);
        first.record(0, sample(5, Context::Irq, 3_000), 1);
        let mut next = first.next(0, 5_000);
        assert_eq!(next.cpus[0].stats(Context::Irq).count, 0);
        next.record(0, sample(5, Context::Thread, 400_000_000), 2);
        assert_eq!(next.cpus[0].worst.unwrap().irq_ns, Some(3_000));
        let mut lost = Tally::new(&[0], 0, 5_000);
        lost.record(0, sample(8, Context::Irq, 1_000), 1);
        lost.record(0, sample(9, Context::Thread, 7_000), 2);
        assert_eq!(
            lost.cpus[0].worst.unwrap().irq_ns,
            None,
            "period 9's IRQ was not read"
        );
    }
}
