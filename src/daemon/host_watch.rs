//! Reading the host's facts at start and again every
//! `host.reread_interval`, on tokio's blocking pool (the runtime thread
//! only waits for the result and takes the lock to file it; the blocking
//! threads run where the exporter is pinned, off the samplers' CPUs when
//! `export.cpus` says so). Each change is logged with the facts that
//! changed; the state counts it and keeps it for `/api/v1/host`, the
//! metrics and the record.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use super::state::{ChangeSeen, HostChange, HostTrack, MonitorState, lock};
use crate::calendar::format_rfc3339_ms;
use crate::host::{CpuTopology, FactReader, Fingerprint, topology};
use crate::record::HostFacts;
use crate::rt::sys;
use crate::units::unix_now_ns;

/// One read: the facts, every online CPU's topology, how long it took.
struct Read {
    facts: Fingerprint,
    topology: Vec<CpuTopology>,
    took_ns: u64,
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
    }
}

/// What start-up reads: the first facts, and the last ones the record
/// holds (when it is kept in `record_dir`).
pub(super) struct FirstRead {
    reader: FactReader,
    read: Read,
    recorded: Option<HostFacts>,
}

impl FirstRead {
    /// Reads on the blocking pool the facts of `cpus` (the measured ones).
    pub(super) async fn take(cpus: &[usize], record_dir: Option<PathBuf>) -> FirstRead {
        let cpus = cpus.to_vec();
        let job = tokio::task::spawn_blocking(move || {
            let mut reader = FactReader::live(&cpus);
            let read = read_now(&mut reader);
            let recorded = record_dir
                .as_deref()
                .and_then(crate::record::reader::last_host_facts);
            FirstRead {
                reader,
                read,
                recorded,
            }
        });
        match job.await {
            Ok(first) => first,
            // Only a panic in the reader gets here: carry on without facts
            // rather than refuse to measure.
            Err(err) => {
                warn!("reading the host's facts failed: {err}");
                let mut facts = Fingerprint::default();
                facts.insert(
                    "host.facts",
                    crate::host::Fact::absent(format!("reading failed: {err}")),
                );
                FirstRead {
                    reader: FactReader::live(&[]),
                    read: Read {
                        facts,
                        topology: Vec::new(),
                        took_ns: 0,
                    },
                    recorded: None,
                }
            }
        }
    }

    /// The state's tracker, and the facts' change since the record's
    /// last line (logged here), if any.
    pub(super) fn track(&self) -> HostTrack {
        let now = unix_now_ns();
        let mut track = HostTrack::new(
            self.read.facts.clone(),
            self.read.topology.clone(),
            now,
            self.read.took_ns,
        );
        if let Some(recorded) = &self.recorded
            && let Some(change) =
                track.changed_since_record(&recorded.fingerprint, recorded.at_unix_ns)
        {
            log_change(&change);
        }
        debug!(
            fingerprint = track.id,
            "host facts read in {} us",
            self.read.took_ns / 1_000
        );
        track
    }
}

/// Re-reads the facts every `every` until the runtime stops, filing each
/// read in `state`.
pub(super) async fn watch(first: FirstRead, state: Arc<Mutex<MonitorState>>, every: Duration) {
    if every.is_zero() {
        return;
    }
    let mut reader = first.reader;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let job = tokio::task::spawn_blocking(move || {
            let read = read_now(&mut reader);
            (reader, read)
        });
        let Ok((back, read)) = job.await else {
            warn!("reading the host's facts failed; they are no longer re-read");
            return;
        };
        reader = back;
        let (change, unreadable, was_unreadable) = {
            let mut s = lock(&state);
            let was = s.fingerprint.unreadable.clone();
            let change = s.fingerprint.take_read(
                read.facts,
                read.topology,
                unix_now_ns(),
                read.took_ns,
                ChangeSeen::Running,
            );
            (change, s.fingerprint.unreadable.clone(), was)
        };
        log_unreadable(&was_unreadable, &unreadable);
        if let Some(change) = change {
            log_change(&change);
        }
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
    // lasted (state::ONLINE_SETTLE_NS): say so beside it.
    let hotplug = matches!(change.seen, ChangeSeen::Running)
        && change.facts.iter().any(|f| f.name == "cpus.online");
    let cause = if hotplug {
        format!(
            " (CPU hotplug: the CPUs online have stayed so for {})",
            crate::units::format_duration_ns(super::state::ONLINE_SETTLE_NS)
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
