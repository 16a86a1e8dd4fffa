//! The host's fingerprint for people and programs: the main facts as
//! bounded metric labels, `/api/v1/host` (every fact, the topology, the
//! changes; `routes.json`), the identifier and the topology among
//! `/api/v1/status`'s own fields (`fields.json`), and the status page's
//! "Host configuration".

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::value::{RawValue, to_raw_value};
use sha2::{Digest, Sha256};

use super::HostFactsPart;
use super::track::{ChangeSeen, HostTrack};
use crate::calendar::format_rfc3339_ms;
use crate::host::json::{CpuJson, FactJson, facts_json, topology_json};
use crate::host::{Fact, Fingerprint, HostInfo};
use crate::instruments::shape::{Answer, Part, Refusal, Route};
use crate::markup::escape;

/// The labels of `latencyd_host_fingerprint_info`, in the catalogue's
/// order after `fingerprint`. Each is one fact's value or `unknown`;
/// the command line, unbounded, as the first 12 hex digits of its SHA-256
/// (the text is in `/api/v1/host`); the PM QoS value as µs or `none`.
pub fn main_facts(track: &HostTrack) -> Vec<(&'static str, String)> {
    let fp = &track.current;
    let value = |name: &str| fp.get(name).map_or("unknown", Fact::or_unknown).to_string();
    let first_word = |name: &str| {
        let v = value(name);
        v.split_whitespace().next().unwrap_or("unknown").to_string()
    };
    let cmdline_hash = fp
        .value("kernel.cmdline")
        .map_or("unknown".to_string(), |c| {
            Sha256::digest(c.as_bytes())[..6]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        });
    vec![
        ("fingerprint", track.id.clone()),
        ("kernel", value("kernel.release")),
        ("preempt", first_word("kernel.preempt")),
        ("cmdline_hash", cmdline_hash),
        ("microcode", value("cpu.microcode")),
        ("bios_version", value("dmi.bios_version")),
        ("cpu_model", value("cpu.model")),
        ("smt", value("cpu.smt")),
        ("idle_driver", value("cpuidle.driver")),
        ("idle_governor", value("cpuidle.governor")),
        ("cpufreq_governor", cpufreq_governors(fp)),
        ("pm_qos_us", value("pm_qos.cpu_dma_latency_us")),
        ("tuned_profile", value("tuned.profile")),
        ("hypervisor", first_word("virt.hypervisor")),
    ]
}

/// The measured CPUs' frequency governors, each once (`unknown` without
/// cpufreq).
fn cpufreq_governors(fp: &Fingerprint) -> String {
    let mut governors: Vec<&str> = fp
        .facts
        .iter()
        .filter(|(name, _)| name.starts_with("cpufreq.policy["))
        .filter_map(|(_, f)| f.value()?.split_whitespace().next())
        .collect();
    governors.sort_unstable();
    governors.dedup();
    if governors.is_empty() {
        "unknown".to_string()
    } else {
        governors.join(",")
    }
}

/// One fact's change; `null` where it was absent or not there.
#[derive(Serialize)]
pub struct FactChangeBody {
    from: Option<String>,
    to: Option<String>,
}

#[derive(Serialize)]
pub struct HostChangeBody {
    /// When the change was seen (ns since the epoch).
    at_unix_ns: u64,
    from: String,
    to: String,
    /// `running` (between two reads), or `since_record` (at start,
    /// against the record's last facts, written at `recorded_unix_ns`).
    seen: &'static str,
    recorded_unix_ns: Option<u64>,
    facts: BTreeMap<String, FactChangeBody>,
}

/// `/api/v1/host`.
#[derive(Serialize)]
pub struct HostFingerprintBody {
    fingerprint: String,
    /// Since when these facts are in force (ns since the epoch).
    since_unix_ns: u64,
    read_unix_ns: u64,
    read_duration_ns: u64,
    /// Time between reads (0: read once, at start).
    reread_interval_ns: u64,
    changes_total: u64,
    facts: BTreeMap<String, FactJson>,
    cpus: Vec<CpuJson>,
    /// The latest changes, oldest first (at most `track::MAX_HISTORY`).
    changes: Vec<HostChangeBody>,
    /// Facts the latest read could not read (too many open files, say),
    /// with why: they keep their last known value and are not changes.
    unreadable: Vec<UnreadableBody>,
}

