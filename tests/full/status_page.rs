//! The status page `/` of a running daemon, opened in a real browser:
//! headless Chromium (Debian's `chromium`, installed by `.ci/run`) renders
//! it; the DOM it built must hold a row per sampled CPU and the plot, and
//! a screenshot must come out.

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

#[test]
// Full tier: headless Chromium renders the page.
fn chromium_renders_a_row_per_cpu_and_the_plot() {
    require_tool("chromium", "--version", "chromium");
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with_export(dir.path(), "");
    let status: Value = serde_json::from_str(&daemon.get("/api/v1/status").1).unwrap();
    let cpus: Vec<u64> = status["config"]["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    // Every sampler has handed over samples, so every row has numbers.
    wait_until(
        "samples on every CPU",
        Duration::from_millis(100),
        Duration::from_secs(20),
        || {
            let latency: Value = serde_json::from_str(&daemon.get("/api/v1/latency").1).unwrap();
            latency["cpus"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["count"].as_u64() > Some(0))
        },
    );

    let url = format!("http://{}/", daemon.addr);
    let profile = dir.path().join("chromium");
    let dumped = chromium(&profile, &["--dump-dom"], &url);
    let dom = stdout_of(&dumped);
    assert!(
        dumped.status.success() && dom.contains("<table id=\"cpus\""),
        "chromium rendered no status page ({}): {}\n{dom}",
        dumped.status,
        stderr_of(&dumped)
    );
    let nodename = status["host"]["nodename"].as_str().unwrap();
    assert!(dom.contains(&format!("latencyd on {nodename}")), "{dom}");
    assert_eq!(dom.matches("<tr id=\"cpu-").count(), cpus.len(), "{dom}");
    for cpu in &cpus {
        let start = dom
            .find(&format!("<tr id=\"cpu-{cpu}\""))
            .unwrap_or_else(|| panic!("no row for CPU {cpu}: {dom}"));
        let row = &dom[start..start + dom[start..].find("</tr>").unwrap()];
        assert!(row.contains("sampling"), "CPU {cpu}: {row}");
    }
    // The plot went into the DOM as SVG: a series per CPU.
    let svg = &dom[dom.find("<svg").expect("an inline plot")..];
    assert_eq!(polylines_of_series(svg), cpus.len(), "a series per CPU");

    let shot = dir.path().join("status.png");
    let output = chromium(
        &profile,
        &[&format!("--screenshot={}", shot.display())],
        &url,
    );
    assert!(output.status.success(), "{}", stderr_of(&output));
    let png = std::fs::read(&shot).expect("a screenshot file");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    // A blank 1200×1100 page compresses to a few KiB; a table and a plot
    // do not.
    assert!(png.len() > 20_000, "screenshot of {} bytes", png.len());
}
