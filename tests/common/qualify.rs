//! What tests/qualify.rs and tests/full/qualify.rs share.

use super::{stderr_of, stdout_of};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

pub fn check_passed(output: &Output, dir: &Path) -> Value {
    assert_eq!(
        code(output),
        0,
        "{}\n{}",
        stdout_of(output),
        stderr_of(output)
    );
    assert!(
        stdout_of(output).ends_with("verdict: passed (exit 0)\n"),
        "{}",
        stdout_of(output)
    );
    let doc = document(dir);
    assert_eq!(
        (doc["verdict"].as_str(), doc["exit_code"].as_u64()),
        (Some("passed"), Some(0))
    );
    assert_eq!(doc["profile"], "smoke");
    assert!(
        doc["host"]["facts"]["kernel.release"]["value"].is_string(),
        "{doc:#}"
    );
    assert!(
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "isolation")
    );
    for name in ["idle", "busypoll"] {
        let p = phase(&doc, name);
        assert_eq!(p["status"], "measured", "{p:#}");
        assert_eq!(p["maximum_us"], 1_000_000);
        for cpu in p["cpus"].as_array().unwrap() {
            let s = &cpu["stats"];
            assert!(s["samples"].as_u64().unwrap() > 0, "{cpu:#}");
            for figure in [
                "min",
                "max",
                "mean",
                "median",
                "mode",
                "range",
                "mean_absolute_deviation",
                "standard_deviation",
                "p99",
                "p99_9",
                "p99_99",
            ] {
                assert!(s[figure].is_number(), "{name} {figure}: {cpu:#}");
            }
            assert!(
                s["min"].as_f64() <= s["median"].as_f64()
                    && s["median"].as_f64() <= s["max"].as_f64(),
                "{cpu:#}"
            );
            assert_eq!(cpu["verdict"], "passed");
        }
    }
    let junit = std::fs::read_to_string(dir.join("q.xml")).unwrap();
    assert!(junit.contains("failures=\"0\" errors=\"0\""), "{junit}");
    let html = std::fs::read_to_string(dir.join("q.html")).unwrap();
    assert!(
        html.contains("<p class=\"banner passed\">passed (exit 0)</p>"),
        "{html}"
    );
    for cpu in phase(&doc, "idle")["cpus"].as_array().unwrap() {
        assert!(
            html.contains(&format!("<tr id=\"idle-cpu{}\">", cpu["cpu"])),
            "{html}"
        );
    }
    assert!(
        junit.contains("classname=\"latencyd.qualify.idle\" name=\"cpu"),
        "{junit}"
    );
    doc
}

pub fn code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

pub fn document(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("q.json")).unwrap()).unwrap()
}

pub fn phase<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name} in {doc:#}"))
}

/// A short smoke run's arguments: 1 s phases, no load, a maximum no
/// wake-up reaches (1 s), the outputs in `dir`.
pub fn smoke(dir: &Path) -> Vec<String> {
    let path = |name: &str| dir.join(name).display().to_string();
    [
        "qualify",
        "--profile",
        "smoke",
        "--runtime",
        "1",
        "--load",
        "none",
        "--maximum-latency",
        "1000000",
        "--json",
        &path("q.json"),
        "--junit",
        &path("q.xml"),
        "--html",
        &path("q.html"),
    ]
    .map(str::to_string)
    .to_vec()
}
