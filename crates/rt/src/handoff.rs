//! The wait-free handoff of recorded intervals from a real-time sampler to
//! whoever consumes them (`measure`'s main thread, or the daemon).
//!
//! Contract: after construction nothing here allocates or frees on the
//! sampler's side, and `Publisher::publish` is wait-free — at most one pop
//! and one push on single-producer single-consumer rtrb ring buffers, no
//! loop, no lock, no system call.
//!
//! Design: a fixed set of `LatencyStats` buffers circulates. The sampler
//! records into the one it holds; to publish, it takes an empty buffer
//! from the `empty` queue and sends its full one down the `full` queue.
//! The consumer merges each full buffer into its own state, resets it and
//! sends it back. If the consumer falls behind and no empty buffer is
//! waiting, `publish` returns `false` and the sampler simply keeps
//! recording into the buffer it has: the interval grows, nothing is lost,
//! nothing is counted twice. Both queues can hold every buffer, so a push
//! that follows a successful pop cannot fail.
//!
//! Buffers travel boxed: a publish moves two 8-byte pointers through the
//! rings instead of two 240-byte structs, which halved its median and tail
//! in `benches/publish_tail.rs` (see ARCHITECTURE.md). Moving a box never
//! allocates.
//!
//! When to use it: a thread that must not wait or allocate records into
//! `Publisher::stats_mut` and calls `publish` at its own boundaries; any
//! ordinary thread calls `Collector::drain` as often as it likes. For a
//! thread that may block, a mutex is simpler; this is for the real-time
//! side.
//!
//! ```
//! use latencyd_rt::handoff;
//! use latencyd_rt::stats::LatencyStats;
//!
//! // The sampler's template: histogram written in full, no -h histogram.
//! let template = LatencyStats::for_sampler(100_000, None);
//! let (mut sampler, mut consumer) = handoff::channel(&template, handoff::DEFAULT_BUFFERS);
//! let mut total = LatencyStats::new(100_000, None);
//!
//! // Real-time side: record, publish at a boundary (wait-free).
//! sampler.stats_mut().record(12_000, 0);
//! sampler.stats_mut().record(250_000, 1);
//! assert!(sampler.publish());
//! // A consumer that has not drained yet: the next publish finds no
//! // empty buffer and the sampler keeps its interval, losing nothing.
//! sampler.stats_mut().record(8_000, 2);
//! assert!(!sampler.publish());
//!
//! // Consumer side: merge what arrived, oldest first.
//! let drained = consumer.drain(|interval| total.merge(interval)).unwrap();
//! assert_eq!((drained, total.count, total.max_ns, total.spikes), (1, 2, 250_000, 1));
//! // The buffer went back, so the next publish passes the kept sample.
//! assert!(sampler.publish());
//! consumer.drain(|interval| total.merge(interval)).unwrap();
//! assert_eq!((total.count, total.min_ns()), (3, 8_000));
//! ```

use std::mem;

use rtrb::{Consumer, Producer, RingBuffer};

use crate::stats::LatencyStats;

/// How many buffers circulate per sampler: one being recorded, one on its
/// way to the consumer, one on its way back, one spare for a consumer that
/// is briefly late.
pub const DEFAULT_BUFFERS: usize = 2;

/// The sampler's end.
pub struct Publisher {
    current: Box<LatencyStats>,
    full_tx: Producer<Box<LatencyStats>>,
    empty_rx: Consumer<Box<LatencyStats>>,
}

/// The consumer's end.
pub struct Collector {
    full_rx: Consumer<Box<LatencyStats>>,
    empty_tx: Producer<Box<LatencyStats>>,
}

/// Creates a handoff with `n_buffers` (at least 2) empty intervals shaped
/// like `template`, each with its histogram allocated and written in full
/// (`LatencyStats::empty_interval`), so the sampler never allocates nor
/// faults on them.
pub fn channel(template: &LatencyStats, n_buffers: usize) -> (Publisher, Collector) {
    let n_buffers = n_buffers.max(2);
    let (mut full_tx, mut full_rx) = RingBuffer::new(n_buffers);
    let (mut empty_tx, mut empty_rx) = RingBuffer::new(n_buffers);
    let fresh = || Box::new(template.empty_interval());
    let mut current = fresh();
    // Pass a buffer once through every slot of both rings, so that no
    // push of the sampler's is the first write to a page.
    for _ in 0..n_buffers {
        for (tx, rx) in [(&mut full_tx, &mut full_rx), (&mut empty_tx, &mut empty_rx)] {
            let (Ok(()), Ok(back)) = (tx.push(current), rx.pop()) else {
                unreachable!("an empty ring takes one buffer and gives it back");
            };
            current = back;
        }
    }
    for _ in 1..n_buffers {
        // Capacity is n_buffers and fewer than that are pushed.
        if empty_tx.push(fresh()).is_err() {
            unreachable!("the empty queue holds every buffer");
        }
    }
    (
        Publisher {
            current,
            full_tx,
            empty_rx,
        },
        Collector { full_rx, empty_tx },
    )
}

