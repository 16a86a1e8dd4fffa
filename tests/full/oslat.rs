//! latencyd oslat beside rt-tests' oslat: the same rows and JSON keys.
//! (tests/oslat.rs holds the quick tier's.)

#[path = "../common/mod.rs"]
mod common;

use common::oslat::*;
use common::{latencyd, one_at_a_time, report_skip, require_tool, stderr_of, stdout_of};
use std::process::{Command, Output};

#[test]
// Full tier: the real oslat and jq beside latencyd oslat; about 10 s.
fn beside_the_real_oslat_the_rows_and_json_keys_are_the_same() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let cpu = poll_cpu();
    for extra in [
        &["-b", "8"][..],
        &["-W", "500", "-b", "16", "-w", "memmove", "-m", "4K"][..],
    ] {
        if extra.contains(&"-W") && !oslat_has_bucket_width() {
            // Debian 12's oslat 2.4 has no -W (it came with 2.5).
            report_skip(
                "oslat::beside_the_real_oslat",
                "this oslat has no -W (rt-tests before 2.5): ns buckets compared with nothing",
            );
            continue;
        }
        let ours_json = dir.path().join("ours.json");
        let theirs_json = dir.path().join("theirs.json");
        let mut args = vec!["-c", &cpu, "-D", "1"];
        args.extend_from_slice(extra);
        let ours = latencyd()
            .arg("oslat")
            .args(&args)
            .arg(format!("--json={}", ours_json.display()))
            .output()
            .unwrap();
        assert!(ours.status.success(), "{}", stderr_of(&ours));
        let Some(theirs) = real_oslat(
            &[
                &args[..],
                &[&format!("--json={}", theirs_json.display())[..]],
            ]
            .concat(),
        ) else {
            return;
        };
        let (ours_text, theirs_text) = (stdout_of(&ours), stdout_of(&theirs));
        assert_eq!(
            shape(&ours_text),
            shape(&theirs_text),
            "{args:?}\nours:\n{ours_text}\ntheirs:\n{theirs_text}"
        );
        assert!(
            ours_text.starts_with("oslat V 2.40 (latencyd "),
            "{ours_text}"
        );
        for filter in [
            "keys",
            ".thread | keys",
            ".thread[] | keys",
            ".sysinfo | keys",
        ] {
            let (a, b) = (jq(filter, &ours_json), jq(filter, &theirs_json));
            let b_keys: Vec<String> = serde_json::from_str(&b).unwrap();
            let a_keys: Vec<String> = serde_json::from_str(&a).unwrap();
            let missing: Vec<&String> = b_keys.iter().filter(|k| !a_keys.contains(k)).collect();
            assert!(missing.is_empty(), "{filter}: ours lacks {missing:?}");
        }
        // What a CI job gates on: the largest maximum, an integer.
        let max: u64 = jq("[.thread[].max] | max", &ours_json).parse().unwrap();
        let ours_max = ours_text
            .lines()
            .find_map(|l| l.strip_prefix("     Maximum:\t "))
            .and_then(|v| v.split_whitespace().next())
            .unwrap();
        let scale = if extra.contains(&"-W") { 1_000.0 } else { 1.0 };
        assert_eq!(
            max as f64,
            ours_max.parse::<f64>().unwrap() * scale,
            "{ours_text}"
        );
        let samples: u64 = jq("[.latencyd.threads[].samples] | add", &ours_json)
            .parse()
            .unwrap();
        let histogram: u64 = jq("[.thread[].histogram[]] | add", &ours_json)
            .parse()
            .unwrap();
        assert_eq!(samples, histogram, "every gap is in the histogram");
    }
}

fn jq(filter: &str, file: &std::path::Path) -> String {
    require_tool("jq", "--version", "jq");
    let output = Command::new("jq")
        .args(["-c", filter])
        .arg(file)
        .output()
        .expect("jq starts");
    assert!(
        output.status.success(),
        "jq {filter}: {}",
        stderr_of(&output)
    );
    stdout_of(&output).trim().to_string()
}

fn oslat_has_bucket_width() -> bool {
    require_tool("oslat", "--help", "rt-tests");
    let help = Command::new("oslat")
        .arg("--help")
        .output()
        .expect("oslat starts");
    stdout_of(&help).contains("--bucket-width")
}

fn real_oslat(args: &[&str]) -> Option<Output> {
    require_tool("oslat", "--help", "rt-tests");
    let output = Command::new("oslat")
        .args(args)
        .output()
        .expect("oslat starts");
    if !output.status.success() {
        report_skip(
            "oslat::beside_the_real_oslat",
            &format!(
                "the real oslat did not run here ({}): {}",
                output.status,
                stdout_of(&output).lines().last().unwrap_or("")
            ),
        );
        return None;
    }
    Some(output)
}

/// The label of each summary row (what precedes ":\t") and how many
/// values it carries, with its ending; the header lines as they are.
fn shape(text: &str) -> Vec<String> {
    text.lines()
        .skip(1) // the version line
        .map(|line| match line.split_once(":\t") {
            Some((label, values)) => {
                let words: Vec<&str> = values.split_whitespace().collect();
                let numbers = words
                    .iter()
                    .take_while(|w| w.parse::<f64>().is_ok())
                    .count();
                format!("{label}: {numbers} values {}", words[numbers..].join(" "))
            }
            None => line.to_string(),
        })
        .collect()
}
