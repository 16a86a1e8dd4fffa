//! What tests/plot.rs and tests/full/plot.rs share.

use super::*;
use std::path::Path;

pub fn plot(input: &Path, output: &Path) -> std::process::Output {
    latencyd()
        .arg("plot")
        .arg(input)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap()
}
