//! The JSON form of the host's facts and topology, one for every edge
//! that prints them (`/api/v1/host` and `/api/v1/status`, `measure
//! --json`, `report --json`), so a script reads a fact the same way in
//! each. The domain types (`Fact`, `CpuTopology`) stay free of serde.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{CpuTopology, Fact, Fingerprint};

/// A fact: `{"value": …}`, `{"absent": why}` or, for one that could not
/// be read this time and has no earlier value, `{"unknown": why}`.
#[derive(Debug, Serialize)]
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
