//! Stamps the git revision latencyd is built from into the binary, for
//! `latencyd_build_info{revision}`.
//! `GIT_REVISION_LATENCYD` in the environment wins (a package built from a
//! tarball can set it); outside a git checkout without it: "unknown". (Not
//! `LATENCYD_…`: that prefix is configuration, and cargo passes the
//! variable on to the tests' daemons.)

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=GIT_REVISION_LATENCYD");
    // A commit or a checkout moves HEAD's log; rebuild then.
    for path in [".git/HEAD", ".git/logs/HEAD"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let revision = std::env::var("GIT_REVISION_LATENCYD")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(git_revision)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=GIT_REVISION_LATENCYD={revision}");
}

fn git_revision() -> Option<String> {
    let output = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    let revision = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && !revision.is_empty()).then_some(revision)
}
