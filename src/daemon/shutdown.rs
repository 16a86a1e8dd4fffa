//! The orderly stop, once the event loop has ended and the samplers and
//! the server have been told: a restart under way settled, the registered
//! instruments' runs stopped before the samplers (forensics' and the
//! observer's threads and a load window's generators among them), the
//! samplers joined with their last
//! intervals (the record's interval in progress written with its true
//! length), and the server given its grace for answers in flight.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tracing::{error, info};

use super::collector::Collector;
use super::http::server;
use super::state::{MonitorState, lock};
use crate::record::{Accumulator, Keeper};
use crate::rt::engine::Engine;
use crate::units::unix_now_ns;

/// How long past one interval shutdown waits for the samplers to return.
const JOIN_SLACK: Duration = Duration::from_millis(300);

pub(super) async fn stop(
    mut engine: Engine,
    mut collector: Collector,
    state: &Arc<Mutex<MonitorState>>,
    interval_ns: u64,
    server: JoinHandle<()>,
) {
    let started = Instant::now();
    // A restart under way hands its sampler to the engine, which stops it.
    collector.settle(&mut engine).await;
    // The instruments' runs stop before the samplers do, in registry
    // order (forensics', the observer's and timerlat's join their
    // threads, and remove their tracefs instances; timerlat's sets
    // osnoise/ back).
    let runs = std::mem::take(&mut collector.runs);
    let at = (crate::rt::sys::monotonic_now_ns(), unix_now_ns());
    super::runs::stop(runs, state, &mut collector.record, at).await;
    collector.close_gaps();
    join_samplers(engine, collector.record.take(), state, interval_ns).await;
    // In-flight requests get the server's grace, counted from the shutdown
    // signal (it closes what is still open then); dropping the server
    // sooner would cut answers it is still writing.
    let grace_left =
        (server::SHUTDOWN_GRACE + Duration::from_millis(100)).saturating_sub(started.elapsed());
    let _ = tokio::time::timeout(grace_left, server).await;
    info!("stopped in {:?}", started.elapsed());
}

/// Samplers notice the stop flag at their next wake-up (at most one
/// interval, at most 1 s by configuration); their last intervals go to
/// the state and the record. The join waits, so it runs off the
/// runtime's thread.
async fn join_samplers(
    engine: Engine,
    mut record: Option<(Accumulator, Keeper)>,
    state: &Arc<Mutex<MonitorState>>,
    interval_ns: u64,
) {
    let timeout = Duration::from_nanos(interval_ns) + JOIN_SLACK;
    let joined_state = Arc::clone(state);
    let finished = tokio::task::spawn_blocking(move || {
        let cpus: Vec<usize> = engine.slots.iter().map(|slot| slot.cpu).collect();
        let outcome = engine.finish(timeout, |idx, interval| {
            if let Some((accumulator, _)) = &mut record {
                accumulator.add(cpus[idx], interval);
            }
            lock(&joined_state).cpus[idx].absorb(interval)
        });
        // The interval in progress is written with its true length.
        if let Some((mut accumulator, mut keeper)) = record {
            if let Some(batch) = accumulator.take(unix_now_ns(), true) {
                keeper.submit(batch);
            }
            keeper.stop();
        }
        outcome
    })
    .await;
    match finished {
        Ok(Ok(outcome)) => {
            for cpu in outcome.stuck {
                error!(
                    "the sampler on CPU {cpu} did not stop within {timeout:?}; exiting without it"
                );
            }
        }
        Ok(Err(err)) => error!("a sampler could not be joined: {err}"),
        Err(err) => error!("the samplers could not be joined: {err}"),
    }
}
