//! The registered instruments' runs as the daemon drives them, none by
//! name: each may claim CPUs at the start of a collector tick, is stepped
//! once the samplers' intervals are in, and is stopped at shutdown, each
//! reaching its own part under the state's lock and the record's
//! interval in progress.

use std::sync::Mutex;

use super::state::{MonitorState, lock};
use crate::instruments::shape::{Run, Step, Visit};
use crate::record::{Accumulator, Keeper};

/// The registered instruments' runs, by name.
pub(super) type Runs = Vec<(&'static str, Box<dyn Run>)>;

/// The CPUs claimed by an instrument, with its name.
pub(super) type Claims = std::collections::BTreeMap<usize, &'static str>;

/// The record's interval in progress and its writer, when recording.
type Record = Option<(Accumulator, Keeper)>;

/// Runs `f` on the part of the instrument `name`, under the state's lock.
pub(super) fn part_access<'a>(
    state: &'a Mutex<MonitorState>,
    name: &'a str,
) -> impl Fn(&mut Visit<'_>) + Sync + 'a {
    move |f: &mut Visit<'_>| {
        if let Some(part) = lock(state).parts.get_mut(name) {
            f(part);
        }
    }
}

/// The CPUs each instrument claims now ([`Run::claim`]): their intervals
/// from here on are filed apart (the record's interval cut where that
/// changes).
pub(super) fn claims(
    runs: &mut Runs,
    state: &Mutex<MonitorState>,
    record: &mut Record,
    (mono_ns, unix_ns): (u64, u64),
) -> Claims {
    let mut claims = Claims::new();
    for (name, run) in runs.iter_mut() {
        let access = part_access(state, name);
        let step = Step::new(mono_ns, unix_ns, &access, record.as_mut());
        for cpu in run.claim(step) {
            claims.entry(cpu).or_insert(*name);
        }
    }
    if let Some((accumulator, keeper)) = record {
        for batch in accumulator.set_spun(claims.keys().copied().collect(), unix_ns) {
            keeper.submit(batch);
        }
    }
    claims
}

/// Every run's step of this tick, in registry order.
pub(super) async fn step(
    runs: &mut Runs,
    state: &Mutex<MonitorState>,
    record: &mut Record,
    (mono_ns, unix_ns): (u64, u64),
) {
    for (name, run) in runs.iter_mut() {
        let access = part_access(state, name);
        let step = Step::new(mono_ns, unix_ns, &access, record.as_mut());
        run.step(step).await;
    }
}

/// At shutdown, before the samplers stop: each run stopped and awaited
/// (a load window's generators, a running hwlat window), so that what it
/// filed last is in the record's last interval.
pub(super) async fn stop(
    runs: Runs,
    state: &Mutex<MonitorState>,
    record: &mut Record,
    (mono_ns, unix_ns): (u64, u64),
) {
    for (name, mut run) in runs {
        let access = part_access(state, name);
        let step = Step::new(mono_ns, unix_ns, &access, record.as_mut());
        run.stop(step).await;
    }
}
