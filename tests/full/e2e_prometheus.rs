//! End to end with a real Prometheus (Debian's `prometheus`, on loopback,
//! temporary storage) scraping a real latencyd every second: every query
//! of both Grafana dashboards (template variables substituted), every
//! template-variable query, every annotation query and every rule of
//! deploy/prometheus/ must parse and, where series are expected on a live
//! system, return series. Without Prometheus, the dashboards are checked
//! for what keeps a spike visible at every zoom.

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use common::prometheus::Prometheus;
use common::*;
use serde_json::Value;

/// What Grafana would put in place of the variables and macros. Grafana's
/// `$__interval` is never below the data source's scrape interval (1 s
/// here); 5 s is what a few minutes' range gives.
fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "10s")
        .replace("$__range", "1m")
        .replace("$__interval", "5s")
        .replace("$instance", ".*")
        .replace("$cpu", ".*")
        .replace("$fingerprint", ".*")
        .replace("$job", "latencyd")
}

fn dashboard(path: &str) -> Value {
    let text = std::fs::read_to_string(data_root().join(path)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The Prometheus queries of a dashboard's annotations.
fn annotation_queries(path: &str) -> Vec<(String, String)> {
    dashboard(path)["annotations"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| {
            Some((
                a["name"].as_str()?.to_string(),
                a["expr"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Whether `expr` reads the latency histogram as a native one (the bare
/// family name, without the classic `_bucket`, `_sum`, `_count`).
pub fn queries_native_histogram(expr: &str) -> bool {
    expr.contains("latencyd_wakeup_latency_seconds{")
}

/// Every (panel title, expr) of a dashboard, and its variables' queries.
fn dashboard_queries(path: &str) -> (Vec<(String, String)>, Vec<String>) {
    let dashboard = dashboard(path);
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap().to_string();
        assert!(
            panel["fieldConfig"]["defaults"]["unit"].is_string(),
            "{path}: panel '{title}' sets no unit"
        );
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{path}: '{title}'"
        );
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap().to_string();
            if expr.contains("rate(") || expr.contains("increase(") {
                assert!(
                    expr.contains("$__rate_interval") || expr.contains("[$__range]"),
                    "{path}: '{title}' rate without $__rate_interval: {expr}"
                );
            }
            exprs.push((title.clone(), expr));
        }
    }
    let variables = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["type"] == "query")
        .map(|v| v["query"]["query"].as_str().unwrap().to_string())
        .collect();
    (exprs, variables)
}

fn data_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
// Full tier: a real Prometheus and stress-ng.
fn every_dashboard_query_and_rule_works_against_a_real_prometheus() {
    require_tool("prometheus", "--version", "prometheus");
    // A short load window every 20 s, for the "load windows" annotation.
    require_tool("stress-ng", "--version", "stress-ng");
    let dir = tempfile::tempdir().unwrap();
    // A record left by an earlier run under another kernel: the daemon
    // sees the host changed while it was stopped, which the change
    // annotations and LatencydHostConfigChanged show, without needing the
    // privileges a change at runtime takes (tests/host.rs makes those).
    let record = dir.path().join("record");
    seed_record_under_another_kernel(&record);
    // And the host's qualification (`latencyd qualify --record`), which
    // the daemon reads as it starts: the qualified maximum's line has data.
    latencyd::record::qualification::write(
        &record,
        r#"{"profile": "smoke", "verdict": "passed", "ended": "2026-11-28T10:00:00.000Z",
            "host": {"fingerprint": "abc"}, "phases": [{"name": "idle", "tool": "cyclictest",
            "maximum_us": 1000, "status": "measured",
            "cpus": [{"cpu": 0, "stats": {"max": 41.5}}]}]}"#,
    )
    .unwrap();
    // With two CPUs or more the last is kept for busy-poll windows (a
    // short one every 20 s), the others sampled: the busy-poll panel has
    // data too.
    let usable = latencyd::host::HostInfo::detect().usable_cpus;
    let (measure, busypoll) = match usable.as_slice() {
        [sampled @ .., last] if !sampled.is_empty() => (
            format!("cpus = \"{}\"", latencyd::cpulist::format_cpu_list(sampled)),
            format!(
                "[busypoll]\nenabled = true\ncpus = \"{last}\"\nevery = \"20s\"\nat = \"10s\"\n\
                 duration = \"2s\"\n"
            ),
        ),
        _ => (String::new(), String::new()),
    };
    let polling = !busypoll.is_empty();
    if !polling {
        report_skip(
            "tests/full/e2e_prometheus.rs",
            "the busy-poll panel only runs: one usable CPU, none left to poll",
        );
    }
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(daemon_config(
        dir.path(),
        &measure,
        "",
        &format!(
            "[record]\nenabled = true\ndir = \"{}\"\n[observe]\nenabled = true\ncpus = \"all\"\n\
             [load]\nprofile = \"irq\"\nevery = \"20s\"\nat = \"0s\"\nduration = \"6s\"\n{busypoll}",
            record.display()
        ),
    )));
    // As root the observer traces every CPU, the samplers' too: the
    // samplers are its real-time tasks, so the observe panels have data.
    // Without root it is unavailable and says why; those panels only run.
    let (_, observe) = daemon.get("/api/v1/observe");
    let observing = serde_json::from_str::<Value>(&observe).unwrap()["available"] == true;
    if !observing {
        report_skip(
            "tests/full/e2e_prometheus.rs",
            &format!("the observe panels only run, the observer is unavailable: {observe}"),
        );
    }
    let (_, host) = daemon.get("/api/v1/host");
    let host: Value = serde_json::from_str(&host).unwrap();
    let change = &host["changes"][0];
    assert_eq!(change["seen"], "since_record", "{host}");
    assert_eq!(
        change["facts"]["kernel.release"]["from"], "0.0.0-before",
        "{host}"
    );

    let prometheus = Prometheus::start(dir.path(), "latencyd", daemon.addr);
    // Enough scrapes for 10 s rate windows, and every rule evaluated.
    wait_until(
        "data and evaluated rules",
        Duration::from_millis(250),
        Duration::from_secs(60),
        || {
            let scraped = prometheus
                .query("count_over_time(latencyd_build_info[1m])")
                .first()
                .and_then(|s| {
                    s["value"][1]
                        .as_str()
                        .map(|v| v.parse::<f64>().unwrap_or(0.0))
                })
                .is_some_and(|n| n >= 12.0);
            let rules = prometheus.api("/api/v1/rules");
            let healthy = rules["data"]["groups"].as_array().is_some_and(|groups| {
                groups
                    .iter()
                    .flat_map(|g| g["rules"].as_array().unwrap())
                    .all(|r| r["health"] == "ok")
            });
            // A busy-poll window ran and was scraped.
            let polled = !polling
                || !prometheus
                    .query("latencyd_busypoll_gap_max_seconds")
                    .is_empty();
            scraped && healthy && polled
        },
    );
    assert_eq!(prometheus.query("up{job=\"latencyd\"}")[0]["value"][1], "1");

    let mut checked = 0;
    for path in [
        "grafana/dashboards/latencyd-host.json",
        "grafana/dashboards/latencyd-fleet.json",
    ] {
        let (exprs, variables) = dashboard_queries(path);
        for (title, expr) in exprs {
            let expr = substitute(&expr);
            let series = prometheus.query(&expr);
            // Only a comparison with last week may be empty on a live
            // system, and a native-histogram panel on this Prometheus,
            // which scrapes text (tests/full/native_histograms.rs runs that
            // panel's query against one that scrapes protobuf).
            let observed = expr.contains("latencyd_task_") || expr.contains("interference");
            // This machine's kernel has no timerlat: tests/timerlat.rs runs
            // the timerlat panel on a PREEMPT_RT guest's metrics.
            let timerlat = expr.contains("latencyd_timerlat_");
            // Nor hwlat: tests/timerlat.rs runs the hwnoise panel on a
            // guest's metrics too.
            let hwnoise = expr.contains("latencyd_hwnoise_");
            // Captures need forensics (root, tracefs): tests/full/exemplars.rs
            // makes one and follows the table's links.
            let captured = expr.contains("latencyd_forensics_latest_capture_info");
            let polled = !expr.contains("latencyd_busypoll_") || polling;
            if !expr.contains(" offset ")
                && !queries_native_histogram(&expr)
                && (observing || !observed)
                && !captured
                && !timerlat
                && !hwnoise
                && polled
            {
                assert!(
                    !series.is_empty(),
                    "{path}: panel '{title}' returns nothing: {expr}"
                );
            }
            checked += 1;
        }
        for variable in variables {
            // label_values(SELECTOR, LABEL) is Grafana's; ask for the series.
            let inner = variable
                .strip_prefix("label_values(")
                .and_then(|v| v.strip_suffix(')'))
                .unwrap_or_else(|| panic!("{path}: unexpected variable query {variable}"));
            let (selector, label) = inner.rsplit_once(',').unwrap();
            let selector = substitute(selector.trim());
            let json = prometheus.api(&format!("/api/v1/series?match[]={}", url_encode(&selector)));
            let has_label = json["data"]
                .as_array()
                .is_some_and(|series| series.iter().any(|s| s.get(label.trim()).is_some()));
            assert!(
                has_label,
                "{path}: variable {variable} finds no values: {json}"
            );
            checked += 1;
        }
        // Restarts and firing alerts: none on a healthy system, so those
        // queries only have to run; the host's configuration changed.
        for (name, expr) in annotation_queries(path) {
            let series = prometheus.query(&substitute(&expr));
            if name == "load windows" {
                // Instant queries see a window only while it runs: ask
                // for the annotation's series over the last minutes.
                let expr = substitute(&expr);
                wait_until(
                    "a load window seen by Prometheus",
                    Duration::from_millis(500),
                    Duration::from_secs(45),
                    || {
                        !prometheus
                            .query(&format!("max_over_time(({expr})[5m:1s])"))
                            .is_empty()
                    },
                );
                let seen = prometheus.query(&format!("max_over_time(({expr})[5m:1s])"));
                assert_eq!(seen[0]["metric"]["profile"], "irq", "{seen:?}");
            } else if name == "host configuration changes" {
                assert!(
                    !series.is_empty(),
                    "{path}: annotation '{name}' returns nothing: {expr}"
                );
            }
            checked += 1;
        }
    }

    let rules = prometheus.api("/api/v1/rules");
    for group in rules["data"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let name = rule["name"].as_str().unwrap();
            assert_eq!(rule["health"], "ok", "{name}: {rule}");
            let series = prometheus.query(rule["query"].as_str().unwrap());
            // Recording rules describe a live system; alerts, and the sets
            // of samplers in trouble the alerts read (`instance_cpu:`), are
            // quiet on a healthy one, and then only have to evaluate.
            if rule["type"] == "recording" && !name.starts_with("instance_cpu:") {
                assert!(!series.is_empty(), "recording rule {name} returns nothing");
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "{checked} queries checked");
    drop(prometheus);
    drop(daemon);
}

/// Writes a record file, started an hour ago, whose only line is the
/// host facts line of a kernel this host does not run.
fn seed_record_under_another_kernel(record: &std::path::Path) {
    let hour_ago_ns = latencyd::units::unix_now_ns() - 3_600 * 1_000_000_000;
    let stamp: String = latencyd::calendar::format_rfc3339_ms(hour_ago_ns)
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    std::fs::create_dir_all(record).unwrap();
    std::fs::write(
        record.join(format!("latencyd-{stamp}.hlog")),
        format!(
            "#[latencyd host 000000000000 at={}.000\tkernel.release=0.0.0-before]\n",
            hour_ago_ns / 1_000_000_000
        ),
    )
    .unwrap();
}

/// Whether `expr`'s outermost aggregation keeps no `instance` label
/// (`count by (fingerprint, kernel) (…)`).
fn aggregates_away_instance(expr: &str) -> bool {
    ["count by (", "max by (", "sum by ("].iter().any(|agg| {
        expr.strip_prefix(agg)
            .and_then(|rest| rest.split_once(')'))
            .is_some_and(|(labels, _)| !labels.split(',').any(|l| l.trim() == "instance"))
    })
}

/// Every panel of a dashboard with its targets' expressions.
fn panels(path: &str) -> Vec<(Value, Vec<String>)> {
    dashboard(path)["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let exprs = p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["expr"].as_str().unwrap().to_string())
                .collect();
            (p.clone(), exprs)
        })
        .collect()
}

#[test]
// Full tier: a real Prometheus and stress-ng.
fn dashboards_never_hide_a_spike_and_follow_the_selection() {
    let host = "grafana/dashboards/latencyd-host.json";
    let fleet = "grafana/dashboards/latencyd-fleet.json";
    for path in [host, fleet] {
        for (panel, exprs) in panels(path) {
            let title = panel["title"].as_str().unwrap();
            let ranged = panel["type"] != "stat" && panel["type"] != "table";
            for expr in &exprs {
                // The window maximum plotted raw loses every spike between
                // two steps once a step is longer than the window.
                // The per-host rollup of it records the maximum over two
                // minutes every minute: plotted the same way.
                if ranged && expr.contains("latencyd_wakeup_latency_window_max_seconds") {
                    assert!(
                        expr.contains("max_over_time(latencyd_wakeup_latency_window_max_seconds")
                            || expr.contains(
                                "max_over_time(instance:latencyd_wakeup_latency_window_max_seconds:max_2m"
                            ),
                        "{path}: '{title}' plots the window maximum without max_over_time: {expr}"
                    );
                }
                assert!(
                    !expr.contains("job=\""),
                    "{path}: '{title}' names a job: {expr}"
                );
                // Heartbeat age is the scrape's own time minus the heartbeat,
                // not the query's time (which adds the scrape's age).
                if expr.contains("latencyd_sampler_last_sample_timestamp_seconds") {
                    assert!(!expr.contains("time() -"), "{path}: '{title}': {expr}");
                }
                // Offline CPUs are never counted as stale or not real-time.
                if expr.contains("latencyd_sampler_realtime")
                    || expr.contains("latencyd_sampler_last_sample_timestamp_seconds")
                {
                    assert!(
                        expr.contains(
                            "unless on (job, instance, cpu) latencyd_sampler_online == 0"
                        ),
                        "{path}: '{title}' counts offline CPUs: {expr}"
                    );
                }
                // On the host dashboard, every per-CPU series honours $cpu.
                if path == host
                    && (expr.contains("latencyd_wakeup_latency")
                        || expr.contains("latencyd_sampler_"))
                    && !expr.contains("latencyd_sampler_online")
                {
                    assert!(
                        expr.contains("cpu=~\"$cpu\""),
                        "{path}: '{title}' ignores $cpu: {expr}"
                    );
                }
            }
            // Latency over time is drawn on a log axis: a 5 ms spike and a
            // 20 us baseline on one panel.
            if panel["type"] == "timeseries" && panel["fieldConfig"]["defaults"]["unit"] == "s" {
                let scale = &panel["fieldConfig"]["defaults"]["custom"]["scaleDistribution"];
                let heartbeat = title.contains("Heartbeat") || title.contains("scrape");
                assert!(
                    heartbeat || scale["type"] == "log",
                    "{path}: '{title}' has a linear latency axis"
                );
            }
            // Fleet panels that show hosts one by one drill down to the
            // host dashboard.
            // A table of groups (one row per configuration) has no host
            // to link to: every query aggregates the instance away.
            let per_host = (panel["type"] == "table"
                && !exprs.iter().all(|e| aggregates_away_instance(e)))
                || (panel["type"] != "histogram"
                    && panel["targets"].as_array().unwrap().iter().any(|t| {
                        t["legendFormat"]
                            .as_str()
                            .is_some_and(|l| l.contains("{{instance}}"))
                    }));
            if path == fleet && per_host {
                let links = panel["fieldConfig"]["defaults"]["links"].to_string();
                assert!(
                    links.contains("/d/latencyd-host/")
                        && links.contains("var-instance=${__field.labels.instance}"),
                    "{path}: '{title}' has no link to the host dashboard"
                );
            }
        }
    }
    // The budget comes from each host's gauge, drawn on the maximum panels.
    for (panel, exprs) in panels(host) {
        let title = panel["title"].as_str().unwrap();
        if title.starts_with("Maximum") {
            assert!(
                exprs
                    .iter()
                    .any(|e| e.contains("latencyd_config_spike_threshold_seconds")),
                "'{title}' draws no budget"
            );
        }
    }
    // Annotations: restarts and firing alerts, on both dashboards.
    for path in [host, fleet] {
        let queries = annotation_queries(path);
        assert!(
            queries
                .iter()
                .any(|(_, e)| e.contains("changes(process_start_time_seconds")),
            "{path}: no restart annotation"
        );
        assert!(
            queries
                .iter()
                .any(|(_, e)| e.contains("ALERTS{alertstate=\"firing\"")),
            "{path}: no alert annotation"
        );
    }
    // latencyd's own cost is on the host dashboard.
    let all: String = panels(host).into_iter().flat_map(|(_, e)| e).collect();
    for cost in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "latencyd_metrics_render_duration_seconds",
    ] {
        assert!(
            all.contains(cost),
            "the host dashboard does not show {cost}"
        );
    }
}
