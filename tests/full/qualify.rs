//! qualify's outputs read by their real consumers: a JUnit library and
//! junit2html, and headless Chromium opening the HTML report.
//! (tests/qualify.rs holds the quick tier's.)

#[path = "../common/mod.rs"]
mod common;

use common::qualify::*;
use common::{chromium, latencyd, one_at_a_time, require_tool, stderr_of, stdout_of};
use serde_json::Value;
use std::process::Command;

#[test]
// Full tier: Debian's python3-junitparser reads the JUnit file, junit2html renders it.
fn a_junit_library_reads_the_verdict() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut args = smoke(dir.path());
    // A maximum of 0 µs: every measured CPU fails, with its figures.
    args[8] = "0".into();
    let output = latencyd().args(&args).output().unwrap();
    assert_eq!(code(&output), 1, "{}", stderr_of(&output));
    let doc = document(dir.path());
    let failed = doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["cpus"].as_array().unwrap().iter())
        .filter(|c| c["verdict"] == "failed")
        .count();
    let measured = doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["cpus"].as_array().unwrap().iter())
        .count();
    assert_eq!(failed, measured, "{doc:#}");
    assert!(
        !phase(&doc, "idle")["cpus"].as_array().unwrap().is_empty(),
        "{doc:#}"
    );
    let read = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(
            "import sys, junitparser\n\
             xml = junitparser.JUnitXml.fromfile(sys.argv[1])\n\
             cases = [c for s in xml for c in s]\n\
             failed = [c for c in cases if any(isinstance(r, junitparser.Failure) for r in c.result)]\n\
             print(len(cases), len(failed), xml.failures, failed[0].classname, failed[0].name)\n\
             print(failed[0].result[0].message)",
        )
        .arg(dir.path().join("q.xml"))
        .output()
        .expect("python3 runs");
    assert!(
        read.status.success(),
        "install Debian's python3-junitparser (.ci/run does): {}",
        stderr_of(&read)
    );
    let text = stdout_of(&read);
    let mut words = text.split_whitespace();
    let cases = doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cpus"].as_array().unwrap().len().max(1))
        .sum::<usize>()
        + doc["checks"].as_array().unwrap().len();
    assert_eq!(words.next(), Some(cases.to_string().as_str()), "{text}");
    assert_eq!(words.next(), Some(failed.to_string().as_str()), "{text}");
    assert_eq!(words.next(), Some(failed.to_string().as_str()), "{text}");
    assert!(
        text.contains("latencyd.qualify.idle cpu")
            && text.contains("over the maximum of 0 µs (--maximum-latency)"),
        "{text}"
    );
    // A JUnit-to-HTML tool renders it: every case on the page.
    let page = dir.path().join("junit.html");
    let rendered = Command::new("junit2html")
        .arg(dir.path().join("q.xml"))
        .arg(&page)
        .output()
        .expect("junit2html is missing: scripts/test installs it (pip install junit2html)");
    assert!(rendered.status.success(), "{}", stderr_of(&rendered));
    let page = std::fs::read_to_string(&page).unwrap();
    assert!(
        page.contains("latencyd.qualify.idle") && page.contains("over the maximum of 0"),
        "{page}"
    );
}

#[test]
// Full tier: headless Chromium opens the HTML report.
fn the_html_report_opens_from_a_file_with_no_network_and_draws_every_phase() {
    require_tool("chromium", "--version", "chromium");
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let output = latencyd().args(smoke(dir.path())).output().unwrap();
    let doc = check_passed(&output, dir.path());
    let html = std::fs::read_to_string(dir.path().join("q.html")).unwrap();
    // Nothing to fetch: no script, stylesheet, image or link elsewhere.
    for word in ["src=", "href=", "<script", "<link", "url("] {
        assert!(
            !html.contains(word),
            "the report refers outside itself ({word})"
        );
    }
    let url = format!("file://{}", dir.path().join("q.html").display());
    let profile = dir.path().join("chromium");
    let dumped = chromium(&profile, &["--dump-dom"], &url);
    let dom = stdout_of(&dumped);
    assert!(
        dom.contains("<table id=\"verdict\">"),
        "{}\n{dom}",
        stderr_of(&dumped)
    );
    // A plot per measured phase.
    let measured: Vec<&Value> = doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["status"] == "measured")
        .collect();
    assert_eq!(dom.matches("<svg").count(), measured.len(), "{dom}");
    let shot = dir.path().join("report.png");
    let output = chromium(
        &profile,
        &[&format!("--screenshot={}", shot.display())],
        &url,
    );
    assert!(output.status.success(), "{}", stderr_of(&output));
    let png = std::fs::read(&shot).expect("a screenshot file");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.len() > 20_000, "screenshot of {} bytes", png.len());
}
