//! The daemon's event loop on the runtime thread: the collector tick,
//! STATUS= for `systemctl status`, the watchdog, SIGHUP, SIGTERM/SIGINT.
//! Each branch does its work without waiting: the collector and reload
//! hand anything slow to the blocking pool, and a reload runs beside the
//! loop (its end is one more branch), never instead of it.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tracing::{error, info, warn};

use super::collector::Collector;
use super::notify;
use super::reload::Reload;
use super::render::status_line;
use super::state::{MonitorState, lock};
use crate::rt::engine::Engine;
use crate::rt::sys;

/// How often the collector drains the handoffs and copies heartbeats:
/// once per samplers' publish period, just after its boundary (see
/// `collector::PUBLISH_PERIOD_NS`). The runtime thread's wake-ups are most
/// of the daemon's own CPU time beside the samplers': a tick every 100 ms
/// cost twice the wake-ups for the same intervals.
const COLLECT_PERIOD: Duration = Duration::from_millis(200);
/// When a tick finds a running sampler's interval not yet handed over (its
/// wake-up after the boundary came over 5 ms late, or its interval is
/// long), the collector looks again this long after it, once, so that
/// such an interval waits at most 100 ms to be counted, as when it ticked
/// every 100 ms.
const CATCH_UP_AFTER: Duration = Duration::from_millis(100);
/// How long after a publish boundary the collector ticks, beyond one
/// sampling interval: the samplers hand over at their first wake-up at or
/// after the boundary, so a tick that late finds their intervals there.
const COLLECT_AFTER_PUBLISH: Duration = Duration::from_millis(5);

/// How long a dead sampler is shown as such on /healthz before exiting.
const DEATH_GRACE: Duration = Duration::from_secs(1);
/// How long a CPU may be listed online while its sampler cannot be
/// restarted before that is logged.
const RESTART_PATIENCE: Duration = Duration::from_secs(10);
/// How often STATUS= is refreshed for `systemctl status`.
const STATUS_PERIOD: Duration = Duration::from_secs(10);

/// When the collector's first tick is due: `COLLECT_AFTER_PUBLISH` plus
/// one sampling interval (at most 45 ms) after a multiple of
/// `COLLECT_PERIOD` of `CLOCK_MONOTONIC`, which the publish boundaries are
/// too. Unaligned, the tick's phase against the boundaries would be chance
/// and add up to 100 ms to every wake-up's way to `/metrics`.
fn first_collect_after(now_ns: u64, interval_ns: u64) -> u64 {
    let period = COLLECT_PERIOD.as_nanos() as u64;
    let offset = interval_ns.min(45_000_000) + COLLECT_AFTER_PUBLISH.as_nanos() as u64;
    let boundary = now_ns - now_ns % period;
    let first = boundary + offset;
    if first > now_ns {
        first
    } else {
        first + period
    }
}

/// The collector's tick: a timerfd that the runtime's reactor watches, so
/// the runtime thread wakes once per tick (a tokio interval of 100 ms or
/// more wakes it twice: its timer wheel first moves the deadline down a
/// level). Periodic on the boundaries' phase; for a catch-up it is armed
/// once, then put back on that phase. Ticks missed while the thread was
/// busy come as one.
struct CollectTick {
    timer: AsyncFd<sys::PeriodicTimerFd>,
    interval_ns: u64,
    catching_up: bool,
}

impl CollectTick {
    fn new(now_ns: u64, interval_ns: u64) -> std::io::Result<CollectTick> {
        let first_ns = first_collect_after(now_ns, interval_ns);
        let timer = sys::PeriodicTimerFd::new(first_ns, COLLECT_PERIOD.as_nanos() as u64)?;
        // Deprecated because it takes any AsRawFd, including a descriptor
        // the value does not own (RUSTSEC-2026-0386). A PeriodicTimerFd
        // owns its descriptor (an OwnedFd, closed only when it drops,
        // never replaced), which is what the unsafe `AsyncFd::register`
        // asks its caller to promise; `unsafe` stays in latencyd-rt's sys/.
        #[allow(deprecated)]
        let timer = AsyncFd::new(timer)?;
        Ok(CollectTick {
            timer,
            interval_ns,
            catching_up: false,
        })
    }

