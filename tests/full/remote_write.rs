//! A host nobody can scrape: Prometheus in agent mode beside latencyd,
//! configured by deploy/prometheus/agent.yml, remote-writes to a central
//! Prometheus that receives remote writes and runs the shipped rules. A
//! spike on the host must arrive centrally and page there, with what the
//! alerts and dashboards read (the info series, the classic buckets the
//! percentile rules use, `up`, the exemplars); when latencyd stops, the
//! central side must see the target down and its series end.

#[path = "../common/mod.rs"]
mod common;

use std::path::Path;
use std::time::Duration;

use common::prometheus::Prometheus;
use common::*;

const HOST: &str = "rt-host-nat";

/// The shipped agent configuration for a latencyd at `daemon`, writing to
/// `central`, scraping every second.
fn agent_config(daemon: std::net::SocketAddr, central: std::net::SocketAddr) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/agent.yml");
    let shipped = std::fs::read_to_string(path).unwrap();
    for placeholder in [
        "@HOST@",
        "@CENTRAL@",
        "127.0.0.1:9479",
        "scrape_interval: 15s",
    ] {
        assert!(
            shipped.contains(placeholder),
            "agent.yml has no {placeholder}"
        );
    }
    shipped
        .replace("@HOST@", HOST)
        .replace("@CENTRAL@", &format!("http://{central}/api/v1/write"))
        .replace("127.0.0.1:9479", &daemon.to_string())
        .replace("scrape_interval: 15s", "scrape_interval: 1s")
}

#[test]
// Full tier: two real Prometheus servers, about 40 s.
fn a_spike_behind_nat_arrives_centrally_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    // A budget of 1 us: every wake-up is over it, a spike on every CPU.
    let config = daemon_config(dir.path(), "spike_threshold = \"1us\"", "", "");
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    let (central_dir, agent_dir) = (dir.path().join("central"), dir.path().join("agent"));
    std::fs::create_dir_all(&central_dir).unwrap();
    std::fs::create_dir_all(&agent_dir).unwrap();
    let central = Prometheus::start_config(
        &central_dir,
        "global:\n  evaluation_interval: 1s\nrule_files: [rules.yml]\n",
        &[
            "--web.enable-remote-write-receiver",
            "--enable-feature=exemplar-storage",
        ],
    );
    let _agent = Prometheus::start_config(
        &agent_dir,
        &agent_config(daemon.addr, central.addr),
        &["--enable-feature=agent,exemplar-storage"],
    );
    let instance = format!("instance=\"{HOST}:9479\"");
    let arrived = |expr: &str| !central.query(expr).is_empty();
    wait_until(
        "the host's series to arrive centrally",
        Duration::from_millis(250),
        Duration::from_secs(60),
        || arrived(&format!("latencyd_build_info{{{instance}}}")),
    );
    wait_until(
        "the central LatencydMaxLatencyHigh to fire for the host",
        Duration::from_millis(250),
        Duration::from_secs(60),
        || {
            arrived(&format!(
                "ALERTS{{alertname=\"LatencydMaxLatencyHigh\",alertstate=\"firing\",{instance}}}"
            ))
        },
    );
    // What the alerts join on, and the buckets the percentiles read.
    for expr in [
        format!("latencyd_host_info{{{instance}}}"),
        format!("latencyd_config_spike_threshold_seconds{{{instance}}}"),
        format!("latencyd_host_fingerprint_info{{{instance}}}"),
        format!("up{{{instance}}} == 1"),
    ] {
        assert!(arrived(&expr), "nothing centrally for {expr}");
    }
    wait_until(
        "the host's p99 recorded centrally from its classic buckets",
        Duration::from_millis(250),
        Duration::from_secs(30),
        || {
            arrived(&format!(
                "instance:latencyd_wakeup_latency_seconds:p99_5m{{{instance}}}"
            ))
        },
    );
    // The window maximum's exemplar, sent with send_exemplars.
    let now = latencyd::units::unix_now_ns() / 1_000_000_000;
    wait_until(
        "an exemplar of the host to arrive centrally",
        Duration::from_millis(500),
        Duration::from_secs(30),
        || {
            let json = central.api(&format!(
                "/api/v1/query_exemplars?query={}&start={}&end={}",
                url_encode(&format!(
                    "latencyd_wakeup_latency_seconds_bucket{{{instance}}}"
                )),
                now - 600,
                now + 600
            ));
            json["data"]
                .as_array()
                .is_some_and(|series| !series.is_empty())
        },
    );
    // latencyd stops: the agent's scrape fails, `up` says so centrally and
    // the host's series end (staleness markers travel too).
    drop(daemon);
    wait_until(
        "the host to be down centrally and its series to end",
        Duration::from_millis(250),
        Duration::from_secs(30),
        || {
            arrived(&format!("up{{{instance}}} == 0"))
                && !arrived(&format!("latencyd_build_info{{{instance}}}"))
        },
    );
}
