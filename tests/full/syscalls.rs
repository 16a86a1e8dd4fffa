//! A sampler makes exactly one system call per sample (its
//! `clock_nanosleep`): checked with strace by `benches/syscalls.sh`,
//! which this test runs against the binary under test.

#[path = "../common/mod.rs"]
mod common;

use std::process::Command;

#[test]
// Full tier: strace counts the samplers' system calls.
fn each_sample_costs_exactly_one_system_call() {
    let strace = Command::new("strace").arg("-V").output();
    assert!(
        strace.is_ok_and(|o| o.status.success()),
        "strace is missing: install Debian's strace (.ci/run does)"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/syscalls.sh");
    let output = Command::new("bash")
        .args([script, "--check"])
        .env("LATENCYD", env!("CARGO_BIN_EXE_latencyd"))
        .env("LOOPS", "500")
        .env("INTERVAL_US", "1000")
        .output()
        .unwrap();
    let stdout = common::stdout_of(&output);
    assert!(
        output.status.success(),
        "the invariant is broken:\n{stdout}\n{}",
        common::stderr_of(&output)
    );
    // One row per sampler, each at 1.000 calls per sample.
    let rows: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), common::usable_cpus(), "{stdout}");
    assert!(rows.iter().all(|row| row.ends_with(" 1.000")), "{stdout}");
}
