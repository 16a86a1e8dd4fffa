//! Replays what the coverage-guided fuzzer found (`scripts/fuzz`, targets
//! in src/fuzzing.rs) on the stable toolchain: every input of each
//! target's minimized corpus (`fuzz/corpus/TARGET`) and every crasher it
//! ever found (`fuzz/artifacts/TARGET`), so that a parser which panics
//! again on any of them fails the ordinary test run. Each file runs under
//! `catch_unwind` so that the failure names the target and the file.

use std::path::{Path, PathBuf};

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

/// Runs `target` on every file, returning the files it panicked on.
fn replay(target: latencyd::fuzzing::Target, files: &[PathBuf]) -> Vec<String> {
    let mut failed = Vec::new();
    for file in files {
        // A file a running fuzzer minimised away meanwhile is not an input.
        let data = match std::fs::read(file) {
            Ok(data) => data,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{}: {e}", file.display()),
        };
        if std::panic::catch_unwind(|| target(&data)).is_err() {
            failed.push(file.display().to_string());
        }
    }
    failed
}

#[test]
fn every_target_survives_its_corpus_and_every_crasher_found() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut failed = Vec::new();
    let mut total = 0;
    for (name, target) in TARGETS {
        let corpus = files_in(&root.join("corpus").join(name));
        assert!(
            !corpus.is_empty(),
            "fuzz/corpus/{name} is empty or missing: run `scripts/fuzz 600 {name}` \
             and check the corpus in"
        );
        let crashers = files_in(&root.join("artifacts").join(name));
        total += corpus.len() + crashers.len();
        failed.extend(replay(*target, &corpus));
        failed.extend(replay(*target, &crashers));
    }
    assert!(
        failed.is_empty(),
        "{} of {total} fuzz inputs panic again:\n{}",
        failed.len(),
        failed.join("\n")
    );
    eprintln!(
        "replayed {total} fuzz inputs over {} targets",
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
