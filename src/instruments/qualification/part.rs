//! The qualification as the daemon keeps it, and rendered: the
//! `latencyd_qualif*` families, the `qualification` object of
//! `/api/v1/status` and the status page's line.

use std::path::Path;

use prometheus::proto::{Metric, MetricType};
use serde_json::value::RawValue;

use crate::calendar::parse_rfc3339_ns;
use crate::exposition::Family;
use crate::exposition::metric::{gauge, label};
use crate::instruments::shape::{PageLine, Part, PartBuild};
use crate::record::qualification::{self, Summary};
use crate::units::Now;

/// The last qualification, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct QualificationPart {
    pub summary: Result<Summary, String>,
}

impl QualificationPart {
    /// Before the daemon has started its instruments.
    pub fn not_read() -> QualificationPart {
        QualificationPart {
            summary: Err(
                "not read yet: the daemon reads the record's qualification as it starts".into(),
            ),
        }
    }

    /// The record's qualification in `dir`.
    pub fn read(dir: &Path) -> QualificationPart {
        let summary = match qualification::read(dir) {
            Ok(Some(summary)) => Ok(summary),
            Ok(None) => Err(format!(
                "none in {} (latencyd qualify --record writes it)",
                dir.display()
            )),
            Err(e) => Err(e),
        };
        QualificationPart { summary }
    }
}

impl Part for QualificationPart {
    fn status(&self) -> Option<Box<RawValue>> {
        let body = match &self.summary {
            Ok(s) => serde_json::json!({
                "profile": s.profile,
                "verdict": s.verdict,
                "ended": s.ended,
                "fingerprint": s.host.fingerprint,
                "phases": s.phases.iter().map(|p| serde_json::json!({
                    "name": p.name,
                    "tool": p.tool,
                    "status": p.status,
                    "maximum_us": p.maximum_us,
                    "max_us": p.cpus.iter()
                        .map(|c| (c.cpu.to_string(), c.stats.max.into()))
                        .collect::<serde_json::Map<String, serde_json::Value>>(),
                })).collect::<Vec<_>>(),
            }),
            Err(why) => serde_json::json!({ "none": why }),
        };
        Some(serde_json::value::to_raw_value(&body).expect("the qualification serializes"))
    }

    fn page_line(&self) -> Option<PageLine> {
        let s = self.summary.as_ref().ok()?;
        let idle = s.phases.iter().find(|p| p.name == "idle");
        let worst = idle
            .and_then(|p| p.cpus.iter().map(|c| c.stats.max).reduce(f64::max))
            .map_or_else(String::new, |max| {
                format!("; its idle maximum was {max:.0} us")
            });
        Some(PageLine {
            text: format!(
                "Qualified {} with profile {}: {}{worst}.",
                s.ended, s.profile, s.verdict
            ),
            running: None,
        })
    }
}

fn summary(part: &dyn Part) -> Option<&Summary> {
    part.as_any()
        .downcast_ref::<QualificationPart>()
        .and_then(|q| q.summary.as_ref().ok())
}

fn max_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    let Some(s) = summary(p) else {
        return vec![];
    };
    (s.phases.iter())
        .flat_map(|phase| {
            phase.cpus.iter().map(|c| {
                let labels = vec![
                    label("cpu", &c.cpu.to_string()),
                    label("phase", &phase.name),
                ];
                gauge(labels, c.stats.max / 1e6)
            })
        })
        .collect()
}

fn timestamp_seconds(p: &dyn Part, _now: Now) -> Vec<Metric> {
    (summary(p).and_then(|s| parse_rfc3339_ns(&s.ended).ok()))
        .map(|ns| gauge(vec![], ns as f64 / 1e9))
        .into_iter()
        .collect()
}

fn info(p: &dyn Part, _now: Now) -> Vec<Metric> {
    (summary(p).into_iter())
        .map(|s| {
            let labels = vec![
                label("fingerprint", &s.host.fingerprint),
                label("profile", &s.profile),
                label("verdict", &s.verdict),
            ];
            gauge(labels, 1.0)
        })
        .collect()
}

/// The `latencyd_qualif*` families, in the order served; absent without
/// a qualification in the record.
pub(super) const FAMILIES: &[Family<PartBuild>] = &[
    Family {
        name: "latencyd_qualified_max_seconds",
        help: "The maximum the host's last qualification (latencyd qualify --record) measured, per phase (hwlat, idle, loaded-PROFILE, timerlat, busypoll) and CPU.",
        kind: MetricType::GAUGE,
        labels: &["cpu", "phase"],
        build: max_seconds,
    },
    Family {
        name: "latencyd_qualification_timestamp_seconds",
        help: "When the host's last qualification ended (Unix time).",
        kind: MetricType::GAUGE,
        labels: &[],
        build: timestamp_seconds,
    },
    Family {
        name: "latencyd_qualification_info",
        help: "The host's last qualification: its profile, its verdict (passed, failed, could-not-measure) and the host's fingerprint then. Always 1.",
        kind: MetricType::GAUGE,
        labels: &["fingerprint", "profile", "verdict"],
        build: info,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_qualification_becomes_its_families_status_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let none = QualificationPart::read(dir.path());
        assert!(
            none.status()
                .unwrap()
                .get()
                .contains("latencyd qualify --record writes it")
        );
        assert_eq!(
            (none.page_line(), max_seconds(&none, Now::default()).len()),
            (None, 0)
        );
        let document = r#"{"profile": "smoke", "verdict": "passed", "ended": "2026-11-28T10:00:00.000Z",
            "host": {"fingerprint": "abc"}, "phases": [{"name": "idle", "tool": "cyclictest",
            "maximum_us": 100, "status": "measured", "cpus": [{"cpu": 1, "stats": {"max": 41.5}},
            {"cpu": 2, "stats": {"max": 12.0}}]}]}"#;
        qualification::write(dir.path(), document).unwrap();
        let part = QualificationPart::read(dir.path());
        let maxima: Vec<f64> = max_seconds(&part, Now::default())
            .iter()
            .map(|m| m.get_gauge().get_value())
            .collect();
        assert_eq!(maxima, [41.5e-6, 12e-6]);
        assert_eq!(
            timestamp_seconds(&part, Now::default())[0]
                .get_gauge()
                .get_value(),
            1_795_860_000.0
        );
        assert_eq!(info(&part, Now::default()).len(), 1);
        assert_eq!(
            part.page_line().unwrap().text,
            "Qualified 2026-11-28T10:00:00.000Z with profile smoke: passed; its idle maximum was 42 us."
        );
        assert!(
            part.status()
                .unwrap()
                .get()
                .contains(r#""max_us":{"1":41.5,"2":12.0}"#),
            "{}",
            part.status().unwrap().get()
        );
    }
}
