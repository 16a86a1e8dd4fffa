//! The regression alert across a fleet, over the day and more of history
//! it needs: 1,000 simulated hosts (`benches/support/fleet.rs`, the same
//! draw from a seed as the live fleet test) scraped every 5 minutes for
//! 40 hours, the shipped rules evaluated on them by promtool (Prometheus'
//! own rule engine; a live Prometheus would need the 40 hours). Between
//! hours 30 and 33 a few percent of the hosts spike once, regress after a
//! kernel upgrade (their tail four times as long), restart, go stale for
//! 90 minutes or lose a CPU; the rest run on. Then, over the whole 40
//! hours, `LatencydMaxLatencyRegression` must have fired for exactly the
//! hosts that regressed, and still fire for them at the end.
//!
//! The series are those the regression rules read, named and labelled as
//! latencyd's renderer renders them: every CPU's window maximum (the
//! worst of a 60 s window at 1 kHz, drawn from the host's kernel's
//! distribution) and the host's budget. An upgrade that changes nothing
//! else (the fingerprint) is a host that runs on here: the regression
//! rules read no fingerprint; `tests/full/fleet_alerts.rs` checks what a
//! fingerprint change raises.

#[path = "../common/mod.rs"]
mod common;

#[path = "../../benches/support/fleet.rs"]
mod fleet;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use common::{require_tool, stderr_of, stdout_of};
use fleet::Story;

const STEP_S: u64 = 300;
const HOURS: u64 = 40;
const STALE_S: u64 = 90 * 60;
/// Every rule evaluated each half hour (the hourly group's rules mean the
/// same at any interval; promtool evaluates every group at this one).
const EVAL_S: u64 = 1800;
const SHARD: usize = 100;

/// The label sets (without `job` and `instance`, which Prometheus adds)
/// of `name`'s series in a rendered `/metrics`.
fn label_sets(text: &str, name: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(name))
        .filter_map(|rest| {
            rest.strip_prefix('{')
                .map(|r| r.split_once('}').unwrap().0.to_string())
                .or_else(|| rest.starts_with(' ').then(String::new))
        })
        .collect()
}

/// A promtool series' values: a number, `_` (no scrape) or `stale`.
fn values(points: impl Iterator<Item = Option<String>>) -> String {
    let mut out = String::new();
    let mut was_there = true;
    for point in points {
        let word = match point {
            Some(v) => v,
            None if was_there => "stale".to_string(),
            None => "_".to_string(),
        };
        was_there = word != "stale" && word != "_";
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&word);
    }
    out
}

/// Whether host `h` answered the scrape at `t` (seconds).
fn scraped(h: &fleet::Host, t: u64) -> bool {
    match h.story {
        Story::Stale => !(h.at_s..h.at_s + STALE_S).contains(&t),
        // Down for the one scrape it restarted in.
        Story::Restart => !(h.at_s..h.at_s + STEP_S).contains(&t),
        _ => true,
    }
}

/// One host's series, as promtool input.
fn host_series(fleet: &fleet::Fleet, n: usize, rng: &mut fleet::Rng, out: &mut String) {
    let steps = HOURS * 3600 / STEP_S;
    let h = &fleet.hosts[n];
    let text = fleet::render(fleet, n);
    let instance = fleet::instance(n);
    let at = |labels: &str| {
        let sep = if labels.is_empty() { "" } else { "," };
        format!("{{job=\"latencyd\",instance=\"{instance}\"{sep}{labels}}}")
    };
    let name = "latencyd_wakeup_latency_window_max_seconds";
    let cpus = label_sets(&text, name);
    assert_eq!(cpus.len(), h.cpus, "host {n}: {cpus:?}");
    for (cpu, labels) in cpus.iter().enumerate() {
        let points = (0..=steps).map(|i| {
            let t = i * STEP_S;
            let offline = h.story == Story::CpuOffline && cpu == h.cpu && t >= h.at_s;
            if !scraped(h, t) || offline {
                return None;
            }
            let regressed = h.story == Story::Regress && t >= h.at_s;
            let mut ns = fleet::window_max_ns(rng, h.kernel, regressed, 60_000);
            // The one scrape whose window held the spike.
            if h.story == Story::Spike && cpu == h.cpu && (h.at_s..h.at_s + STEP_S).contains(&t) {
                ns = ns.max(h.spike_ns);
            }
            Some(format!("{}", ns as f64 / 1e9))
        });
        let values = values(points);
        writeln!(
            out,
            "      - series: '{name}{}'\n        values: '{values}'",
            at(labels)
        )
        .unwrap();
    }
    let name = "latencyd_config_spike_threshold_seconds";
    assert_eq!(
        label_sets(&text, name),
        [""],
        "host {n}: one budget, unlabelled"
    );
    let points = (0..=steps).map(|i| scraped(h, i * STEP_S).then(|| "0.0001".to_string()));
    let values = values(points);
    writeln!(
        out,
        "      - series: '{name}{}'\n        values: '{values}'",
        at("")
    )
    .unwrap();
}