    /// Waits for the next tick; whether it is a catch-up tick (the timer
    /// is then back on the boundaries' phase).
    async fn tick(&mut self) -> std::io::Result<bool> {
        loop {
            let mut ready = self.timer.readable().await?;
            match ready.try_io(|timer| timer.get_ref().expirations()) {
                Ok(result) => {
                    result?;
                    break;
                }
                // Readable but nothing to read (a spurious wake-up): the
                // readiness is cleared, wait again.
                Err(_would_block) => continue,
            }
        }
        if !std::mem::take(&mut self.catching_up) {
            return Ok(false);
        }
        let now_ns = sys::monotonic_now_ns();
        self.timer.get_ref().rearm(
            first_collect_after(now_ns, self.interval_ns),
            COLLECT_PERIOD.as_nanos() as u64,
        )?;
        Ok(true)
    }

    /// One tick `CATCH_UP_AFTER` from now instead of the next regular one,
    /// unless that comes first.
    fn catch_up(&mut self) -> std::io::Result<()> {
        let now_ns = sys::monotonic_now_ns();
        let at_ns = now_ns + CATCH_UP_AFTER.as_nanos() as u64;
        if at_ns < first_collect_after(now_ns, self.interval_ns) {
            self.timer.get_ref().rearm(at_ns, 0)?;
            self.catching_up = true;
        }
        Ok(())
    }
}

/// The signals the daemon handles.
pub(super) struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    pub(super) fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }
}

/// What the collector's ticks remember from one to the next.
#[derive(Default)]
struct Ticking {
    /// Since when a sampler is known dead (the daemon exits after
    /// `DEATH_GRACE`).
    dying_since: Option<Instant>,
    /// CPUs whose sampler could not be restarted yet: since when, and
    /// whether that was logged.
    restart_errors: HashMap<usize, (Instant, bool)>,
}

/// One collector tick and what it found logged; whether a running
/// sampler's interval is still awaited, or the daemon's exit status.
async fn collect(
    engine: &mut Engine,
    collector: &mut Collector,
    state: &Mutex<MonitorState>,
    ticking: &mut Ticking,
) -> Result<bool, ExitCode> {
    let found = match collector.tick(engine, state).await {
        Ok(found) => found,
        Err(err) => {
            error!("cannot merge a sampler's interval: {err}");
            return Err(ExitCode::FAILURE);
        }
    };
    for (cpu, why) in found.dead {
        error!(
            "the sampler on CPU {cpu} has died ({why}); /healthz reports it and latencyd exits so that it is restarted"
        );
        ticking.dying_since.get_or_insert_with(Instant::now);
    }
    for cpu in found.offline {
        warn!(
            "CPU {cpu} went offline (or the sampler was moved off it): its sampler stopped; sampling resumes when it is back online"
        );
    }
    for cpu in found.added {
        info!("CPU {cpu} came online: sampling it too (measure.cpus = \"all\")");
    }
    for cpu in found.resumed {
        info!("CPU {cpu} is back online: sampling it again");
        ticking.restart_errors.remove(&cpu);
    }
    for (cpu, why) in found.not_resumed {
        // While a CPU goes down it may still be listed online; only a
        // failure that lasts is news.
        let since = ticking
            .restart_errors
            .entry(cpu)
            .or_insert_with(|| (Instant::now(), false));
        if !since.1 && since.0.elapsed() >= RESTART_PATIENCE {
            warn!(
                "CPU {cpu} is online but its sampler has not started for {RESTART_PATIENCE:?} (still retrying): {why}"
            );
            since.1 = true;
        }
    }
    if ticking
        .dying_since
        .is_some_and(|since| since.elapsed() >= DEATH_GRACE)
    {
        return Err(ExitCode::FAILURE);
    }
    Ok(found.awaited)
}