#[derive(Serialize)]
pub struct UnreadableBody {
    fact: String,
    error: String,
}

/// Its route: `/api/v1/host` (`routes.json`).
pub(super) const ROUTES: &[Route] = &[Route {
    path: "/api/v1/host",
    page: false,
    heavy: None,
    check: None,
    take: host_json,
}];

/// `/api/v1/host`: taken under the state's lock, encoded after it (the
/// facts of a large host are some kilobytes).
fn host_json(part: &dyn Part, _host: &HostInfo) -> Answer {
    let body = part
        .as_any()
        .downcast_ref::<HostFactsPart>()
        .map(|p| fingerprint(&p.track, p.reread_interval_ns));
    Box::new(move |_| match body {
        Some(body) => serde_json::to_string(&body).map_err(|e| Refusal::Internal(e.to_string())),
        None => Err(Refusal::Internal(
            "the host's facts are not in this state".to_string(),
        )),
    })
}

fn fingerprint(track: &HostTrack, reread_interval_ns: u64) -> HostFingerprintBody {
    HostFingerprintBody {
        fingerprint: track.id.clone(),
        since_unix_ns: track.since_unix_ns,
        read_unix_ns: track.read_unix_ns,
        read_duration_ns: track.read_duration_ns,
        reread_interval_ns,
        changes_total: track.changes_total,
        facts: facts_json(&track.current),
        cpus: topology_json(&track.topology),
        unreadable: track
            .unreadable
            .iter()
            .map(|(fact, error)| UnreadableBody {
                fact: fact.clone(),
                error: error.clone(),
            })
            .collect(),
        changes: track
            .history
            .iter()
            .map(|c| HostChangeBody {
                at_unix_ns: c.at_unix_ns,
                from: c.from_id.clone(),
                to: c.to_id.clone(),
                seen: match c.seen {
                    ChangeSeen::Running => "running",
                    ChangeSeen::SinceRecord { .. } => "since_record",
                },
                recorded_unix_ns: match c.seen {
                    ChangeSeen::Running => None,
                    ChangeSeen::SinceRecord { recorded_unix_ns } => Some(recorded_unix_ns),
                },
                facts: c
                    .facts
                    .iter()
                    .map(|f| {
                        let side =
                            |x: &Option<Fact>| x.as_ref().and_then(|x| x.value().map(String::from));
                        (
                            f.name.clone(),
                            FactChangeBody {
                                from: side(&f.from),
                                to: side(&f.to),
                            },
                        )
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Its fields of `/api/v1/status`: the identifier of the facts and every
/// online CPU's place.
pub(super) fn status_fields(track: &HostTrack) -> Vec<(&'static str, Box<RawValue>)> {
    let topology = topology_json(&track.topology);
    vec![
        (
            "fingerprint",
            to_raw_value(&track.id).expect("a string serializes"),
        ),
        (
            "topology",
            to_raw_value(&topology).expect("the topology serializes"),
        ),
    ]
}

/// The status page's "Host configuration": the fingerprint, since when,
/// the changes seen and what the last one changed.
pub(super) fn page_section(track: &HostTrack) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<h2>Host configuration</h2>\n<p id=\"fingerprint\" class=\"sub\">Fingerprint \
         <code>{id}</code> since {since}; {n} change(s) seen since start",
        id = escape(&track.id),
        since = format_rfc3339_ms(track.since_unix_ns),
        n = track.changes_total,
    );
    if let Some(change) = track.history.back() {
        let facts: Vec<&str> = change.facts.iter().map(|f| f.name.as_str()).collect();
        let _ = write!(
            html,
            ", the last at {}: {}",
            format_rfc3339_ms(change.at_unix_ns),
            escape(&facts.join(", "))
        );
    }
    html.push_str(
        ". Every fact and each change from and to: <a href=\"/api/v1/host\">/api/v1/host</a>.</p>\n",
    );
    html
}
