//! What tests/daemon.rs and tests/full/daemon.rs share.

use super::*;
use std::process::Command;

pub fn run_with(config: &std::path::Path) -> Command {
    let mut cmd = latencyd();
    cmd.arg("run").arg("--config").arg(config);
    cmd
}
