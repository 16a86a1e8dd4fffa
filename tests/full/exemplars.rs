//! From the page to the cause, end to end: a real latencyd with forensics,
//! a spike made by a SCHED_FIFO thread spinning on a sampler's CPU, and
//! two real Prometheus servers with exemplar storage scraping it — one
//! reading OpenMetrics text (its default), one protobuf with native
//! histograms. The capture's id must come back from
//! `/api/v1/query_exemplars`, the alert's `capture_url` and the
//! dashboard's data links must lead to a 200 page whose picture names the
//! spinning thread, and headless Chromium must render that page (its
//! screenshot is docs/capture-page.png, refreshed with UPDATE_EXPECT=1).
//!
//! Without root (no SCHED_FIFO, no tracefs) no capture can be made: the
//! window maximum's exemplar is still checked through both servers.

#[path = "../common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::prometheus::Prometheus;
use common::*;
use serde_json::Value;

const PRIORITY: i32 = 80;
const CULPRIT_PRIORITY: i32 = 90;
const CULPRIT: &str = "lat-culprit";

/// The exemplars Prometheus holds for `query` over the last 10 minutes.
fn exemplars(prometheus: &Prometheus, query: &str) -> Vec<Value> {
    let now = latencyd::units::unix_now_ns() / 1_000_000_000;
    let json = prometheus.api(&format!(
        "/api/v1/query_exemplars?query={}&start={}&end={}",
        url_encode(query),
        now - 600,
        now + 60
    ));
    assert_eq!(json["status"], "success", "{query}: {json}");
    json["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|series| series["exemplars"].as_array().unwrap().clone())
        .collect()
}

/// Polls until an exemplar of `query` satisfies `wanted`.
fn wait_for_exemplar(
    prometheus: &Prometheus,
    query: &str,
    what: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = exemplars(prometheus, query);
        if let Some(e) = found.iter().find(|e| wanted(e)) {
            return e.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no exemplar {what} of {query} within 30 s; Prometheus holds: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A GET of `url` (`http://ADDR/PATH`, as a link names it) must be a 200
/// page whose picture names the culprit.
fn follow(url: &str, daemon: SocketAddr) -> String {
    let path = url
        .strip_prefix(&format!("http://{daemon}"))
        .unwrap_or_else(|| panic!("{url} does not lead to the daemon at {daemon}"));
    let (status, page) = http_get(daemon, path).unwrap();
    assert_eq!(status, 200, "{url}: {page}");
    page
}

/// The picture (the inline SVG) of a capture page.
fn picture(page: &str) -> &str {
    let start = page.find("<svg").expect("an inline picture");
    &page[start..start + page[start..].find("</svg>").expect("a whole picture")]
}

fn substitute(expr: &str) -> String {
    expr.replace("$__range", "10m")
        .replace("$__rate_interval", "10s")
        .replace("$instance", ".*")
        .replace("$cpu", ".*")
}

#[test]
// Full tier: a real Prometheus and headless Chromium.
fn exemplars_alerts_and_dashboard_links_lead_to_the_capture_page() {
    require_tool("prometheus", "--version", "prometheus");
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let capturing = privileged() && ensure_tracefs().is_ok();
    if !capturing {
        report_skip(
            "tests/full/exemplars.rs",
            "needs root for SCHED_FIFO and tracefs: only the window maximum's exemplar is checked",
        );
    }
    let config = daemon_config(
        dir.path(),
        &format!("interval = \"1ms\"\npriority = {PRIORITY}\nspike_threshold = \"1ms\""),
        "",
        &format!(
            // A noisy VM's own stalls get at most one capture a second
            // per CPU, so they cannot use up the minute's 600 before the
            // culprit comes; the culprit's 30 ms escalates past the
            // per-CPU limit over any millisecond stall before it.
            "[forensics]\nenabled = true\nthreshold = \"1ms\"\nper_cpu_interval = \"1s\"\n\
             max_per_minute = 600\ndir = \"{}\"\n",
            dir.path().join("spikes").display()
        ),
    );
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    let text_dir = dir.path().join("prometheus-text");
    let native_dir = dir.path().join("prometheus-native");
    std::fs::create_dir_all(&text_dir).unwrap();
    std::fs::create_dir_all(&native_dir).unwrap();
    let text = Prometheus::start_with_flags(
        &text_dir,
        "latencyd",
        daemon.addr,
        "1s",
        &["--enable-feature=exemplar-storage"],
    );
    let native = Prometheus::start_with_flags(
        &native_dir,
        "latencyd",
        daemon.addr,
        "1s",
        &["--enable-feature=exemplar-storage,native-histograms"],
    );

    // Exemplars flow through both expositions from the start: each
    // series' window maximum, or (where forensics captures a VM's
    // millisecond stalls) the capture that stands for it.
    let first = |e: &Value| {
        e["labels"]["cpu"].is_string() && (capturing || e["labels"]["capture"].is_null())
    };
    wait_for_exemplar(
        &text,
        "latencyd_wakeup_latency_seconds_bucket",
        "of a window maximum (OpenMetrics)",
        first,
    );
    wait_for_exemplar(
        &native,
        "latencyd_wakeup_latency_seconds",
        "of a window maximum (protobuf, native histogram)",
        first,
    );
    if !capturing {
        return;
    }

    // The spike: a FIFO 90 thread spinning 30 ms on the last sampled CPU,
    // ten times what a noisy VM's own stalls reach, so that it is the main
    // cause even when a stall of the host falls in the same wake-up.
    let cpu = *latencyd::host::HostInfo::detect()
        .usable_cpus
        .last()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut capture = None;
    for _ in 0..5 {
        let tid = busy_named_thread(cpu, CULPRIT_PRIORITY, Duration::from_millis(30), CULPRIT);
        let deadline = Instant::now() + Duration::from_secs(10);
        while capture.is_none() && Instant::now() < deadline {
            let spikes: Value = serde_json::from_str(&daemon.get("/api/v1/spikes").1).unwrap();
            capture = spikes["spikes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| {
                    s["cpu"] == cpu
                        && s["causes"][0]["pid"] == tid
                        && s["causes"][0]["kind"] == "task"
                })
                .cloned();
            std::thread::sleep(Duration::from_millis(100));
        }
        if capture.is_some() {
            break;
        }
    }
    let cpu_label = cpu.to_string();
    let capture = capture.unwrap_or_else(|| {
        let spikes: Value = serde_json::from_str(&daemon.get("/api/v1/spikes").1).unwrap();
        let made: Vec<String> = spikes["spikes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| format!("cpu {} {}: {}", s["cpu"], s["latency_ns"], s["verdict"]))
            .collect();
        let uncaptured: Vec<String> = daemon
            .get("/metrics")
            .1
            .lines()
            .filter(|l| l.starts_with("latencyd_forensics_"))
            .map(str::to_string)
            .collect();
        panic!(
            "no capture of CPU {cpu} names {CULPRIT} as main cause; the captures:\n{}\n{}\n{}",
            made.join("\n"),
            uncaptured.join("\n"),
            daemon.log_text()
        )
    });
    let id = capture["id"].as_str().unwrap().to_string();
    let latency_s = capture["latency_ns"].as_f64().unwrap() / 1e9;
    eprintln!("capture {id}: {}", capture["verdict"]);

    // 1. The exemplar, with the capture's id and exact latency, through
    //    OpenMetrics text. A bucket carries its newest capture: on a busy
    //    host (the gate runs beside CPU hogs) a later capture of the same
    //    CPU in the same bucket may replace this one before a scrape, and
    //    then stands in with its own exact latency.
    let of_this_cpu_since = |e: &Value| {
        e["labels"]["cpu"].as_str() == Some(cpu_label.as_str())
            && e["labels"]["capture"]
                .as_str()
                .is_some_and(|c| c >= id.as_str())
    };
    let exact = |e: &Value| {
        let shown = e["labels"]["capture"].as_str().unwrap();
        let kept: Value =
            serde_json::from_str(&daemon.get(&format!("/api/v1/spikes/{shown}")).1).unwrap();
        let value: f64 = e["value"].as_str().unwrap().parse().unwrap();
        assert_eq!(
            value,
            kept["latency_ns"].as_f64().unwrap() / 1e9,
            "{e}: {kept}"
        );
    };
    let e = wait_for_exemplar(
        &text,
        "latencyd_wakeup_latency_seconds_bucket",
        &format!("of a capture at or after {id} (OpenMetrics)"),
        of_this_cpu_since,
    );
    exact(&e);
    if e["labels"]["capture"] == id.as_str() {
        let value: f64 = e["value"].as_str().unwrap().parse().unwrap();
        assert_eq!(value, latency_s, "{e}");
    }
    // And through protobuf, on the native histogram. Prometheus 2.42 takes
    // one exemplar a scrape from a native histogram (the newest, latencyd
    // makes sure), so another capture of the same CPU within the second
    // may stand in for this one: each must name a capture of that CPU
    // with its exact latency.
    let e = wait_for_exemplar(
        &native,
        "latencyd_wakeup_latency_seconds",
        &format!("of a capture at or after {id} (protobuf, native histogram)"),
        of_this_cpu_since,
    );
    exact(&e);

    // 2. The exemplar's link (Grafana's data source setting) and the page
    //    it opens: the picture names the spinning thread.
    let datasource =
        std::fs::read_to_string("grafana/provisioning/datasources/prometheus.yml").unwrap();
    let url_line = datasource
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("url: \"http://$${__data.fields.instance}")
        })
        .expect("an exemplar link in the data source");
    let template = url_line
        .trim()
        .trim_start_matches("url: ")
        .trim_matches('"')
        .replace("$$", "$");
    let link = template
        .replace("${__data.fields.instance}", &daemon.addr.to_string())
        .replace("${__value.raw}", &id);
    let page = follow(&link, daemon.addr);
    let svg = picture(&page);
    assert!(svg.contains(CULPRIT), "the picture names {CULPRIT}: {svg}");
    assert!(
        page.contains(&format!(": task {CULPRIT} (pid ")) && page.contains("id=\"verdict\""),
        "the verdict names {CULPRIT}: {page}"
    );

    // 3. The alert's capture_url, as Prometheus rendered it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let capture_url = loop {
        let alerts = text.api("/api/v1/alerts");
        let url = alerts["data"]["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|a| {
                (a["labels"]["alertname"] == "LatencydMaxLatencyHigh"
                    && a["labels"]["cpu"].as_str() == Some(cpu_label.as_str()))
                .then(|| {
                    a["annotations"]["capture_url"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
            });
        match url {
            Some(url) if url.contains("/spikes/") => break url,
            _ if Instant::now() > deadline => {
                panic!("no LatencydMaxLatencyHigh with a capture: {alerts}")
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    let page = follow(&capture_url, daemon.addr);
    assert!(page.contains("<svg"), "{capture_url}: {page}");

    // 4. The dashboard's captures table: its query finds the capture, and
    //    the cell's link opens it.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string("grafana/dashboards/latencyd-host.json").unwrap(),
    )
    .unwrap();
    let table = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["title"].as_str().unwrap().starts_with("Captures"))
        .expect("a captures table");
    let expr = substitute(table["targets"][0]["expr"].as_str().unwrap());
    let link = table["fieldConfig"]["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["matcher"]["options"] == "capture")
        .expect("a link on the capture column")["properties"][0]["value"][0]["url"]
        .as_str()
        .unwrap()
        .to_string();
    // A row is a capture that was its CPU's newest at some scrape: this
    // one, or one made within the same second after it.
    let rows = text.query(&expr);
    let row = rows
        .iter()
        .find(|r| {
            r["metric"]["cpu"].as_str() == Some(cpu_label.as_str())
                && r["metric"]["capture"]
                    .as_str()
                    .is_some_and(|c| c >= id.as_str())
        })
        .unwrap_or_else(|| panic!("{expr} lists no capture of CPU {cpu} from {id} on: {rows:?}"));
    let shown = row["metric"]["capture"].as_str().unwrap();
    let url = link
        .replace(
            "${__data.fields.instance}",
            row["metric"]["instance"].as_str().unwrap(),
        )
        .replace("${__value.raw}", shown);
    let page = follow(&url, daemon.addr);
    assert!(
        page.contains(&format!("capture {shown}")) && page.contains("<svg"),
        "{page}"
    );

    // 5. A real browser renders the page, picture and all.
    let page_url = format!("http://{}/spikes/{id}", daemon.addr);
    if std::process::Command::new("chromium")
        .arg("--version")
        .output()
        .is_err()
    {
        report_skip(
            "tests/full/exemplars.rs",
            "no chromium: the page was not rendered",
        );
        return;
    }
    let profile = dir.path().join("chromium");
    let dumped = chromium(&profile, &["--dump-dom"], &page_url);
    let dom = stdout_of(&dumped);
    assert!(picture(&dom).contains(CULPRIT), "{dom}");
    let shot = dir.path().join("capture.png");
    let output = chromium(
        &profile,
        &[&format!("--screenshot={}", shot.display())],
        &page_url,
    );
    assert!(output.status.success(), "{}", stderr_of(&output));
    let png = std::fs::read(&shot).expect("a screenshot file");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert!(png.len() > 20_000, "screenshot of {} bytes", png.len());
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write("docs/capture-page.png", &png).unwrap();
    }
}
