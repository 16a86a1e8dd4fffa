//! The host facts' run: the facts read at start (against the last ones
//! the record holds), read again every `host.reread_interval` on tokio's
//! blocking pool (the step only looks at the job, and takes the lock to
//! file what it read; the blocking threads run where the exporter is
//! pinned, off the samplers' CPUs when `export.cpus` says so), and the
//! record's every interval filed under the facts in force as it ended.
//! Each change is logged with the facts that changed.

use std::path::Path;
use std::time::Instant;

use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::HostFactsPart;
use super::track::{ChangeSeen, HostChange, HostTrack, ONLINE_SETTLE_NS};
use crate::calendar::format_rfc3339_ms;
use crate::host::{CpuTopology, FactReader, Fingerprint, topology};
use crate::instruments::shape::{Boxed, Run, Start, Started, Step};
use crate::record::HostFacts;
use crate::rt::sys;
use crate::units::unix_now_ns;

/// One read: the facts, every online CPU's topology, how long it took and
/// when it ended (wall time, ns).
struct Read {
    facts: Fingerprint,
    topology: Vec<CpuTopology>,
    took_ns: u64,
    at_unix_ns: u64,
}

fn read_now(reader: &mut FactReader) -> Read {
    let started = Instant::now();
    let facts = reader.read();
    let online = sys::online_cpus().unwrap_or_default();
    let topology = topology::read(Path::new("/"), &online);
    Read {
        facts,
        topology,
        took_ns: started.elapsed().as_nanos() as u64,
        at_unix_ns: unix_now_ns(),
    }
}

/// Reads the facts of the measured CPUs, and the last ones the record
/// holds when it is kept; starts re-reading them.
pub(super) fn start(start: &Start<'_>) -> Started {
    let record = &start.config.record;
    let record_dir = record.on().then_some(record.dir.as_path());
    let (reader, track) = first_read(start.measured, record_dir);
    Started {
        part: Box::new(HostFactsPart::new(start.config, track)),
        run: Some(Box::new(Watch {
            reader: Some(reader),
            last_ns: sys::monotonic_now_ns(),
            job: None,
        })),
    }
}

/// The first read, on the thread that starts the daemon (before anything
/// is served), and the tracker made of it, with the change since the
/// record's last facts (logged here), if any.
fn first_read(cpus: &[usize], record_dir: Option<&Path>) -> (FactReader, HostTrack) {
    let read = std::panic::catch_unwind(|| {
        let mut reader = FactReader::live(cpus);
        let read = read_now(&mut reader);
        (reader, read)
    });
    let (reader, read) = match read {
        Ok(first) => first,
        // Only a panic in the reader gets here: carry on without facts
        // rather than refuse to measure.
        Err(_) => {
            warn!("reading the host's facts failed: the reader panicked");
            let mut facts = Fingerprint::default();
            facts.insert(
                "host.facts",
                crate::host::Fact::absent("reading failed: the reader panicked".to_string()),
            );
            let read = Read {
                facts,
                topology: Vec::new(),
                took_ns: 0,
                at_unix_ns: unix_now_ns(),
            };
            (FactReader::live(&[]), read)
        }
    };
    let recorded: Option<HostFacts> = record_dir.and_then(crate::record::reader::last_host_facts);
    let mut track = HostTrack::new(read.facts, read.topology, read.at_unix_ns, read.took_ns);
    if let Some(recorded) = &recorded
        && let Some(change) = track.changed_since_record(&recorded.fingerprint, recorded.at_unix_ns)
    {
        log_change(&change);
    }
    debug!(
        fingerprint = track.id,
        "host facts read in {} us",
        read.took_ns / 1_000
    );
    (reader, track)
}

/// The facts read again while the daemon runs.
struct Watch {
    /// None while a read has it, and for good once a read failed.
    reader: Option<FactReader>,
    /// When the latest read started (`CLOCK_MONOTONIC`, ns).
    last_ns: u64,
    job: Option<JoinHandle<(FactReader, Read)>>,
}

impl Run for Watch {
    /// The record's interval about to be cut is filed under the facts in
    /// force as it ended, not as this tick finds them (up to a tick later).
    fn take_in(&mut self, mut step: Step<'_>) {
        let Some((accumulator, _)) = step.record.take() else {
            return;
        };
        let due_ns = accumulator.due_ns();
        if due_ns > step.unix_ns {
            return;
        }
        let mut in_force = None;
        step.update(|p: &mut HostFactsPart| in_force = Some(p.track.in_force_at(due_ns).clone()));
        if let Some(in_force) = in_force {
            accumulator.set_fingerprint(in_force);
        }
    }

