//! What an instrument serves beside what the daemon renders from every
//! part: its histogram with native buckets and exemplars ([`Native`]),
//! its own route `/api/v1/NAME` ([`Api`]), and its other routes, pages or
//! a resource by id ([`Routes`]), each answered from what it takes from
//! its part under the state's lock, after the lock is released.

use serde_json::value::RawValue;

use super::Part;
use crate::host::HostInfo;
use crate::series::SeriesCopy;
use crate::series::exemplars::{Captures, Exemplars};

/// An instrument's own route, `/api/v1/NAME`: its JSON, built from its
/// part under the state's lock, and its description (its folder's
/// `api.json`: the OpenAPI 3.1 path item as `path`, the schemas it refers
/// to as `schemas`).
#[derive(Clone, Copy)]
pub struct Api {
    pub json: fn(&dyn Part, u64) -> Box<RawValue>,
    pub openapi: &'static str,
}

/// An instrument's histogram family with native buckets: its name (one
/// of the entry's families), its series, copied under the state's lock
/// to be encoded after it, and their exemplars (in the protobuf and
/// OpenMetrics expositions), when it has any, from what forensics
/// captured in this run.
#[derive(Clone, Copy)]
pub struct Native {
    pub name: &'static str,
    pub series: fn(&dyn Part) -> Vec<SeriesCopy>,
    pub exemplars: Option<fn(&dyn Part, &Captures) -> Exemplars>,
}

/// An instrument's routes besides `/api/v1/NAME`, served in this order,
/// and their description (its folder's `routes.json`: the OpenAPI 3.1
/// path items as `paths`, the schemas they refer to as `schemas`).
#[derive(Clone, Copy)]
pub struct Routes {
    pub list: &'static [Route],
    pub openapi: &'static str,
}

/// One route: what it needs taken from the part under the state's lock,
/// and the answer made from that after the lock is released.
#[derive(Clone, Copy)]
pub struct Route {
    /// As the router writes it; at most one parameter, last (`{id}`).
    pub path: &'static str,
    /// An HTML page (its refusals are pages too), else JSON.
    pub page: bool,
    /// Answered on the daemon's pool for heavy work (a file read, a
    /// picture drawn), a few at a time, named so in a refusal when that
    /// pool is full ("the capture"); None: on the runtime's thread.
    pub heavy: Option<&'static str>,
    /// The parameter checked before anything is taken (refused: why).
    pub check: Option<Check>,
    /// What the answer needs, taken under the lock (the part and the
    /// host it runs on).
    pub take: fn(&dyn Part, &HostInfo) -> Answer,
}

/// A route's check of its parameter: why it is refused, if it is.
pub type Check = fn(&str) -> Result<(), String>;

/// A route's answer, made from what was taken, given the parameter.
pub type Answer = Box<dyn FnOnce(Option<&str>) -> Result<String, Refusal> + Send>;

/// Why a route did not answer, with what to tell the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 400: the parameter is not one.
    BadRequest(String),
    /// 404: nothing by that parameter.
    NotFound(String),
    /// 500: it could not be read.
    Internal(String),
}
