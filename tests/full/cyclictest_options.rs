//! Every option of cyclictest's man page, run under cyclictest and under
//! `latencyd measure` with the same command line: the same exit status
//! (success or not), the same threads with the same priorities and
//! intervals, the same `#` footers and sample lines, and cyclictest's JSON
//! keys all present in ours. Real cyclictest (Debian's rt-tests) is the
//! reference; the harnesses' own command lines (rteval, Linaro's
//! test-definitions, a container harness, the how-to) are among them.
//!
//! Without real-time privileges cyclictest refuses to run at all, so the
//! comparison is skipped (loudly) and only `measure`'s acceptance of every
//! line is checked, with `--allow-non-rt`.

#[path = "../common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use common::{latencyd, privileged, report_skip, stderr_of, stdout_of};
use serde_json::Value;

/// The command lines, `{dir}` standing for a scratch directory. Each runs
/// for one second (`-D 1` is added) unless it ends itself sooner.
const LINES: &[&str] = &[
    // The how-to, rteval, a container harness, Linaro's test definition.
    "--mlockall --smp --priority=80 --interval=200 --distance=0",
    "-i100 -qmu \"-h 35\" -p95 -t2 -a0-1",
    "-q -p 1 -t 2 -a 0-1 -h 30 -i 1000 --mainaffinity 0 -m",
    "-p 98 -t 2 -a 0-1 -i 1000 -m -q --json={dir}/linaro.json",
    // Option by option, as the man page lists them.
    "-a -q -p80",
    "-a 1 -t 3 -q -p80",
    "-A 100 -t2 -q -p80",
    "--aligned=100 -t2 -q -p80",
    "-b 1000000 -q -p80",
    "-c 1 -q -p80",
    "-c 0 -q -p80",
    "--default-system -q -p80",
    "-d 100 -t2 -q -p80",
    "-d0 -t2 -h 10 -q -p80",
    "-F {dir}/fifo -q -p80",
    "-h 20 -q -p80",
    "-H 20 -t2 -q -p80",
    "--histfile={dir}/hist.txt -h 20 -q -p80",
    "-i 500 -q -p80",
    "--laptop -q -p80",
    "--latency=10 -q -p80",
    "--latency=-5 -q -p80",
    "-l 100 -q -p80",
    "-M -q -p80",
    "-N -q -p80",
    "-v -l 5 -q -p80",
    "-v -o 2 -l 6 -q -p80",
    "-p 80 --policy=rr -q",
    // With a real-time policy and no priority, both take the number of
    // threads + 1: one thread each here (without -t the counts differ).
    "--policy=fifo -t1 -q",
    "--policy=other -q",
    "--policy=batch -q",
    "--policy=idle -q",
    "--policy=bogus -p 1 -q",
    "--priospread -t2 -q -p80",
    "-q -p 0 -t 1",
    "-r -q -p80",
    "-R -q -p80",
    "--secaligned -t2 -q -p80",
    "--secaligned=250 -t2 -q -p80",
    "-s -q -p80",
    "-S -q -p80",
    "-Sp90 -q",
    "--spike=100000 -q -p80",
    "--spike=1 --spike-nodes=5 -l 20 -q -p80",
    "-t -q -p80",
    "-t3 -a0 -q -p80",
    "--tracemark -b 1000000 -q -p80",
    "-u -q -p80",
    "--dbg_cyclictest -q -p80",
    "-x -q -p80",
    "-x -t2 -q -p80",
    "-q -p80 stray words",
    "--dist=0 --dur=1 --priority=80 -q",
    // What cyclictest refuses runs nowhere.
    "-p 120 -q",
    "-h 0 -q",
    "-o 10 -q",
    "-t0 -q",
    "-c 5 -q",
    "--smi -a0 -q -p80",
];

/// The line's words as a POSIX shell splits them, `{dir}` replaced.
fn words(line: &str, dir: &Path) -> Vec<String> {
    let line = line.replace("{dir}", &dir.display().to_string());
    shell_words::split(&line).unwrap_or_else(|err| panic!("{line}: {err}"))
}

