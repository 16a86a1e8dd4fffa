//! The registered instruments' runs as the daemon drives them, none by
//! name: each may claim CPUs at the start of a collector tick, takes in
//! what it measured once the samplers' intervals are in, is stepped once
//! the record's interval is cut, and is stopped at shutdown, each
//! reaching its own part under the state's lock and the record's
//! interval in progress.

use std::sync::Mutex;

use super::state::{MonitorState, lock};
pub(super) use crate::instruments::shape::Claims;
use crate::instruments::shape::{Capturer, Run, Step, Visit};
use crate::record::{Accumulator, Keeper};

/// The registered instruments' runs, by name.
pub(super) type Runs = Vec<(&'static str, Box<dyn Run>)>;

/// The record's interval in progress and its writer, when recording.
type Record = Option<(Accumulator, Keeper)>;

/// Runs `f` on the part of the instrument named (on every part, for
/// None), under the state's lock.
fn parts_access(state: &Mutex<MonitorState>) -> impl Fn(Option<&str>, &mut Visit<'_>) + Sync + '_ {
    move |name: Option<&str>, f: &mut Visit<'_>| {
        let mut s = lock(state);
        match name {
            Some(name) => s.parts.get_mut(name).into_iter().for_each(f),
            None => s.parts.iter_mut().for_each(|(_, part)| f(part)),
        }
    }
}

/// What a tick's steps are given besides the state and the record.
pub(super) struct Tick<'a> {
    /// `CLOCK_MONOTONIC` and wall time, ns.
    pub at: (u64, u64),
    /// The CPUs claimed at the start of the tick.
    pub claims: &'a Claims,
    /// What captures late wake-ups (one that captures nothing when no
    /// instrument runs one).
    pub capturer: &'a Capturer,
}

impl<'a> Tick<'a> {
    /// The step of the instrument `name` in this tick: the claims, and
    /// the capturer while it runs.
    fn step<'s>(
        &'s self,
        name: &'s str,
        access: &'s (dyn Fn(Option<&str>, &mut Visit<'_>) + Sync),
        record: &'s mut Record,
    ) -> Step<'s> {
        let step = Step::new(name, self.at, access, record.as_mut()).with_claims(self.claims);
        match self.capturer.threshold_ns() {
            Some(_) => step.with_capturer(self.capturer),
            None => step,
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
    let access = parts_access(state);
    for (name, run) in runs.iter_mut() {
        let step = Step::new(name, (mono_ns, unix_ns), &access, record.as_mut());
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

/// What every run measured since the last tick, taken in, in registry
/// order ([`Run::take_in`]).
pub(super) fn take_in(
    runs: &mut Runs,
    state: &Mutex<MonitorState>,
    record: &mut Record,
    tick: &Tick<'_>,
) {
    let access = parts_access(state);
    for (name, run) in runs.iter_mut() {
        run.take_in(tick.step(name, &access, record));
    }
}

/// Every run's step of this tick, in registry order.
pub(super) async fn step(
    runs: &mut Runs,
    state: &Mutex<MonitorState>,
    record: &mut Record,
    tick: &Tick<'_>,
) {
    let access = parts_access(state);
    for (name, run) in runs.iter_mut() {
        run.step(tick.step(name, &access, record)).await;
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
    let access = parts_access(state);
    for (name, mut run) in runs {
        let step = Step::new(name, (mono_ns, unix_ns), &access, record.as_mut());
        run.stop(step).await;
    }
}