impl Publisher {
    /// The interval being recorded.
    #[inline]
    pub fn stats_mut(&mut self) -> &mut LatencyStats {
        &mut self.current
    }

    /// Sends the current interval to the consumer if an empty buffer is
    /// available; otherwise keeps it and returns `false`. Wait-free.
    #[inline]
    pub fn publish(&mut self) -> bool {
        let Ok(empty) = self.empty_rx.pop() else {
            return false;
        };
        let full = mem::replace(&mut self.current, empty);
        match self.full_tx.push(full) {
            Ok(()) => true,
            Err(rtrb::PushError::Full(full)) => {
                // Unreachable while the queues hold every buffer (see the
                // module doc). Should it ever happen, keep recording into the
                // full interval, and leak the empty one rather than free
                // memory on a real-time thread.
                mem::forget(mem::replace(&mut self.current, full));
                false
            }
        }
    }

    /// Ends publishing and returns the interval recorded since the last
    /// successful publish. Called once the sampler has left real-time
    /// mode; the consumer merges it after draining the queue.
    pub fn into_remainder(self) -> LatencyStats {
        *self.current
    }
}

impl Collector {
    /// Hands every published interval to `merge`, oldest first, then
    /// recycles it. Returns how many intervals were drained, or the first
    /// error of `merge` (the interval that failed is still recycled).
    pub fn drain<E>(
        &mut self,
        mut merge: impl FnMut(&LatencyStats) -> Result<(), E>,
    ) -> Result<usize, E> {
        let mut drained = 0;
        while let Ok(mut interval) = self.full_rx.pop() {
            let merged = merge(&interval);
            interval.reset();
            // The empty queue can hold every buffer, so this cannot fail.
            let _ = self.empty_tx.push(interval);
            merged?;
            drained += 1;
        }
        Ok(drained)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    fn template() -> LatencyStats {
        LatencyStats::new(u64::MAX, None)
    }

    #[test]
    fn every_sample_arrives_exactly_once_when_the_consumer_is_slow() {
        let (mut publisher, mut collector) = channel(&template(), 3);
        let mut total = template();
        let mut published = 0;
        let mut refused = 0;
        for i in 0..10_000u64 {
            publisher.stats_mut().record(i + 1, i);
            if i % 10 == 9 {
                if publisher.publish() {
                    published += 1;
                } else {
                    refused += 1;
                }
            }
            // The consumer only wakes up now and then.
            if i % 997 == 0 {
                collector
                    .drain(|s| {
                        total.merge(s).unwrap();
                        Ok::<_, Infallible>(())
                    })
                    .unwrap();
            }
        }
        collector
            .drain(|s| {
                total.merge(s).unwrap();
                Ok::<_, Infallible>(())
            })
            .unwrap();
        total.merge(&publisher.into_remainder()).unwrap();
        assert!(published > 0 && refused > 0, "{published} {refused}");
        assert_eq!(total.count, 10_000);
        assert_eq!(total.sum_ns, (1..=10_000u128).sum::<u128>());
        assert_eq!(total.max_ns, 10_000);
        assert_eq!(total.min_ns(), 1);
    }

    #[test]
    fn publish_fails_only_while_every_buffer_is_out() {
        let (mut publisher, mut collector) = channel(&template(), 2);
        publisher.stats_mut().record(1, 0);
        assert!(publisher.publish());
        publisher.stats_mut().record(2, 1);
        assert!(
            !publisher.publish(),
            "the only spare buffer is with the consumer"
        );
        let mut seen = Vec::new();
        collector
            .drain(|s| {
                seen.push(s.count);
                Ok::<_, Infallible>(())
            })
            .unwrap();
        assert_eq!(seen, vec![1]);
        assert!(publisher.publish());
        collector
            .drain(|s| {
                seen.push(s.count);
                Ok::<_, Infallible>(())
            })
            .unwrap();
        assert_eq!(seen, vec![1, 1]);
    }

    #[test]
    fn threads_lose_and_duplicate_nothing() {
        let (mut publisher, mut collector) = channel(&template(), DEFAULT_BUFFERS);
        const N: u64 = 200_000;
        let sampler = std::thread::spawn(move || {
            for i in 0..N {
                publisher.stats_mut().record(i, i);
                if i % 64 == 0 {
                    publisher.publish();
                }
            }
            publisher.into_remainder()
        });
        let mut total = template();
        while !sampler.is_finished() {
            collector.drain(|s| total.merge(s).map_err(|_| ())).unwrap();
        }
        let remainder = sampler.join().unwrap();
        collector.drain(|s| total.merge(s).map_err(|_| ())).unwrap();
        total.merge(&remainder).unwrap();
        assert_eq!(total.count, N);
        assert_eq!(total.sum_ns, (0..N as u128).sum::<u128>());
    }
}
