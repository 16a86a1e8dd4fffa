//! A host that ships its samples with VictoriaMetrics' vmagent, configured
//! by deploy/prometheus/vmagent.yml, to two receivers at once: a
//! VictoriaMetrics (whose vmalert runs the shipped rules and notifies a
//! real Alertmanager) and a Prometheus that receives remote writes and
//! runs the shipped rules itself. A spike on the host must arrive at
//! both and page at both, with what the alerts and dashboards read (the
//! info series, the classic buckets the percentile rules use, `up`); when
//! latencyd stops, both must see the target down and its series end.

#[path = "../common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::prometheus::{Prometheus, free_port, shipped_rules_every_second};
use common::victoria::{victoria_metrics, vmagent, vmalert};
use common::*;

const HOST: &str = "rt-host-vm";

/// The shipped vmagent configuration for a latencyd at `daemon`, scraping
/// every second.
fn vmagent_config(daemon: std::net::SocketAddr) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/vmagent.yml");
    let shipped = std::fs::read_to_string(path).unwrap();
    for placeholder in ["@HOST@", "127.0.0.1:9479", "scrape_interval: 15s"] {
        assert!(
            shipped.contains(placeholder),
            "vmagent.yml has no {placeholder}"
        );
    }
    shipped
        .replace("@HOST@", HOST)
        .replace("127.0.0.1:9479", &daemon.to_string())
        .replace("scrape_interval: 15s", "scrape_interval: 1s")
}

/// Debian's Alertmanager on loopback, killed when dropped.
struct Alertmanager(Child, std::net::SocketAddr);

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn alertmanager(dir: &Path) -> Alertmanager {
    require_tool(
        "prometheus-alertmanager",
        "--version",
        "prometheus-alertmanager",
    );
    std::fs::write(
        dir.join("alertmanager.yml"),
        "route:\n  receiver: nobody\nreceivers:\n  - name: nobody\n",
    )
    .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let child = Command::new("prometheus-alertmanager")
        .arg(format!(
            "--config.file={}",
            dir.join("alertmanager.yml").display()
        ))
        .arg(format!("--storage.path={}", dir.join("am").display()))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--cluster.listen-address=")
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "Alertmanager to be ready",
        Duration::from_millis(100),
        Duration::from_secs(30),
        || http_get(addr, "/-/ready").is_ok_and(|(status, _)| status == 200),
    );
    Alertmanager(child, addr)
}

/// The shipped rules as vmalert 1.79 takes them: without
/// `keep_firing_for`, which it does not know (docs/operations.md).
fn rules_for_vmalert() -> String {
    shipped_rules_every_second()
        .lines()
        .filter(|line| !line.trim_start().starts_with("keep_firing_for:"))
        .map(|line| format!("{line}\n"))
        .collect()
}

