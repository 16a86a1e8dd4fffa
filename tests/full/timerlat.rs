//! The timerlat and hwnoise panels and alerts run by a real Prometheus
//! on metrics a kernel-matrix guest served.
//! (tests/timerlat.rs holds the quick tier's.)

#[path = "../common/mod.rs"]
mod common;

use common::*;

/// The host dashboard's timerlat panel and the timerlat alert, in a real
/// Prometheus, on the `/metrics` a daemon with `[timerlat]` served in the
/// kernel matrix's 6.12 PREEMPT_RT guest (captured with
/// `scripts/kernel-matrix --capture`): this machine's kernel has no
/// timerlat, so its daemon cannot serve these series.
#[test]
// Full tier: Debian's prometheus.
fn the_timerlat_panel_and_alert_run_on_a_guests_metrics() {
    use common::prometheus::Prometheus;
    use std::time::Duration;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let metrics =
        std::fs::read_to_string(root.join("tests/data/kernels/6.12-rt-amd64/metrics")).unwrap();
    assert!(metrics.contains("latencyd_timerlat_latency_seconds_bucket"));
    let dir = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(dir.path(), "latencyd", serve_metrics(metrics));
    wait_until(
        "scrapes of the guest's metrics and every rule evaluated",
        Duration::from_millis(250),
        Duration::from_secs(60),
        || {
            let scraped = prometheus
                .query("count_over_time(latencyd_timerlat_periods_total[1m])")
                .first()
                .and_then(|s| s["value"][1].as_str()?.parse::<f64>().ok())
                .is_some_and(|n| n >= 5.0);
            let rules = prometheus.api("/api/v1/rules");
            scraped
                && rules["data"]["groups"].as_array().is_some_and(|groups| {
                    (groups.iter())
                        .flat_map(|g| g["rules"].as_array().unwrap())
                        .all(|r| r["health"] == "ok")
                })
        },
    );
    let text = std::fs::read_to_string(root.join("grafana/dashboards/latencyd-host.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut checked = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            if !panel["title"]
                .as_str()
                .unwrap_or_default()
                .starts_with("timerlat")
            {
                continue;
            }
            let expr = expr.replace("$__interval", "5s").replace("$instance", ".*");
            let series = prometheus.query(&expr);
            assert!(!series.is_empty(), "{expr} returns nothing");
            if expr.contains("latencyd_timerlat_") {
                let mut contexts: Vec<&str> = (series.iter())
                    .filter_map(|s| s["metric"]["context"].as_str())
                    .collect();
                contexts.sort_unstable();
                assert_eq!(contexts, ["irq", "thread", "user"], "{series:?}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 2, "the panel's two queries");
    let rules = prometheus.api("/api/v1/rules");
    let alert = (rules["data"]["groups"].as_array().unwrap().iter())
        .flat_map(|g| g["rules"].as_array().unwrap())
        .find(|r| r["name"] == "LatencydTimerlatLatencyHigh")
        .unwrap();
    assert_eq!(alert["health"], "ok", "{alert}");
}

/// The host dashboard's hardware-noise panel and the hwnoise alerts, in a
/// real Prometheus, on the `/metrics` a daemon with `[hwnoise]` served in
/// the kernel matrix's 6.12 PREEMPT_RT guest after two windows (each
/// CPU's largest gap in the last one, emulated: 1.5 and 3.3 ms).
#[test]
// Full tier: Debian's prometheus.
fn the_hwnoise_panel_and_alert_run_on_a_guests_metrics() {
    use common::prometheus::Prometheus;
    use std::time::Duration;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("tests/data/kernels/6.12-rt-amd64/metrics.hwnoise");
    let metrics = std::fs::read_to_string(path).unwrap();
    assert!(metrics.contains("latencyd_hwnoise_windows_total 2"));
    let dir = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(dir.path(), "latencyd", serve_metrics(metrics));
    let firing = |name: &str| {
        let rules = prometheus.api("/api/v1/rules");
        (rules["data"]["groups"].as_array().unwrap().iter())
            .flat_map(|g| g["rules"].as_array().unwrap().clone())
            .find(|r| r["name"] == name)
            .map(|r| {
                (
                    r["health"] == "ok",
                    r["alerts"].as_array().cloned().unwrap_or_default(),
                )
            })
    };
    wait_until(
        "the guest's metrics scraped and LatencydHwnoiseGapHigh evaluated",
        Duration::from_millis(250),
        Duration::from_secs(60),
        || firing("LatencydHwnoiseGapHigh").is_some_and(|(ok, alerts)| ok && alerts.len() == 2),
    );
    let (_, alerts) = firing("LatencydHwnoiseGapHigh").unwrap();
    let mut cpus: Vec<&str> = (alerts.iter())
        .filter_map(|a| a["labels"]["cpu"].as_str())
        .collect();
    cpus.sort_unstable();
    assert_eq!(cpus, ["0", "1"], "{alerts:?}");
    let (ok, skipped) = firing("LatencydHwnoiseWindowSkipped").unwrap();
    assert!(
        ok && skipped.is_empty(),
        "no window was skipped: {skipped:?}"
    );
    let text = std::fs::read_to_string(root.join("grafana/dashboards/latencyd-host.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let panel = (dashboard["panels"].as_array().unwrap().iter())
        .find(|p| {
            p["title"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Hardware noise")
        })
        .unwrap();
    let expr = panel["targets"][0]["expr"].as_str().unwrap();
    let expr = expr.replace("$__interval", "5s").replace("$instance", ".*");
    let series = prometheus.query(&expr);
    let mut gaps: Vec<(String, String)> = (series.iter())
        .map(|s| {
            let cpu = s["metric"]["cpu"].as_str().unwrap().to_string();
            (cpu, s["value"][1].as_str().unwrap().to_string())
        })
        .collect();
    gaps.sort();
    assert_eq!(
        gaps,
        [
            ("0".into(), "0.001456".into()),
            ("1".into(), "0.003277".into())
        ],
        "{series:?}"
    );
    let shade = &dashboard["annotations"]["list"];
    let hwnoise = (shade.as_array().unwrap().iter())
        .find(|a| a["name"] == "hwnoise windows")
        .unwrap();
    let expr = hwnoise["expr"].as_str().unwrap().replace("$instance", ".*");
    assert!(
        prometheus.query(&expr).is_empty(),
        "no window runs in the capture: nothing shaded now"
    );
    let up = prometheus.query(&expr.replace(" == 1", " == 0"));
    assert_eq!(up.len(), 1, "the shading's series exists: {up:?}");
}

/// Serves `text` as a `/metrics` answer to every request, on loopback.
fn serve_metrics(text: String) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                text.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(text.as_bytes());
        }
    });
    addr
}