    fn step<'a>(&'a mut self, step: Step<'a>) -> Boxed<'a, ()> {
        Box::pin(async move {
            if let Some(job) = self.job.take_if(|job| job.is_finished()) {
                match job.await {
                    Ok((reader, read)) => {
                        self.reader = Some(reader);
                        file(&step, read);
                    }
                    Err(err) => {
                        warn!("reading the host's facts failed ({err}); they are no longer re-read")
                    }
                }
            }
            let mut every_ns = 0;
            step.update(|p: &mut HostFactsPart| every_ns = p.reread_interval_ns);
            let due = every_ns > 0 && step.mono_ns >= self.last_ns.saturating_add(every_ns);
            if due && let Some(mut reader) = self.reader.take() {
                self.last_ns = step.mono_ns;
                self.job = Some(tokio::task::spawn_blocking(move || {
                    let read = read_now(&mut reader);
                    (reader, read)
                }));
            }
        })
    }

    /// The record's last interval is filed under the facts in force; a
    /// read still running is left to end on its own.
    fn stop<'a>(&'a mut self, mut step: Step<'a>) -> Boxed<'a, ()> {
        self.job = None;
        if let Some((accumulator, _)) = step.record.take() {
            let mut current = None;
            step.update(|p: &mut HostFactsPart| current = Some(p.track.current.clone()));
            if let Some(current) = current {
                accumulator.set_fingerprint(current);
            }
        }
        Box::pin(async {})
    }
}

/// A read filed in the part under the state's lock; what changed, and
/// which facts could not be read, logged after it.
fn file(step: &Step<'_>, read: Read) {
    let mut filed = None;
    step.update(|p: &mut HostFactsPart| {
        let was = p.track.unreadable.clone();
        let change = p.track.take_read(
            read.facts,
            read.topology,
            read.at_unix_ns,
            read.took_ns,
            ChangeSeen::Running,
        );
        filed = Some((change, p.track.unreadable.clone(), was));
    });
    let Some((change, unreadable, was_unreadable)) = filed else {
        return;
    };
    log_unreadable(&was_unreadable, &unreadable);
    if let Some(change) = change {
        log_change(&change);
    }
}

/// Says once which facts could not be read (and that they keep their
/// last value), and once when every fact is read again.
fn log_unreadable(was: &[(String, String)], now: &[(String, String)]) {
    let names = |list: &[(String, String)]| list.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    if names(was) == names(now) {
        return;
    }
    if now.is_empty() {
        info!("the host's facts are all read again");
        return;
    }
    let said: Vec<String> = now
        .iter()
        .map(|(name, why)| format!("{name} ({why})"))
        .collect();
    warn!(
        "{} of the host's facts could not be read this time and keep their last known \
         value (not a change of the host): {}",
        now.len(),
        said.join("; ")
    );
}

