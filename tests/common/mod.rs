//! Helpers shared by the integration tests: running the real binary,
//! knowing whether this user may use real-time scheduling, reporting what
//! was skipped, and a parser for cyclictest's text output written the way
//! users' scripts read it.

#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output};

pub mod cyclictest;

/// The binary under test.
pub fn latencyd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_latencyd"))
}

/// Root can lock memory and use SCHED_FIFO here; anyone else is tested on
/// the non-real-time path.
pub fn privileged() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Flags that let a `measure` run succeed for this user.
pub fn run_flags() -> Vec<&'static str> {
    if privileged() {
        vec![]
    } else {
        vec!["--allow-non-rt", "--default-system"]
    }
}

/// Says loudly, past the test harness's output capture, what a test did
/// not cover.
pub fn report_skip(test: &str, reason: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED PART of {test}: {reason} ***\n"
    );
}

pub fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs a command and fails with its output if it did not exit 0.
pub fn run_ok(cmd: &mut Command) -> Output {
    let output = cmd.output().expect("the command starts");
    assert!(
        output.status.success(),
        "{cmd:?} failed with {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout_of(&output),
        stderr_of(&output)
    );
    output
}

/// Where checked-in test data lives.
pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Number of CPUs `measure` uses by default: online and in our affinity.
pub fn usable_cpus() -> usize {
    latencyd::host::HostInfo::detect().usable_cpus.len()
}
