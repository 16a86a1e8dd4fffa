//! Forensics as the daemon shows it, from its part: its object of
//! `/api/v1/status`, its "Recent spikes" section of the status page, the
//! captures the exemplars are chosen from, and its routes,
//! `/api/v1/spikes[/{id}]` and the pages `/spikes[/{id}]`.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;

use super::ForensicsPart;
use super::pages;
use crate::calendar::parse_rfc3339_ns;
use crate::forensics::{Capability, Capture, Journal, Lookup, Summary, store};
use crate::host::HostInfo;
use crate::instruments::shape::{Answer, Part, Refusal, Route};
use crate::markup::{escape, micros};
use crate::series::exemplars::{CAPTURE_LABEL, Captured, Captures, Exemplar, Pending};
use crate::units::Now;

/// Whether spike forensics runs, why not, and what this host offers it.
#[derive(Serialize)]
struct ForensicsBody {
    enabled: bool,
    available: bool,
    reason: Option<String>,
    threshold_ns: u64,
    dir: String,
    capabilities: Vec<Capability>,
    captures_kept: usize,
    disk_bytes: u64,
    /// The tracefs instance the flight recorder records in
    /// (`latencyd-forensics-PID`).
    instance: Option<String>,
    /// Times the instance was found changed or broken by another program
    /// and set back or made again.
    instance_repairs: u64,
}

/// Its object of `/api/v1/status`.
pub(super) fn status(p: &ForensicsPart) -> Box<RawValue> {
    let f = p.journal.lock();
    let body = ForensicsBody {
        enabled: p.enabled,
        available: f.available,
        reason: f.reason.clone(),
        threshold_ns: p.threshold_ns,
        dir: p.dir.display().to_string(),
        capabilities: f.capabilities.clone(),
        captures_kept: f.recent.len(),
        disk_bytes: f.disk_bytes,
        instance: f.instance.clone(),
        instance_repairs: f.repairs,
    };
    serde_json::value::to_raw_value(&body).expect("forensics' status serializes")
}

/// Captures listed on the status page.
const PAGE_SPIKES: usize = 10;

/// The status page's "Recent spikes": the newest captures with their
/// verdicts, each linked to its page; or why there are none.
pub(super) fn page_section(p: &ForensicsPart) -> String {
    let f = p.journal.lock();
    let mut html = String::from("<h2>Recent spikes</h2>\n");
    if !p.enabled || f.recent.is_empty() {
        let why = match (&f.reason, p.enabled) {
            (Some(reason), _) => format!("Forensics: {}.", escape(reason)),
            (None, true) => "No wake-up over the forensics threshold captured yet.".to_string(),
            (None, false) => "Forensics is off.".to_string(),
        };
        let _ = writeln!(html, "<p id=\"spikes\" class=\"sub\">{why}</p>");
        return html;
    }
    if !f.available {
        let why = f.reason.as_deref().unwrap_or("unknown reason");
        let _ = writeln!(
            html,
            "<p id=\"forensics-down\" class=\"bad\">Forensics is not capturing now: {}.</p>",
            escape(why)
        );
    }
    html.push_str(
        "<table id=\"spikes\"><thead><tr><th class=\"l\">When (UTC)</th><th>CPU</th>\
         <th>Latency µs</th><th class=\"l\">Main cause</th><th class=\"l\">Verdict</th>\
         </tr></thead><tbody>\n",
    );
    for spike in f.recent.iter().take(PAGE_SPIKES) {
        let main = spike
            .causes
            .first()
            .map_or_else(|| "-".to_string(), |c| format!("{}: {}", c.kind, c.name));
        let _ = writeln!(
            html,
            "<tr><td class=\"l\"><a href=\"/spikes/{id}\">{at}</a></td><td>{}</td>\
             <td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}{}</td></tr>",
            spike.cpu,
            micros(spike.latency_ns),
            escape(&main),
            escape(&spike.verdict),
            if spike.complete {
                ""
            } else {
                " (incomplete trace)"
            },
            id = escape(&spike.id),
            at = escape(&spike.at),
        );
    }
    html.push_str(
        "</tbody></table>\n<p class=\"sub\"><a href=\"/spikes\">Every capture kept</a>, each \
         with a picture of its CPU around the late wake-up.</p>\n",
    );
    html
}

/// The captures of this run (made since `started_unix_ns`), newest first
/// as the journal keeps them, and those it is about to make: window
/// maxima at least its threshold late (or every new maximum, with
/// `forensics.capture_new_max`), while it runs.
pub(super) fn captures(p: &ForensicsPart, now: Now, started_unix_ns: u64) -> Captures {
    let journal = p.journal.lock();
    Captures {
        list: (journal.recent.iter())
            .filter_map(|s| {
                let at = parse_rfc3339_ns(&s.at)
                    .ok()
                    .filter(|&at| at >= started_unix_ns)?;
                Some(Captured {
                    cpu: s.cpu,
                    task: (s.task.as_ref()).map(|t| (t.name.clone(), t.container.clone())),
                    exemplar: capture_exemplar(s, at),
                })
            })
            .collect(),
        pending: Pending {
            capturing: journal.enabled && journal.available,
            threshold_ns: journal.threshold_ns,
            new_max: p.capture_new_max,
        },
        monotonic_ns: now.monotonic_ns,
        unix_ns: now.unix_ns,
    }
}