/// Runs until SIGTERM/SIGINT (exit 0) or a dead sampler (exit 1).
pub(super) async fn run(
    engine: &mut Engine,
    collector: &mut Collector,
    state: &Mutex<MonitorState>,
    reload: &Reload,
    mut signals: Signals,
) -> ExitCode {
    let interval_ns = lock(state).config.measure.interval_ns;
    // The timerfd runs on CLOCK_MONOTONIC, like the samplers' boundaries.
    let now_ns = sys::monotonic_now_ns();
    let mut collect_tick = match CollectTick::new(now_ns, interval_ns) {
        Ok(tick) => tick,
        Err(err) => {
            error!("cannot make the collector's timer (timerfd): {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut status_tick = tokio::time::interval(STATUS_PERIOD);
    // systemd wants a ping within WatchdogSec; ping at half of it, and only
    // while every sampler's heartbeat advances.
    let mut watchdog_tick = notify::watchdog_interval().map(|d| tokio::time::interval(d / 2));
    let mut ticking = Ticking::default();
    // A reload under way beside the loop (`reload.rs`).
    let mut reloading: Option<super::reload::Pending> = None;
    loop {
        tokio::select! {
            ticked = collect_tick.tick() => {
                let caught_up = match ticked {
                    Ok(caught_up) => caught_up,
                    Err(err) => {
                        error!("the collector's timer failed: {err}");
                        return ExitCode::FAILURE;
                    }
                };
                let awaited = match collect(engine, collector, state, &mut ticking).await {
                    Ok(awaited) => awaited,
                    Err(code) => return code,
                };
                // Once per period at most: a sampler that stays silent
                // (stuck, or sampling less often than the period) is
                // looked at on the regular ticks.
                if awaited && !caught_up && let Err(err) = collect_tick.catch_up() {
                    error!("the collector's timer failed: {err}");
                    return ExitCode::FAILURE;
                }
            }
            _ = status_tick.tick() => {
                let line = status_line(&lock(state));
                notify::status(&line);
                // What a burst of connections or requests freed goes back
                // to the kernel (resident and, under mlockall, locked
                // otherwise); a small heap is walked in microseconds.
                if let Err(err) = sys::trim_heap() {
                    error!("{err}");
                }
            }
            _ = async {
                match watchdog_tick.as_mut() {
                    Some(tick) => tick.tick().await,
                    None => std::future::pending().await,
                }
            } => {
                let health = lock(state).health(sys::monotonic_now_ns());
                if health.healthy {
                    notify::watchdog();
                } else {
                    warn!("withholding the watchdog ping: samplers not advancing: {:?}", health.stale);
                }
            }
            _ = signals.hup.recv() => match reloading.as_mut() {
                None => reloading = Some(reload.start(state)),
                Some(pending) => {
                    pending.again = true;
                    info!("SIGHUP during a reload: another reload follows it");
                }
            },
            ended = async {
                match reloading.as_mut() {
                    Some(pending) => pending.end().await,
                    None => std::future::pending().await,
                }
            } => {
                let again = reloading.take().is_some_and(|p| p.again);
                reload.finish(state, ended);
                if again {
                    reloading = Some(reload.start(state));
                }
            }
            _ = signals.term.recv() => { info!("SIGTERM: stopping"); return ExitCode::SUCCESS; }
            _ = signals.int.recv() => { info!("SIGINT: stopping"); return ExitCode::SUCCESS; }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_collector_ticks_just_after_the_samplers_hand_over() {
        // 1 ms sampling: 6 ms after each 200 ms boundary, the next one due.
        assert_eq!(first_collect_after(1_000 * MS, MS), 1_006 * MS);
        assert_eq!(first_collect_after(1_003 * MS, MS), 1_006 * MS);
        assert_eq!(first_collect_after(1_006 * MS, MS), 1_206 * MS);
        assert_eq!(first_collect_after(1_199 * MS, MS), 1_206 * MS);
        // Long intervals: no later than 50 ms into the period.
        assert_eq!(first_collect_after(1_000 * MS, 500 * MS), 1_050 * MS);
        // Ticks stay on the boundaries' phase (the publish period is a
        // multiple of the collect period), and a catch-up tick comes before
        // the next regular one.
        assert_eq!(
            crate::daemon::collector::PUBLISH_PERIOD_NS % COLLECT_PERIOD.as_nanos() as u64,
            0
        );
        assert!(CATCH_UP_AFTER < COLLECT_PERIOD);
    }
}
