//! A real Prometheus (Debian's `prometheus`) for end-to-end tests: on
//! loopback, temporary storage, scraping every second and evaluating the
//! shipped rules with every group's interval shortened to a second (the
//! only change the tests make to them).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{http_get, require_tool, url_encode, wait_until};

/// Prometheus, killed when dropped.
pub struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// deploy/prometheus/latencyd.rules.yml with every group evaluated every
/// second instead of every minute or hour.
pub fn shipped_rules_every_second() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/latencyd.rules.yml");
    let rules = std::fs::read_to_string(path).unwrap();
    assert!(rules.contains("interval: 1m") && rules.contains("interval: 1h"));
    rules
        .replace("interval: 1m", "interval: 1s")
        .replace("interval: 1h", "interval: 1s")
}

impl Prometheus {
    /// Starts Prometheus in `dir` scraping `target` (as job `job`) every
    /// second with the shipped rules, and waits until it is ready.
    pub fn start(dir: &Path, job: &str, target: SocketAddr) -> Prometheus {
        Prometheus::start_with_flags(dir, job, target, "1s", &[])
    }

    /// `start` scraping every `scrape_interval` (a Prometheus duration,
    /// also the scrape timeout), with further command-line flags (e.g.
    /// feature flags).
    pub fn start_with_flags(
        dir: &Path,
        job: &str,
        target: SocketAddr,
        scrape_interval: &str,
        flags: &[&str],
    ) -> Prometheus {
        let config = format!(
            "global:\n  scrape_interval: {scrape_interval}\n  scrape_timeout: {scrape_interval}\n  \
             evaluation_interval: 1s\nrule_files: [rules.yml]\n\
             scrape_configs:\n  - job_name: {job:?}\n    static_configs:\n      - targets: [\"{target}\"]\n",
        );
        let prometheus = Prometheus::start_config(dir, &config, flags);
        // Service discovery hands targets to the scrape loops up to 5 s
        // after start; from then on the target is scraped every second,
        // up or not.
        wait_until(
            "Prometheus to know its target",
            Duration::from_millis(100),
            Duration::from_secs(30),
            || {
                prometheus.api("/api/v1/targets")["data"]["activeTargets"]
                    .as_array()
                    .is_some_and(|t| !t.is_empty())
            },
        );
        prometheus
    }

    /// Starts Prometheus in `dir` with the configuration `config` (which
    /// may name `rules.yml`: the shipped rules, evaluated every second)
    /// and further flags (`--enable-feature=agent` among them for an
    /// agent), and waits until it is ready.
    pub fn start_config(dir: &Path, config: &str, flags: &[&str]) -> Prometheus {
        require_tool("prometheus", "--version", "prometheus");
        let agent = flags
            .iter()
            .any(|f| f.starts_with("--enable-feature=") && f.contains("agent"));
        std::fs::write(dir.join("rules.yml"), shipped_rules_every_second()).unwrap();
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let prometheus = Prometheus {
            child: Command::new("prometheus")
                .arg(format!(
                    "--config.file={}",
                    dir.join("prometheus.yml").display()
                ))
                .arg(format!(
                    // An agent keeps only a write-ahead log, elsewhere.
                    "--storage.{}.path={}",
                    if agent { "agent" } else { "tsdb" },
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address={addr}"))
                .arg("--log.level=warn")
                .args(flags)
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
        prometheus
    }

    /// Another server with Prometheus' HTTP query API (VictoriaMetrics),
    /// already started as `child` and answering at `addr`; killed when
    /// dropped.
    pub fn adopt(child: Child, addr: SocketAddr) -> Prometheus {
        Prometheus { child, addr }
    }

    pub fn api(&self, path: &str) -> Value {
        let (status, body) =
            http_get(self.addr, path).unwrap_or_else(|e| panic!("GET {path}: {e}"));
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {status} {e}: {body}"))
    }

    /// Runs an instant query; panics with Prometheus' error if it fails.
    pub fn query(&self, expr: &str) -> Vec<Value> {
        let json = self.api(&format!("/api/v1/query?query={}", url_encode(expr)));
        assert_eq!(json["status"], "success", "{expr}: {json}");
        match &json["data"]["result"] {
            Value::Array(series) => series.clone(),
            // A scalar result (e.g. `vector(0)` folded) counts as one series.
            other if !other.is_null() => vec![other.clone()],
            _ => vec![],
        }
    }

    /// The value of the first series an instant query returns.
    pub fn value(&self, expr: &str) -> Option<f64> {
        self.query(expr)
            .first()
            .and_then(|s| s["value"][1].as_str().and_then(|v| v.parse().ok()))
    }
}
