//! Replays what the coverage-guided fuzzer found (`scripts/fuzz`, targets
//! in src/fuzzing.rs) on the stable toolchain: every input of each
//! target's minimized corpus (`fuzz/corpus/TARGET`) and every crasher it
//! ever found (`fuzz/artifacts/TARGET`), so that a parser which panics
//! again on any of them fails the ordinary test run. Each target replays
//! in a child process of this binary under an address-space limit
//! (`prlimit --as`, so a runaway allocation is a failure, not a swapped
//! machine) and a deadline, each input within a time bound; each file
//! runs under `catch_unwind` so that the failure names the target and the
//! file.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use latencyd::fuzzing::TARGETS;

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// The address space a target's replay may take: 256 MiB. Every target's
/// whole corpus replays in 12 MB here; 8 MB is too little to start.
const MEMORY_BOUND: &str = "268435456";
/// The time one input may take, in a debug build on a loaded machine.
const INPUT_BOUND: Duration = Duration::from_secs(10);
/// The time a whole target's replay may take.
const TARGET_BOUND: Duration = Duration::from_secs(300);
/// Set in a child: the target it replays.
const CHILD: &str = "LATENCYD_FUZZ_REPLAY_TARGET";

/// Runs `target` on every file, returning the files it panicked on or
/// took longer than `INPUT_BOUND` over.
fn replay(target: latencyd::fuzzing::Target, files: &[PathBuf]) -> Vec<String> {
    let mut failed = Vec::new();
    for file in files {
        // A file a running fuzzer minimised away meanwhile is not an input.
        let data = match std::fs::read(file) {
            Ok(data) => data,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{}: {e}", file.display()),
        };
        let started = Instant::now();
        if std::panic::catch_unwind(|| target(&data)).is_err() {
            failed.push(file.display().to_string());
        } else if started.elapsed() > INPUT_BOUND {
            failed.push(format!("{} took {:?}", file.display(), started.elapsed()));
        }
    }
    failed
}

/// In a child (`CHILD` set): replays one target's corpus and crashers,
/// printing the failures one a line after `FAILED:` and the count.
#[test]
fn replay_one_target_as_a_child() {
    let Ok(name) = std::env::var(CHILD) else {
        return; // Only ever run by the test below, in a child.
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let (_, target) = TARGETS.iter().find(|(n, _)| *n == name).unwrap();
    let mut files = files_in(&root.join("corpus").join(&name));
    files.extend(files_in(&root.join("artifacts").join(&name)));
    // On lines of their own, after the harness's "test NAME ... ".
    println!();
    for failed in replay(*target, &files) {
        println!("FAILED: {failed}");
    }
    println!("REPLAYED: {}", files.len());
}

/// Replays `name` in a child of this binary under the memory bound, killed
/// at the target's deadline; the inputs replayed, or what went wrong.
fn replay_in_a_child(name: &str) -> Result<usize, String> {
    let mut child = Command::new("prlimit")
        .arg(format!("--as={MEMORY_BOUND}"))
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "replay_one_target_as_a_child"])
        .args(["--include-ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prlimit (util-linux) runs");
    // Read while it runs: a panic message per crasher can fill a pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TARGET_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{name}: still replaying after {TARGET_BOUND:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    let failed: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("FAILED: "))
        .collect();
    let replayed = out
        .lines()
        .find_map(|l| l.strip_prefix("REPLAYED: ")?.parse().ok());
    match replayed {
        Some(n) if status.success() && failed.is_empty() => Ok(n),
        _ if !failed.is_empty() => Err(format!("{name}: {}", failed.join(", "))),
        _ => Err(format!(
            "{name}: the replay ended with {status} under a {MEMORY_BOUND}-byte address \
             space: {}",
            err.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
        )),
    }
}

#[test]
fn every_target_survives_its_corpus_and_every_crasher_found() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut failed = Vec::new();
    let mut total = 0;
    for (name, _) in TARGETS {
        assert!(
            !files_in(&root.join("corpus").join(name)).is_empty(),
            "fuzz/corpus/{name} is empty or missing: run `scripts/fuzz 600 {name}` \
             and check the corpus in"
        );
        match replay_in_a_child(name) {
            Ok(n) => total += n,
            Err(why) => failed.push(why),
        }
    }
    assert!(
        failed.is_empty(),
        "fuzz targets failed within their bounds ({total} inputs replayed):\n{}",
        failed.join("\n")
    );
    eprintln!(
        "replayed {total} fuzz inputs over {} targets, each target in {MEMORY_BOUND} bytes \
         of address space, each input within {INPUT_BOUND:?}",
        TARGETS.len()
    );
}

#[test]
fn every_target_has_a_fuzz_binary() {
    // A target added to src/fuzzing.rs but not to fuzz/ would never be
    // fuzzed; one removed would leave a binary that does not build.
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/Cargo.toml"))
            .unwrap();
    let bins: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \"")?.strip_suffix('"'))
        .filter(|n| *n != "latencyd-fuzz")
        .collect();
    let targets: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        bins, targets,
        "fuzz/Cargo.toml's [[bin]]s vs latencyd::fuzzing::TARGETS"
    );
    for name in targets {
        let source = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fuzz/fuzz_targets/{name}.rs")),
        )
        .unwrap_or_else(|e| panic!("fuzz/fuzz_targets/{name}.rs: {e}"));
        assert!(
            source.contains(&format!("latencyd::fuzzing::{name}(")),
            "fuzz/fuzz_targets/{name}.rs does not call latencyd::fuzzing::{name}"
        );
    }
}
