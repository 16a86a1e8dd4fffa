//! The JSON form of the host's facts and topology, one for every edge
//! that prints them (`/api/v1/host` and `/api/v1/status`, `measure
//! --json`, `report --json`, rt-tests' `sysinfo` in `measure` and `oslat
//! --json`), so a script reads a fact the same way in each. The domain types (`Fact`, `CpuTopology`) stay free of serde.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{CpuTopology, Fact, Fingerprint, HostInfo};
use crate::cpulist::format_cpu_list;

/// rt-tests' `sysinfo` object (uname and the PREEMPT_RT flag), as
/// cyclictest's and oslat's JSON carry it (`measure --json`, `oslat
/// --json`).
#[derive(Debug, Serialize)]
pub struct RtTestsSysinfo<'a> {
    sysname: &'a str,
    nodename: &'a str,
    release: &'a str,
    version: &'a str,
    machine: &'a str,
    realtime: u8,
}

impl RtTestsSysinfo<'_> {
    pub fn of(host: &HostInfo) -> RtTestsSysinfo<'_> {
        RtTestsSysinfo {
            sysname: &host.uname.sysname,
            nodename: &host.uname.nodename,
            release: &host.uname.release,
            version: &host.uname.version,
            machine: &host.uname.machine,
            realtime: host.realtime_flag(),
        }
    }
}

/// What decides whether the numbers can be trusted, as detected at start:
/// the same fields, in the same order, in `/api/v1/status`'s `host` and
/// `measure --json`'s `host`.
#[derive(Debug, Serialize)]
pub struct TrustFacts {
    preempt_rt: bool,
    usable_cpus: String,
    cap_sys_nice: bool,
    cap_ipc_lock: bool,
    rtprio_limit: Option<u64>,
    memlock_limit_bytes: Option<u64>,
    sched_rt_runtime_us: Option<i64>,
    clock_resolution_ns: Option<u64>,
}

impl TrustFacts {
    pub fn of(host: &HostInfo) -> TrustFacts {
        TrustFacts {
            preempt_rt: host.preempt_rt,
            usable_cpus: format_cpu_list(&host.usable_cpus),
            cap_sys_nice: host.cap_sys_nice,
            cap_ipc_lock: host.cap_ipc_lock,
            rtprio_limit: host.rtprio_limit,
            memlock_limit_bytes: host.memlock_limit,
            sched_rt_runtime_us: host.sched_rt_runtime_us,
            clock_resolution_ns: host.clock_resolution_ns,
        }
    }
}

/// A fact: `{"value": …}`, `{"absent": why}` or, for one that could not
/// be read this time and has no earlier value, `{"unknown": why}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactJson {
    Value(String),
    Absent(String),
    Unknown(String),
}

impl FactJson {
    pub fn of(fact: &Fact) -> FactJson {
        match fact {
            Fact::Known(v) => FactJson::Value(v.clone()),
            Fact::Absent(why) => FactJson::Absent(why.clone()),
            Fact::Unreadable(why) => FactJson::Unknown(why.clone()),
        }
    }
}

/// Every fact of `fingerprint` by name.
pub fn facts_json(fingerprint: &Fingerprint) -> BTreeMap<String, FactJson> {
    fingerprint
        .facts
        .iter()
        .map(|(name, fact)| (name.clone(), FactJson::of(fact)))
        .collect()
}

/// One CPU's place: package, core, NUMA node, SMT siblings.
#[derive(Debug, Serialize)]
pub struct CpuJson {
    cpu: usize,
    package: Option<i64>,
    core: Option<i64>,
    node: Option<usize>,
    smt_sibling: Option<String>,
}

/// Each CPU's place, in the order given.
pub fn topology_json(cpus: &[CpuTopology]) -> Vec<CpuJson> {
    cpus.iter()
        .map(|t| CpuJson {
            cpu: t.cpu,
            package: t.package,
            core: t.core,
            node: t.node,
            smt_sibling: t.smt_siblings.clone(),
        })
        .collect()
}
