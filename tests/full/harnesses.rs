//! The harnesses people already run, with `latencyd measure` standing in
//! for cyclictest on `PATH`, beside the same harness on real cyclictest:
//! rteval's cyclictest measurement module and Linaro's LAVA test
//! definition `automated/linux/cyclictest`. The comparisons themselves are
//! the scripts `scripts/check-rteval-cyclictest.py` and
//! `scripts/check-linaro-cyclictest.sh` (same nodes or test cases, samples
//! on every core, minima, medians and averages within the spread of
//! cyclictest against itself), and loaded, `scripts/check-rteval-load.py`
//! (rteval's loads and cyclictest against `measure --load rteval`).
//!
//! Neither harness is part of this project or of a Debian package, and CI
//! reaches only the package registries: each test runs where its checkout
//! is named (`LATENCYD_RTEVAL_DIR`, `LATENCYD_TEST_DEFINITIONS_DIR`) and
//! the machine has real-time privileges, and otherwise says loudly what it
//! skipped. docs/measure.md has the results of the last runs.

#[path = "../common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{one_at_a_time, privileged, report_skip, run_ok, stdout_of};

/// Runs `script DIR DURATION` where the checkout named by `var` exists and
/// real-time scheduling is allowed, and checks it reached its verdict.
/// One harness at a time: each puts a thread at priority 95 or more on
/// every CPU, and two at once would judge each other's load.
fn run_harness(test: &str, var: &str, script: &str, duration: &str, verdict: &str) {
    let _turn = one_at_a_time();
    let Some(dir) = std::env::var_os(var) else {
        report_skip(
            test,
            &format!("{var} is not set: point it at a checkout of the harness to run it"),
        );
        return;
    };
    if !privileged() {
        report_skip(
            test,
            "no real-time privileges: cyclictest itself cannot run here",
        );
        return;
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(script);
    let output = run_ok(
        Command::new(path)
            .arg(PathBuf::from(dir))
            .arg(duration)
            .env("LATENCYD", env!("CARGO_BIN_EXE_latencyd")),
    );
    let text = stdout_of(&output);
    assert!(
        text.contains(verdict),
        "{script} did not reach its verdict:\n{text}"
    );
}

#[test]
// Full tier: rteval's and Linaro's checkouts and cyclictest.
fn rteval_cyclictest_module_reads_measure_as_it_reads_cyclictest() {
    run_harness(
        "rteval_cyclictest_module_reads_measure_as_it_reads_cyclictest",
        "LATENCYD_RTEVAL_DIR",
        "check-rteval-cyclictest.py",
        "5",
        "samples on every core",
    );
}

/// Loaded: rteval's own loads and cyclictest against `measure --load
/// rteval`, both read by rteval's parser (three alternating pairs).
#[test]
// Full tier: rteval's and Linaro's checkouts and cyclictest.
fn rteval_loaded_run_and_measure_load_read_alike() {
    run_harness(
        "rteval_loaded_run_and_measure_load_read_alike",
        "LATENCYD_RTEVAL_DIR",
        "check-rteval-load.py",
        "10",
        "fall within rteval's loaded runs' spread",
    );
}

#[test]
// Full tier: rteval's and Linaro's checkouts and cyclictest.
fn linaro_cyclictest_definition_records_the_same_test_cases() {
    run_harness(
        "linaro_cyclictest_definition_records_the_same_test_cases",
        "LATENCYD_TEST_DEFINITIONS_DIR",
        "check-linaro-cyclictest.sh",
        "5s",
        "same test cases and results",
    );
}
