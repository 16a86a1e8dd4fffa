//! End to end with a real Prometheus (Debian's `prometheus`, on loopback,
//! temporary storage) scraping a real latencyd every second: every query
//! of both Grafana dashboards (template variables substituted), every
//! template-variable query and every rule of deploy/prometheus/ must parse
//! and, where series are expected on a live system, return series.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Prometheus, killed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn api(&self, path: &str) -> Value {
        let (status, body) =
            http_get(self.addr, path).unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let json: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {path}: {status} {e}: {body}"));
        json
    }

    /// Runs an instant query; panics with Prometheus' error if it fails.
    fn query(&self, expr: &str) -> Vec<Value> {
        let json = self.api(&format!("/api/v1/query?query={}", url_encode(expr)));
        assert_eq!(json["status"], "success", "{expr}: {json}");
        match &json["data"]["result"] {
            Value::Array(series) => series.clone(),
            // A scalar result (e.g. `vector(0)` folded) counts as one series.
            other if !other.is_null() => vec![other.clone()],
            _ => vec![],
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What Grafana would put in place of the variables and macros.
fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "10s")
        .replace("$__range", "1m")
        .replace("$__interval", "1s")
        .replace("$instance", ".*")
        .replace("$cpu", ".*")
        .replace("$job", "latencyd")
}

/// Every (panel title, expr) of a dashboard, and its variables' queries.
fn dashboard_queries(path: &str) -> (Vec<(String, String)>, Vec<String>) {
    let text = std::fs::read_to_string(data_root().join(path)).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
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
                    expr.contains("$__rate_interval"),
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
fn every_dashboard_query_and_rule_works_against_a_real_prometheus() {
    require_tool("prometheus", "--version", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with_export(dir.path(), "");

    // The shipped rules, evaluated every second instead of every minute.
    let rules =
        std::fs::read_to_string(data_root().join("deploy/prometheus/latencyd.rules.yml")).unwrap();
    assert!(rules.contains("interval: 1m"));
    std::fs::write(
        dir.path().join("rules.yml"),
        rules.replace("interval: 1m", "interval: 1s"),
    )
    .unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yml]\n\
         scrape_configs:\n  - job_name: latencyd\n    static_configs:\n      - targets: [\"{}\"]\n",
        daemon.addr
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let prometheus = Prometheus {
        child: Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        addr,
    };
    wait_until(
        "Prometheus to be ready",
        Duration::from_millis(250),
        Duration::from_secs(30),
        || http_get(addr, "/-/ready").is_ok_and(|(status, _)| status == 200),
    );
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
            scraped && healthy
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
            // Only a comparison with last week may be empty on a live system.
            if !expr.contains(" offset ") {
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
    }

    let rules = prometheus.api("/api/v1/rules");
    for group in rules["data"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let name = rule["name"].as_str().unwrap();
            assert_eq!(rule["health"], "ok", "{name}: {rule}");
            let series = prometheus.query(rule["query"].as_str().unwrap());
            // Recording rules describe a live system; alerts are quiet on a
            // healthy one, and then only have to evaluate.
            if rule["type"] == "recording" {
                assert!(!series.is_empty(), "recording rule {name} returns nothing");
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "{checked} queries checked");
    drop(prometheus);
    drop(daemon);
}