/// What a run shows that a harness reads.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    succeeded: bool,
    /// Thread number → (priority, interval in µs), from the `T:` lines.
    threads: BTreeMap<u64, (u64, u64)>,
    /// The labels of `#` lines (`# Max Latencies`, `# Histogram`, ...).
    footers: BTreeSet<String>,
    /// `-v`'s `thread:cycle:latency` lines, per thread.
    sample_lines: BTreeMap<u64, usize>,
    /// `--spike`'s records and its `spikes = N` line.
    spike_lines: bool,
}

fn shape(output: &Output) -> Shape {
    let stdout = stdout_of(output);
    let mut threads = BTreeMap::new();
    let mut footers = BTreeSet::new();
    let mut sample_lines = BTreeMap::new();
    let mut spike_lines = false;
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("T:") {
            if rest.contains("Spike:") {
                spike_lines = true;
                continue;
            }
            let field = |name: &str| -> u64 {
                let at = rest.find(&format!("{name}:")).unwrap() + name.len() + 1;
                rest[at..]
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            let idx: u64 = rest.split_whitespace().next().unwrap().parse().unwrap();
            threads.insert(idx, (field("P"), field("I")));
        } else if let Some(label) = line.strip_prefix('#') {
            let label = label.split(':').next().unwrap().trim();
            // The overflow list's lines are per thread; the label is what
            // a parser matches. `# latencyd: NOT REAL-TIME` is ours.
            if !label.starts_with("Thread ") && label != "latencyd" {
                footers.insert(label.to_string());
            }
        } else if line.split(':').count() == 3
            && line.split(':').all(|f| f.trim().parse::<i64>().is_ok())
        {
            let idx: u64 = line.split(':').next().unwrap().trim().parse().unwrap();
            *sample_lines.entry(idx).or_insert(0) += 1;
        }
    }
    Shape {
        succeeded: output.status.success(),
        threads,
        footers,
        sample_lines,
        spike_lines,
    }
}

/// The keys of a cyclictest JSON document: top level, and each thread's.
fn json_keys(path: &Path) -> BTreeSet<String> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut keys: BTreeSet<String> = doc.as_object().unwrap().keys().cloned().collect();
    for thread in doc["thread"].as_object().unwrap().values() {
        keys.extend(
            thread
                .as_object()
                .unwrap()
                .keys()
                .map(|k| format!("thread.{k}")),
        );
    }
    keys
}

/// Whether the line sets how many threads run (`-t`, `-S`). Without,
/// cyclictest runs one thread and `measure` one per CPU (docs/measure.md,
/// "Differences on purpose"): then only cyclictest's thread 0 is compared,
/// with ours.
fn lays_out_threads(line: &str) -> bool {
    line.split_whitespace().any(|w| {
        let w = w.trim_matches('"');
        (w.starts_with('-') && !w.starts_with("--") && w[1..].contains(['t', 'S']))
            || ["--smp", "--threads"].iter().any(|l| w.starts_with(l))
    })
}

/// `ours` as cyclictest's would be with one thread: its thread 0 only.
/// Which of `--smi`'s three cases this machine is, as cyclictest 2.x
/// decides them: no counter on this CPU (refused with the options, before
/// anything is printed), a counter whose device cannot be read (refused
/// after the `/dev/cpu_dma_latency` line), or a readable counter (it runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SmiCase {
    NoCounter,
    Unreadable,
    Readable,
}

fn smi_case() -> SmiCase {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    let intel_with_msr = field("vendor_id").as_deref() == Some("GenuineIntel")
        && field("cpu family").as_deref() == Some("6")
        && field("flags").is_some_and(|f| f.split_whitespace().any(|f| f == "msr"));
    if !intel_with_msr {
        SmiCase::NoCounter
    } else if std::fs::File::open("/dev/cpu/0/msr").is_err() {
        SmiCase::Unreadable
    } else {
        SmiCase::Readable
    }
}

/// What `measure --smi -a0 -q -p80` must show in `case`.
fn smi_expectation(case: SmiCase, ours: &Shape) -> Result<(), String> {
    let pm_qos_said = ours
        .footers
        .iter()
        .any(|f| f.starts_with("/dev/cpu_dma_latency"));
    let ok = match case {
        SmiCase::NoCounter => !ours.succeeded && ours.footers.is_empty(),
        SmiCase::Unreadable => !ours.succeeded && pm_qos_said,
        SmiCase::Readable => ours.succeeded,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--smi on a machine of the case {case:?}: measure showed {ours:?}"
        ))
    }
}