fn capture_exemplar(s: &Summary, unix_ns: u64) -> Exemplar {
    let labels = vec![(CAPTURE_LABEL, s.id.clone()), ("cpu", s.cpu.to_string())];
    Exemplar::new(labels, s.latency_ns, unix_ns)
}

/// Its routes, in the order they are listed.
pub(super) const ROUTES: &[Route] = &[
    Route {
        path: "/api/v1/spikes",
        page: false,
        heavy: None,
        check: None,
        take: spikes_json,
    },
    Route {
        path: "/api/v1/spikes/{id}",
        page: false,
        heavy: Some("the capture"),
        check: Some(check_id),
        take: capture_json,
    },
    Route {
        path: "/spikes",
        page: true,
        heavy: None,
        check: None,
        take: spikes_page,
    },
    Route {
        path: "/spikes/{id}",
        page: true,
        heavy: Some("the capture"),
        check: Some(check_id),
        take: capture_page,
    },
];

/// The journal of the part (forensics' own, by the registry).
fn journal(part: &dyn Part) -> Arc<Journal> {
    (part.as_any().downcast_ref::<ForensicsPart>())
        .map_or_else(Default::default, |p| Arc::clone(&p.journal))
}

/// `/api/v1/spikes`: recent captures, newest first, without their events.
#[derive(Serialize)]
struct SpikesBody {
    available: bool,
    reason: Option<String>,
    spikes: Vec<Summary>,
}

fn spikes_json(part: &dyn Part, _host: &HostInfo) -> Answer {
    let journal = journal(part);
    Box::new(move |_| {
        let f = journal.lock();
        let body = SpikesBody {
            available: f.available,
            reason: f.reason.clone(),
            spikes: f.recent.iter().cloned().collect(),
        };
        serde_json::to_string(&body).map_err(|e| Refusal::Internal(e.to_string()))
    })
}

/// Why `id` is refused, if it is not a capture id.
fn check_id(id: &str) -> Result<(), String> {
    if store::valid_id(id) {
        return Ok(());
    }
    Err(format!(
        "'{id}' is not a capture id: ids are 13 digits of Unix milliseconds, '-cpu' and the CPU \
         number, with '-max' after it for a new window maximum (e.g. 1795315538123-cpu1); \
         /api/v1/spikes and the page /spikes list those kept"
    ))
}

fn no_capture(id: &str) -> String {
    format!(
        "no capture {id}: it may have been dropped to stay within forensics.max_captures and \
         forensics.max_bytes; /api/v1/spikes and the page /spikes list those kept"
    )
}

/// One capture's file as kept, read from the capture directory.
fn read_capture(journal: &Journal, id: &str) -> Result<String, Refusal> {
    match journal.capture_json(id).map_err(Refusal::Internal)? {
        Lookup::Found(text) => Ok(text),
        Lookup::Missing => Err(Refusal::NotFound(no_capture(id))),
        Lookup::NotACapture(why) => Err(Refusal::NotFound(why)),
    }
}

/// `/api/v1/spikes/{id}`: one capture whole, its attribution and the raw
/// events.
fn capture_json(part: &dyn Part, _host: &HostInfo) -> Answer {
    let journal = journal(part);
    Box::new(move |id| read_capture(&journal, id.unwrap_or_default()))
}

/// `/spikes`: the captures kept, as a page linking each.
fn spikes_page(part: &dyn Part, host: &HostInfo) -> Answer {
    let journal = journal(part);
    let nodename = host.uname.nodename.clone();
    Box::new(move |_| {
        let (summaries, why_none) = {
            let data = journal.lock();
            let why = match (&data.reason, data.enabled) {
                (Some(reason), _) => Some(format!("Forensics: {reason}.")),
                (None, true) => None,
                (None, false) => Some(
                    "Forensics is off: set forensics.enabled = true to capture late wake-ups."
                        .to_string(),
                ),
            };
            (data.recent.iter().cloned().collect::<Vec<_>>(), why)
        };
        Ok(pages::list_page(&nodename, &summaries, why_none.as_deref()))
    })
}

/// `/spikes/{id}`: one capture as a page with its picture. Only an id
/// shaped like a capture's reaches the store, which reads nothing but
/// `<id>.json` in its own directory.
fn capture_page(part: &dyn Part, host: &HostInfo) -> Answer {
    let journal = journal(part);
    let nodename = host.uname.nodename.clone();
    Box::new(move |id| {
        let id = id.unwrap_or_default();
        let text = read_capture(&journal, id)?;
        let capture = serde_json::from_str::<Capture>(&text).map_err(|e| {
            Refusal::Internal(format!(
                "the capture file of {id} cannot be read as a capture: {e}"
            ))
        })?;
        Ok(pages::capture_page(&nodename, &capture))
    })
}
