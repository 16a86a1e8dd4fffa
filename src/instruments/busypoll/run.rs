//! The busy-poll windows (`[busypoll]`), stepped by the collector's
//! tick: as a window opens, one ordinary thread starts the window's
//! pollers (one per CPU, pinned, the counter's rate measured first) and
//! waits for them; the tick only looks at whether it finished, takes its
//! tallies into the part and logs what it found. A CPU a sampler measures
//! is never polled: the configuration refuses it, and a CPU given a
//! sampler since (hotplug) is left out of the window and said.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::{error, info, warn};

use super::BusypollConfig;
use super::BusypollPart;
use crate::cpulist::format_cpu_list;
use crate::instruments::shape::{Boxed, Run, Start, Started, Step};
use crate::load::Window;
use crate::rt::poll::{self, BucketLayout, PollSpec, Tally};
use crate::rt::sys::Counter;
use crate::units::format_duration_ns;

/// What a window's thread returns: the counter read and each CPU's tally.
type Polled = Result<(&'static str, Vec<Tally>), String>;

enum Phase {
    Idle,
    Polling {
        window: Window,
        stop: Arc<AtomicBool>,
        thread: JoinHandle<Polled>,
    },
    /// The window ran, or could not: nothing more runs until it ends.
    Done(Window),
}

struct BusypollRun {
    config: BusypollConfig,
    /// The samplers' CPUs at start, never polled.
    measured: Vec<usize>,
    phase: Phase,
}

/// Its part, and its run when `[busypoll]` is on.
pub(super) fn start(start: &Start<'_>) -> Started {
    let config = start.config.section::<super::BusypollConfig>();
    let part = Box::new(BusypollPart::new(start.config));
    if !config.enabled {
        return Started { part, run: None };
    }
    info!(
        "busypoll: busy-poll windows on CPUs {} every {} for {} (threshold {}, {})",
        format_cpu_list(&config.cpus),
        format_duration_ns(nanos(config.schedule.every)),
        format_duration_ns(nanos(config.schedule.duration)),
        format_duration_ns(config.threshold_ns),
        config.priority.map_or_else(
            || "normal policy".to_string(),
            |p| format!("SCHED_FIFO {p}")
        )
    );
    let run = BusypollRun {
        config: config.clone(),
        measured: start.measured.to_vec(),
        phase: Phase::Idle,
    };
    Started {
        part,
        run: Some(Box::new(run)),
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl BusypollRun {
    /// The window's thread: pollers on the configured CPUs that no
    /// sampler measures, until the window ends or `stop` is set.
    fn open(&self, window: Window, now: SystemTime) -> Result<Phase, String> {
        let (sampled, cpus): (Vec<usize>, Vec<usize>) =
            (self.config.cpus.iter()).partition(|c| self.measured.contains(c));
        if !sampled.is_empty() {
            warn!(
                "busypoll: CPUs {} have a sampler and are left out of the window",
                format_cpu_list(&sampled)
            );
        }
        if cpus.is_empty() {
            return Err("every configured CPU has a sampler".to_string());
        }
        let length = window.end.duration_since(now).unwrap_or_default();
        let priority = self.config.priority;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("busypoll".to_string())
            .spawn(move || poll_window(&cpus, priority, length, &stopped))
            .map_err(|e| format!("its thread cannot start ({e})"))?;
        Ok(Phase::Polling {
            window,
            stop,
            thread,
        })
    }

    /// A finished window's tallies into the part, and into the log.
    fn close(window: Window, polled: Polled, step: &Step<'_>) {
        match polled {
            Ok((counter, tallies)) => {
                for t in tallies.iter().filter(|t| t.moved) {
                    warn!(
                        "busypoll: CPU {}: the poller ended off its CPU (offline, or moved); \
                         its figures are left out of the window",
                        t.cpu
                    );
                }
                let longest = (tallies.iter().filter(|t| !t.moved)).max_by_key(|t| t.max_ns);
                if let Some(t) = longest {
                    info!(
                        "busypoll: window ended: longest gap {:.1} us on CPU {} ({} gaps read on {} CPUs)",
                        t.max_ns as f64 / 1_000.0,
                        t.cpu,
                        tallies.iter().map(|t| t.histogram.len()).sum::<u64>(),
                        tallies.len()
                    );
                }
                step.update(|b: &mut BusypollPart| {
                    b.active = None;
                    b.take_in(&window, counter, &tallies);
                });
            }
            Err(why) => {
                warn!("busypoll: the window did not run: {why}; sampling goes on");
                step.update(|b: &mut BusypollPart| {
                    b.active = None;
                    b.skip("failed", why);
                });
            }
        }
    }

    fn tick(&mut self, now: SystemTime, step: &Step<'_>) {
        self.phase = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => match self.config.schedule.window_at(now) {
                Some(window) => match self.open(window, now) {
                    Ok(polling) => {
                        step.update(|b: &mut BusypollPart| b.active = Some(window));
                        polling
                    }
                    Err(why) => {
                        Self::close(window, Err(why), step);
                        Phase::Done(window)
                    }
                },
                None => Phase::Idle,
            },
            Phase::Polling { window, thread, .. } if thread.is_finished() => {
                let polled = thread
                    .join()
                    .unwrap_or_else(|_| Err("its thread panicked".to_string()));
                Self::close(window, polled, step);
                Phase::Done(window)
            }
            Phase::Done(window) if now >= window.end => Phase::Idle,
            other => other,
        };
        let next = self.config.schedule.next_window(now);
        step.update(|b: &mut BusypollPart| b.next = Some(next));
    }
}

/// One window: the counter's rate, then a poller per CPU for `length`.
fn poll_window(
    cpus: &[usize],
    priority: Option<i32>,
    length: Duration,
    stop: &AtomicBool,
) -> Polled {
    let counter = Counter::native();
    let mhz = poll::counter_mhz(counter);
    let specs: Vec<PollSpec> = (cpus.iter())
        .map(|&cpu| PollSpec {
            cpu,
            fifo_priority: priority,
            workload_bytes: 0,
            layout: BucketLayout::oslat_default(),
            stop_at_units: None,
        })
        .collect();
    let (tallies, _) = poll::run(&specs, counter, mhz, length, stop).map_err(|e| e.to_string())?;
    Ok((counter.name(), tallies))
}

impl Run for BusypollRun {
    fn step<'a>(&'a mut self, step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async move {
            let now = UNIX_EPOCH + Duration::from_nanos(step.unix_ns);
            self.tick(now, &step);
        })
    }

    /// A window polling now is cut short (its pollers stop at their next
    /// read) and taken in as far as it went.
    fn stop<'a>(&'a mut self, step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async move {
            if let Phase::Polling {
                window,
                stop,
                thread,
            } = std::mem::replace(&mut self.phase, Phase::Idle)
            {
                stop.store(true, Ordering::SeqCst);
                match tokio::task::spawn_blocking(move || thread.join()).await {
                    Ok(Ok(polled)) => {
                        let window = Window {
                            end: UNIX_EPOCH + Duration::from_nanos(step.unix_ns),
                            ..window
                        };
                        Self::close(window, polled, &step);
                    }
                    _ => error!("the busy-poll thread could not be stopped cleanly"),
                }
            }
        })
    }
}