/// One log line per change: the new identifier, and each fact with its
/// old and new value.
fn log_change(change: &HostChange) {
    let facts: Vec<String> = change.facts.iter().map(|f| f.describe()).collect();
    let when = match change.seen {
        ChangeSeen::Running => "changed".to_string(),
        ChangeSeen::SinceRecord { recorded_unix_ns } => format!(
            "changed while latencyd was stopped (since the record's last facts, {})",
            format_rfc3339_ms(recorded_unix_ns)
        ),
    };
    // Running, a change of the online CPUs is filed only once it has
    // lasted (ONLINE_SETTLE_NS): say so beside it.
    let hotplug = matches!(change.seen, ChangeSeen::Running)
        && change.facts.iter().any(|f| f.name == "cpus.online");
    let cause = if hotplug {
        format!(
            " (CPU hotplug: the CPUs online have stayed so for {})",
            crate::units::format_duration_ns(ONLINE_SETTLE_NS)
        )
    } else {
        String::new()
    };
    warn!(
        fingerprint = change.to_id,
        previous = change.from_id,
        changed = facts.len(),
        "the host's configuration {when}{cause}: fingerprint {} → {}: {}",
        change.from_id,
        change.to_id,
        facts.join("; ")
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::host::Fact;
    use crate::instruments::shape::{Part, Visit};
    use crate::record::{Accumulator, Keeper};

    const S: u64 = 1_000_000_000;

    /// Facts no host has: the first live read is a change from them.
    fn made_up() -> Fingerprint {
        let mut facts = Fingerprint::default();
        facts.insert("kernel.release", Fact::known("0.0-made-up"));
        facts
    }

    /// The record's interval in progress since `start_unix_ns`, one CPU's
    /// interval in it.
    fn record_from(start_unix_ns: u64) -> (Accumulator, Keeper) {
        let mut accumulator = Accumulator::new(S, S, start_unix_ns);
        accumulator.add(0, &crate::stats::LatencyStats::new(S, None));
        (accumulator, Keeper::disabled())
    }

    /// A run that last read the facts at 0 s, and a runtime to step it.
    fn watching() -> (Watch, tokio::runtime::Runtime) {
        let watch = Watch {
            reader: Some(FactReader::live(&[0])),
            last_ns: 0,
            job: None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread().build();
        (watch, runtime.unwrap())
    }

    #[test]
    fn a_read_due_is_filed_and_each_interval_gets_the_facts_in_force_as_it_ended() {
        let config = crate::instruments::registry::builtin_config();
        let part: Mutex<Box<dyn Part>> = Mutex::new(Box::new(HostFactsPart::new(
            &config,
            HostTrack::new(made_up(), Vec::new(), 10 * S, 0),
        )));
        let access = |_: Option<&str>, f: &mut Visit<'_>| f(part.lock().unwrap().as_mut());
        let (mut watch, runtime) = watching();
        // Not due yet at 29 s of the default 30 s; due at 30 s.
        runtime.block_on(watch.step(Step::new("host", (29 * S, 0), &access, None)));
        assert!(watch.job.is_none());
        runtime.block_on(watch.step(Step::new("host", (30 * S, 0), &access, None)));
        assert!(watch.job.is_some() && watch.reader.is_none());
        while !watch.job.as_ref().unwrap().is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        runtime.block_on(watch.step(Step::new("host", (31 * S, 0), &access, None)));
        assert!(watch.job.is_none() && watch.reader.is_some());
        let changed_at = {
            let part = part.lock().unwrap();
            let track = &part.as_any().downcast_ref::<HostFactsPart>().unwrap().track;
            assert_eq!(
                track.changes_total, 1,
                "the live facts differ from made-up ones"
            );
            track.since_unix_ns
        };

        // An interval that ended before the change is filed under the
        // facts before it; one that ended after, under the new ones.
        let mut record = record_from(changed_at - 5 * S);
        let now = (32 * S, changed_at + S);
        watch.take_in(Step::new("host", now, &access, Some(&mut record)));
        let batch = record.0.take(changed_at, false).unwrap();
        assert_eq!(
            batch.fingerprint.unwrap().value("kernel.release"),
            Some("0.0-made-up")
        );
        let mut record = record_from(changed_at);
        watch.take_in(Step::new("host", now, &access, Some(&mut record)));
        let batch = record.0.take(changed_at + S, false).unwrap();
        assert_ne!(
            batch.fingerprint.unwrap().value("kernel.release"),
            Some("0.0-made-up")
        );

        // The last interval at shutdown: the facts in force.
        let mut record = record_from(changed_at);
        runtime.block_on(watch.stop(Step::new("host", now, &access, Some(&mut record))));
        let batch = record.0.take(changed_at + S / 2, true).unwrap();
        assert_ne!(
            batch.fingerprint.unwrap().value("kernel.release"),
            Some("0.0-made-up")
        );
    }

    #[test]
    fn a_reload_changes_how_often_the_facts_are_read_and_nothing_else() {
        let config = crate::instruments::registry::builtin_config();
        let mut part = HostFactsPart::unread(&config);
        let mut new = config.clone();
        new.section_mut::<super::super::HostConfig>()
            .reread_interval_ns = 0;
        assert!(part.apply("host.reread_interval", &new));
        assert_eq!(part.reread_interval_ns, 0);
        assert!(!part.apply("host.other", &new));
        // Read once at start: never again, however long it runs.
        let part: Mutex<Box<dyn Part>> = Mutex::new(Box::new(part));
        let access = |_: Option<&str>, f: &mut Visit<'_>| f(part.lock().unwrap().as_mut());
        let (mut watch, runtime) = watching();
        runtime.block_on(watch.step(Step::new("host", (3_600 * S, 0), &access, None)));
        assert!(watch.job.is_none());
    }
}
