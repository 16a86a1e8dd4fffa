//! The shipped alerts across a fleet: 1,000 simulated hosts
//! (`benches/support/fleet.rs`: states rendered by latencyd's own
//! renderer, drawn from a seed) scraped every 2 s by a real Prometheus
//! with the shipped rules evaluated every second. Between 60 and 90 s
//! after start a few percent of the hosts spike once, regress after a
//! kernel upgrade, only upgrade, restart, go stale or lose a CPU. Then the
//! alerts each host raised are set against what its story should raise:
//!
//! - `LatencydMaxLatencyHigh`: every host that spiked or regressed (its
//!   tail, four times as long, crosses the 100 µs budget), and no other;
//! - `LatencydMissedPeriods`: every host whose spike slept through a 1 ms
//!   period, and no other;
//! - `LatencydHostConfigChanged`: every host whose kernel changed
//!   (upgraded or regressed), none that only restarted;
//! - `LatencydTargetDown`, pending: every stale host (its `for: 5m`
//!   outlasts the test), and no other;
//! - nothing else, for any host: no page from a restart, an offline CPU
//!   or a stale target.
//!
//! The regression alert proper needs a day of history and most of six
//! hours regressed; promtool's unit tests of the rules cover it
//! (deploy/prometheus/latencyd.rules.test.yml). The table of stories
//! against alerts is printed.

#[path = "../common/mod.rs"]
mod common;

#[path = "../../benches/support/fleet.rs"]
mod fleet;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use common::prometheus::Prometheus;
use common::wait_until;
use serde_json::Value;

/// Serves `fleet` on a thread of its own; returns its address.
fn serve(fleet: Arc<fleet::Fleet>) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            fleet::serve(fleet, listener).await;
        });
    });
    addr
}

/// The alerts each story should raise on a host (those it may raise: a
/// spike shorter than the 1 ms interval misses no period).
fn expected(host: &Value) -> BTreeSet<&'static str> {
    let story = host["story"].as_str().unwrap();
    let mut alerts = BTreeSet::new();
    if story == "spike" || story == "regress" {
        alerts.insert("LatencydMaxLatencyHigh firing");
    }
    if story == "spike" && host["spike_seconds"].as_f64().unwrap() >= 0.001 {
        alerts.insert("LatencydMissedPeriods firing");
    }
    if story == "upgrade" || story == "regress" {
        alerts.insert("LatencydHostConfigChanged firing");
    }
    if story == "stale" {
        alerts.insert("LatencydTargetDown pending");
    }
    alerts
}

#[test]
// Full tier: a real Prometheus and 1,000 simulated hosts, about 2 minutes.
fn the_alerts_page_exactly_the_hosts_that_spiked_or_regressed() {
    let spec = fleet::Spec {
        hosts: 1000,
        seed: 7,
        events_from: 60,
        events_to: 90,
        stale_secs: 600,
        rate: 1000,
        max_cpus: 8,
        per_cpu_histograms: true,
    };
    let dir = tempfile::tempdir().unwrap();
    let fleet = Arc::new(fleet::build(&spec));
    let started = std::time::Instant::now();
    let addr = serve(Arc::clone(&fleet));
    fleet::write_files(&fleet, &spec, dir.path(), &addr.to_string()).unwrap();
    let truth: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("truth.json")).unwrap())
            .unwrap();
    let targets = dir.path().join("targets.json");
    // The shipped fleet job (deploy/prometheus/prometheus.yml), faster.
    let config = format!(
        "global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n  evaluation_interval: 1s\n\
         rule_files: [rules.yml]\nscrape_configs:\n  - job_name: latencyd-fleet\n    \
         file_sd_configs:\n      - files: [\"{}\"]\n    relabel_configs:\n      \
         - target_label: job\n        replacement: latencyd\n",
        targets.display()
    );
    let prometheus = Prometheus::start_config(dir.path(), &config, &[]);
    // Until every host has been scraped a few times, alerts that look at
    // more than one scrape are pending everywhere (a heartbeat with one
    // value has not changed; nothing is there yet to be absent): what is
    // judged starts after that, before the first event.
    wait_until(
        "every host scraped",
        Duration::from_millis(500),
        Duration::from_secs(spec.events_from - 10),
        || prometheus.value("count(latencyd_build_info)") == Some(spec.hosts as f64),
    );
    std::thread::sleep(Duration::from_secs(8));
    let judged_from = started.elapsed();
    assert!(
        judged_from.as_secs() < spec.events_from,
        "too slow to start: {judged_from:?}"
    );
    // Every event scraped, and the rules evaluated on it.
    let until = Duration::from_secs(spec.events_to + 30);
    std::thread::sleep(until.saturating_sub(started.elapsed()));
    let up = prometheus.value("count(up == 1)").unwrap_or(0.0);
    let mut raised: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let judged = (started.elapsed() - judged_from).as_secs();
    for series in prometheus.query(&format!("max_over_time(ALERTS[{judged}s])")) {
        let m = &series["metric"];
        let alert = format!(
            "{} {}",
            m["alertname"].as_str().unwrap(),
            m["alertstate"].as_str().unwrap()
        );
        raised
            .entry(m["instance"].as_str().unwrap_or("").to_string())
            .or_default()
            .insert(alert);
    }
    // A pending alert that fired since counts as fired.
    for alerts in raised.values_mut() {
        let fired: Vec<_> = alerts
            .iter()
            .filter_map(|a| a.strip_suffix(" firing"))
            .map(String::from)
            .collect();
        for name in fired {
            alerts.remove(&format!("{name} pending"));
        }
    }
    // Stories against alerts: hosts with each alert, of how many.
    let mut table: BTreeMap<String, (usize, BTreeMap<String, usize>)> = BTreeMap::new();
    let mut wrong = Vec::new();
    for host in truth["hosts"].as_array().unwrap() {
        let instance = host["instance"].as_str().unwrap();
        let story = host["story"].as_str().unwrap().to_string();
        let got = raised.remove(instance).unwrap_or_default();
        let row = table.entry(story.clone()).or_default();
        row.0 += 1;
        for alert in &got {
            *row.1.entry(alert.clone()).or_default() += 1;
        }
        let want: BTreeSet<String> = expected(host).into_iter().map(String::from).collect();
        if got != want {
            wrong.push(format!(
                "{instance} ({story}): expected {want:?}, raised {got:?}"
            ));
        }
    }
    eprintln!(
        "{} hosts, {up} up at the end; story: hosts, then hosts per alert",
        spec.hosts
    );
    for (story, (hosts, alerts)) in &table {
        eprintln!("  {story:10} {hosts:4}  {alerts:?}");
    }
    assert!(
        raised.is_empty(),
        "alerts for no simulated host: {raised:?}"
    );
    assert!(
        wrong.is_empty(),
        "{} hosts raised the wrong alerts:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // Every story happened.
    for story in [
        "spike",
        "regress",
        "upgrade",
        "restart",
        "stale",
        "cpuoffline",
        "steady",
    ] {
        assert!(
            table.get(story).is_some_and(|(n, _)| *n > 0),
            "no {story} host: {table:?}"
        );
    }
}