/// The promtool test file of the fleet's history, a test group (its own
/// storage) of `SHARD` hosts at a time: promtool refuses a query that
/// loads over 10,000 samples, and the regression rules look at each host
/// alone. Also the hosts expected to page.
fn history(fleet: &fleet::Fleet, rules: &Path) -> (String, Vec<String>) {
    let mut rng = fleet::Rng(0x4e57_0a7e);
    let mut test = format!(
        "rule_files: ['{}']\nevaluation_interval: {EVAL_S}s\ntests:\n",
        rules.display()
    );
    let mut paged = Vec::new();
    for first in (0..fleet.hosts.len()).step_by(SHARD) {
        let hosts = first..(first + SHARD).min(fleet.hosts.len());
        writeln!(test, "  - interval: {STEP_S}s\n    input_series:").unwrap();
        for n in hosts.clone() {
            host_series(fleet, n, &mut rng, &mut test);
        }
        let expected: String = hosts
            .filter(|&n| fleet.hosts[n].story == Story::Regress)
            .map(|n| {
                paged.push(fleet::instance(n));
                format!(
                    "          - labels: '{{instance=\"{}\"}}'\n            value: 1\n",
                    fleet::instance(n)
                )
            })
            .collect();
        let expected = if expected.is_empty() {
            " []\n".to_string()
        } else {
            format!("\n{expected}")
        };
        let alert = "ALERTS{alertname=\"LatencydMaxLatencyRegression\"";
        // Whoever fired over the whole 40 hours; whoever fires at the end.
        writeln!(test, "    promql_expr_test:").unwrap();
        for expr in [
            format!("count by (instance) (max_over_time({alert}}}[{HOURS}h]))"),
            format!("count by (instance) ({alert},alertstate=\"firing\"}})"),
        ] {
            writeln!(
                test,
                "      - expr: '{expr}'\n        eval_time: {HOURS}h\n        exp_samples:{expected}"
            )
            .unwrap();
        }
    }
    (test, paged)
}

#[test]
// Full tier: promtool over 40 hours of 1,000 hosts, about a minute.
fn the_regression_alert_pages_exactly_the_hosts_that_regressed() {
    require_tool("promtool", "--version", "prometheus");
    let spec = fleet::Spec {
        hosts: 1000,
        seed: 7,
        events_from: 30 * 3600,
        events_to: 33 * 3600,
        stale_secs: STALE_S,
        rate: 10,
        max_cpus: 8,
        per_cpu_histograms: true,
    };
    let fleet = fleet::build(&spec);
    // A second of samples: every CPU has a window maximum to render.
    fleet::tick(&fleet, 0..1, &mut fleet::Rng(1));
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/latencyd.rules.yml");
    let (test, paged) = history(&fleet, &rules);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.test.yml");
    std::fs::write(&file, &test).unwrap();
    let started = std::time::Instant::now();
    let output = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    let said = format!("{}{}", stdout_of(&output), stderr_of(&output));
    let mut stories: BTreeMap<String, usize> = BTreeMap::new();
    for h in &fleet.hosts {
        *stories.entry(format!("{:?}", h.story)).or_default() += 1;
    }
    eprintln!(
        "{} hosts over {HOURS} h ({} MB of series), promtool {:.1?}: {stories:?}; \
         expected to page: the {} that regressed",
        spec.hosts,
        test.len() / 1_000_000,
        started.elapsed(),
        paged.len()
    );
    assert!(
        output.status.success() && said.contains("SUCCESS"),
        "promtool: {}",
        said.chars().take(20_000).collect::<String>()
    );
    for story in [
        Story::Spike,
        Story::Regress,
        Story::Restart,
        Story::Stale,
        Story::CpuOffline,
    ] {
        assert!(
            fleet.hosts.iter().any(|h| h.story == story),
            "no {story:?} host"
        );
    }
}