#[test]
// Full tier: VictoriaMetrics, vmagent, vmalert, Prometheus and Alertmanager, about 40 s.
fn a_spike_shipped_by_vmagent_arrives_at_both_receivers_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    // A budget of 1 us: every wake-up is over it, a spike on every CPU.
    let config = daemon_config(dir.path(), "spike_threshold = \"1us\"", "", "");
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    let [vm_dir, prom_dir, agent_dir, am_dir] = ["vm", "prometheus", "vmagent", "alertmanager"]
        .map(|d| {
            let path = dir.path().join(d);
            std::fs::create_dir_all(&path).unwrap();
            path
        });
    let vm = victoria_metrics(&vm_dir);
    let prometheus = Prometheus::start_config(
        &prom_dir,
        "global:\n  evaluation_interval: 1s\nrule_files: [rules.yml]\n",
        &["--web.enable-remote-write-receiver"],
    );
    let am = alertmanager(&am_dir);
    let _vmalert = vmalert(
        &vm_dir,
        &rules_for_vmalert(),
        vm.addr,
        &format!("http://{}", am.1),
    );
    let _agent = vmagent(
        &agent_dir,
        &vmagent_config(daemon.addr),
        &[
            format!("http://{}/api/v1/write", vm.addr),
            format!("http://{}/api/v1/write", prometheus.addr),
        ],
    );
    let instance = format!("instance=\"{HOST}:9479\"");
    let receivers = [("VictoriaMetrics", &vm), ("Prometheus", &prometheus)];
    for (name, receiver) in receivers {
        wait_until(
            &format!("the host's series to arrive at {name}"),
            Duration::from_millis(250),
            Duration::from_secs(60),
            || {
                !receiver
                    .query(&format!("latencyd_build_info{{{instance}}}"))
                    .is_empty()
            },
        );
        // What the alerts join on, the buckets the percentiles read, and
        // the scrape's own `up`.
        for expr in [
            format!("latencyd_host_info{{{instance}}}"),
            format!("latencyd_config_spike_threshold_seconds{{{instance}}}"),
            format!("latencyd_host_fingerprint_info{{{instance}}}"),
            format!("latencyd_wakeup_latency_seconds_bucket{{{instance},le=\"+Inf\"}}"),
            format!("latencyd_wakeup_latency_max_seconds{{{instance}}}"),
            format!("up{{{instance}}} == 1"),
        ] {
            wait_until(
                &format!("{expr} at {name}"),
                Duration::from_millis(250),
                Duration::from_secs(30),
                || !receiver.query(&expr).is_empty(),
            );
        }
        // Every series latencyd serves arrives, not just those above.
        let served: std::collections::BTreeSet<String> = http_get(daemon.addr, "/metrics")
            .unwrap()
            .1
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| l.split(['{', ' ']).next().map(str::to_string))
            .collect();
        let arrived: std::collections::BTreeSet<String> = receiver
            .query(&format!("count by (__name__) ({{{instance}}})"))
            .iter()
            .filter_map(|s| s["metric"]["__name__"].as_str().map(str::to_string))
            .collect();
        let missing: Vec<_> = served.difference(&arrived).collect();
        assert!(missing.is_empty(), "not at {name}: {missing:?}");
        eprintln!("{name}: {} metric names of the host arrived", arrived.len());
    }
    // Paged centrally: Prometheus runs the rules on what it received;
    // vmalert runs them on VictoriaMetrics and notifies Alertmanager.
    wait_until(
        "LatencydMaxLatencyHigh to fire in the Prometheus receiver",
        Duration::from_millis(250),
        Duration::from_secs(60),
        || {
            !prometheus
                .query(&format!(
                    "ALERTS{{alertname=\"LatencydMaxLatencyHigh\",alertstate=\"firing\",{instance}}}"
                ))
                .is_empty()
        },
    );
    wait_until(
        "the host's p99 recorded by Prometheus from the shipped buckets",
        Duration::from_millis(250),
        Duration::from_secs(30),
        || {
            !prometheus
                .query(&format!(
                    "instance:latencyd_wakeup_latency_seconds:p99_5m{{{instance}}}"
                ))
                .is_empty()
        },
    );
    wait_until(
        "vmalert to send LatencydMaxLatencyHigh for the host to Alertmanager",
        Duration::from_millis(250),
        Duration::from_secs(60),
        || {
            let (_, body) = http_get(am.1, "/api/v2/alerts").unwrap();
            let alerts: serde_json::Value = serde_json::from_str(&body).unwrap();
            alerts.as_array().is_some_and(|alerts| {
                alerts.iter().any(|a| {
                    a["labels"]["alertname"] == "LatencydMaxLatencyHigh"
                        && a["labels"]["instance"] == format!("{HOST}:9479").as_str()
                })
            })
        },
    );
    wait_until(
        "the p99 recorded by vmalert into VictoriaMetrics",
        Duration::from_millis(250),
        Duration::from_secs(30),
        || {
            !vm.query(&format!(
                "instance:latencyd_wakeup_latency_seconds:p99_5m{{{instance}}}"
            ))
            .is_empty()
        },
    );
    // latencyd stops: vmagent's scrape fails, `up` says so at both, and
    // the host's series end (vmagent sends staleness markers).
    drop(daemon);
    for (name, receiver) in receivers {
        wait_until(
            &format!("the host to be down at {name} and its series to end"),
            Duration::from_millis(250),
            Duration::from_secs(30),
            || {
                !receiver.query(&format!("up{{{instance}}} == 0")).is_empty()
                    && receiver
                        .query(&format!("latencyd_build_info{{{instance}}}"))
                        .is_empty()
            },
        );
    }
}