fn first_thread_only(mut ours: Shape) -> Shape {
    ours.threads.retain(|idx, _| *idx == 0);
    ours.sample_lines.retain(|idx, _| *idx == 0);
    ours
}

fn run(program: &mut Command, line: &str, dir: &Path) -> Output {
    let mut args = words(line, dir);
    args.extend(["-D".to_string(), "1".to_string()]);
    program
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
// Full tier: the real cyclictest beside every option; about 2 minutes.
fn every_option_runs_as_under_cyclictest() {
    if !privileged() {
        report_skip(
            "every_option_runs_as_under_cyclictest",
            "not root: cyclictest cannot run without real-time privileges, so only measure's \
             acceptance of each command line is checked",
        );
        let dir = tempfile::tempdir().unwrap();
        for line in LINES.iter().take_while(|l| !l.starts_with("-p 120")) {
            let output = run(
                latencyd().args(["measure", "--allow-non-rt"]),
                line,
                dir.path(),
            );
            assert_ne!(
                output.status.code(),
                Some(2),
                "measure refused {line:?}: {}",
                stderr_of(&output)
            );
        }
        return;
    }
    assert!(
        Command::new("cyclictest").arg("--help").output().is_ok(),
        "cyclictest is missing: install Debian's rt-tests (.ci/run does)"
    );
    let mut differences = Vec::new();
    for line in LINES {
        let theirs_dir = tempfile::tempdir().unwrap();
        let ours_dir = tempfile::tempdir().unwrap();
        let theirs = run(&mut Command::new("cyclictest"), line, theirs_dir.path());
        let ours = run(latencyd().arg("measure"), line, ours_dir.path());
        let their_shape = shape(&theirs);
        let our_shape = if lays_out_threads(line) || their_shape.threads.len() != 1 {
            shape(&ours)
        } else {
            first_thread_only(shape(&ours))
        };
        if line.starts_with("--smi") {
            let case = smi_case();
            if let Err(why) = smi_expectation(case, &our_shape) {
                differences.push(why);
            }
            eprintln!("every_option_runs_as_under_cyclictest: --smi checked for the case {case:?}");
            if case != SmiCase::NoCounter
                && their_shape != our_shape
                && !their_shape.succeeded
                && their_shape.footers.is_empty()
            {
                // Older rt-tests releases accept only the Intel models on
                // a list; a newer model is refused with the options there.
                eprintln!(
                    "every_option_runs_as_under_cyclictest: this cyclictest refuses --smi on \
                     this Intel model (its model list predates it); measure follows the rule \
                     of later releases"
                );
                continue;
            }
        }
        if their_shape != our_shape {
            differences.push(format!(
                "{line}\n  cyclictest: {their_shape:?}\n  measure:    {our_shape:?}\n  measure's \
                 stderr: {}",
                stderr_of(&ours).trim()
            ));
        }
        if !their_shape.succeeded {
            assert_ne!(ours.status.code(), Some(0), "{line}: cyclictest refuses it");
        }
        for name in ["linaro.json", "hist.txt"] {
            let (their_file, our_file) = (theirs_dir.path().join(name), ours_dir.path().join(name));
            if !their_file.exists() {
                continue;
            }
            assert!(our_file.exists(), "{line}: measure wrote no {name}");
            if name.ends_with(".json") {
                let missing: Vec<String> = json_keys(&their_file)
                    .difference(&json_keys(&our_file))
                    .cloned()
                    .collect();
                assert!(missing.is_empty(), "{line}: our JSON lacks {missing:?}");
            } else {
                let labels = |path: &Path| -> BTreeSet<String> {
                    std::fs::read_to_string(path)
                        .unwrap()
                        .lines()
                        .filter_map(|l| l.strip_prefix('#'))
                        .map(|l| l.split(':').next().unwrap().trim().to_string())
                        .filter(|l| !l.starts_with("Thread "))
                        .collect()
                };
                assert_eq!(labels(&their_file), labels(&our_file), "{line}: {name}");
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} command lines differ:\n{}",
        differences.len(),
        LINES.len(),
        differences.join("\n")
    );
}
