//! The latency histogram as a Prometheus native histogram: a real
//! Prometheus with `--enable-feature=native-histograms` scrapes latencyd
//! in the protobuf exposition, and its `histogram_quantile(0.99, …)`
//! over the native series agrees with `/api/v1/latency`'s p99.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::prometheus::Prometheus;
use common::{Daemon, daemon_config, latencyd};
use serde_json::Value;

#[test]
// Full tier: a real Prometheus.
fn prometheus_reads_the_native_histogram_and_agrees_on_the_p99() {
    let dir = tempfile::tempdir().unwrap();
    // 10 samples a second: counts change slowly enough to catch
    // Prometheus and the API looking at the same samples.
    let config = daemon_config(dir.path(), "interval = \"100ms\"", "", "");
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    let prometheus = Prometheus::start_with_flags(
        dir.path(),
        "latencyd",
        daemon.addr,
        // The check below needs a moment when Prometheus's last scrape
        // and the API hold the same count. The count moves at the
        // samplers' 200 ms handovers; scraped every second, the wait from
        // a scrape to the next handover depends on their phases, fixed
        // for the run, and was once too short for 60 s of tries. Scraped
        // every 100 ms, at least half of every 200 ms qualifies.
        "100ms",
        &["--enable-feature=native-histograms"],
    );
    // Some samples first.
    std::thread::sleep(Duration::from_secs(8));
    let series = "latencyd_wakeup_latency_seconds{job=\"latencyd\",cpu=\"0\"}";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "no moment where Prometheus and the API agreed on the count"
        );
        let api = |daemon: &Daemon| -> (u64, u64) {
            let (_, body) = daemon.get("/api/v1/latency");
            let v: Value = serde_json::from_str(&body).unwrap();
            let cpu0 = v["cpus"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["cpu"] == 0)
                .unwrap()
                .clone();
            (
                cpu0["count"].as_u64().unwrap(),
                cpu0["p99_ns"].as_u64().unwrap(),
            )
        };
        let (count_before, p99_ns) = api(&daemon);
        let scraped = prometheus.value(&format!("histogram_count({series})"));
        let quantile = prometheus.value(&format!("histogram_quantile(0.99, {series})"));
        let (count_after, _) = api(&daemon);
        let (Some(scraped), Some(quantile)) = (scraped, quantile) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        if count_before != count_after || scraped as u64 != count_before || count_before < 50 {
            std::thread::sleep(Duration::from_millis(37));
            continue;
        }
        // The same samples: the native quantile lies in the schema-7
        // bucket (2^(1/128), 0.54 % wide) holding the HDR bucket's upper
        // edge that /api/v1/latency reports (within 1/128 of the true
        // value).
        let api_s = p99_ns as f64 / 1e9;
        let tolerance = api_s * (2f64.powf(1.0 / 128.0) - 1.0 + 1.0 / 128.0);
        assert!(
            (quantile - api_s).abs() <= tolerance,
            "Prometheus p99 {quantile} s, /api/v1/latency p99 {api_s} s, {count_before} samples"
        );
        eprintln!(
            "native histogram: Prometheus p99 {quantile} s, /api/v1/latency p99 {api_s} s, \
             {count_before} samples"
        );
        // What this Prometheus kept of the classic buckets (versions
        // differ; docs/metrics.md "Native histograms").
        eprintln!(
            "classic _bucket series kept by this Prometheus: {:?}",
            prometheus.value("count(latencyd_wakeup_latency_seconds_bucket)")
        );
        // The classic buckets are the same family in the text exposition,
        // for everyone who does not ask for protobuf.
        let (_, text) = daemon.get("/metrics");
        assert!(text.contains("latencyd_wakeup_latency_seconds_bucket{cpu=\"0\",le=\"0.001\"}"));
        break;
    }
    // The host dashboard's native heatmap reads this Prometheus: its query,
    // with Grafana's variables filled in, returns a native histogram.
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("grafana/dashboards/latencyd-host.json"),
    )
    .unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let native: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .filter(|e| e.contains("latencyd_wakeup_latency_seconds{"))
        .collect();
    assert_eq!(native.len(), 1, "one native heatmap: {native:?}");
    let expr = native[0]
        .replace("$__rate_interval", "10s")
        .replace("$instance", ".*")
        .replace("$cpu", ".*");
    let result = prometheus.query(&expr);
    assert!(
        result.first().is_some_and(|s| s.get("histogram").is_some()),
        "the native heatmap's query returns a native histogram: {expr}: {result:?}"
    );
}
