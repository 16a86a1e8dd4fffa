//! measure beside the real cyclictest: the same shape of latency.
//! (tests/measure.rs holds the quick tier's.)

#[path = "../common/mod.rs"]
mod common;

use common::cyclictest::{self, Parsed};
use common::measure::*;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs the real cyclictest and latencyd with the same arguments, parses
/// both with the same parser and checks they have the same shape.
#[test]
// Full tier: the real cyclictest.
fn real_cyclictest_and_latencyd_agree_in_shape() {
    if !privileged() {
        report_skip(
            "real_cyclictest_and_latencyd_agree_in_shape",
            "not root: cyclictest cannot run without real-time privileges",
        );
        return;
    }
    let cyclictest_found = Command::new("cyclictest").arg("--help").output().is_ok();
    assert!(
        cyclictest_found,
        "cyclictest is missing: install Debian's rt-tests (.ci/run does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "-q",
        "-m",
        "-p80",
        "-i1000",
        "-l",
        "200",
        "-h",
        "40",
        "-a",
        "0",
        "--latency=0",
    ];
    let run = |program: &mut Command, json: &Path| -> (Parsed, Value) {
        let output = run_ok(program.args(args).arg(format!("--json={}", json.display())));
        (
            cyclictest::parse(&stdout_of(&output)).unwrap(),
            json_of(json),
        )
    };
    let (theirs, their_json) = run(&mut Command::new("cyclictest"), &dir.path().join("c.json"));
    let (ours, our_json) = run(latencyd().arg("measure"), &dir.path().join("l.json"));
    let (theirs_block, ours_block) = (theirs.histogram.unwrap(), ours.histogram.unwrap());
    assert_eq!(theirs_block.rows.len(), ours_block.rows.len());
    assert_eq!(
        theirs_block.footers.keys().collect::<Vec<_>>(),
        ours_block.footers.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        theirs_block.overflow_samples.len(),
        ours_block.overflow_samples.len()
    );
    assert_eq!(
        theirs.comments, ours.comments,
        "the '#' lines before the block"
    );
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    for key in keys(&their_json) {
        assert!(
            our_json.get(&key).is_some(),
            "latencyd's JSON lacks cyclictest's '{key}'"
        );
    }
    for key in keys(&their_json["thread"]["0"]) {
        assert!(
            our_json["thread"]["0"].get(&key).is_some(),
            "thread lacks '{key}'"
        );
    }
    assert_eq!(
        our_json["thread"]["0"]["cycles"],
        their_json["thread"]["0"]["cycles"]
    );
}
