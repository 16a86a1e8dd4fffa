//! The cyclictest renderers against checked-in expected output: a fixed,
//! synthetic run is rendered as summary lines, `-h`/`-H` blocks and JSON,
//! and compared byte for byte with `tests/data/expected/`. After an
//! intended format change, regenerate with `UPDATE_EXPECT=1 cargo test
//! --test render` and review the diff.

mod common;

use std::time::{Duration, UNIX_EPOCH};

use latencyd::measure::{self, RunReport, ThreadReport};
use latencyd::rt::sys::Policy;
use latencyd::stats::{LatencyStats, LinearHistogram};

fn thread(
    cpu: usize,
    samples_ns: &[u64],
    missed: u64,
    nsecs: bool,
    bins: Option<usize>,
) -> ThreadReport {
    let unit = if nsecs { 1 } else { 1_000 };
    let mut stats = LatencyStats::new(20_000, bins.map(|n| LinearHistogram::new(n, unit)));
    for (i, &ns) in samples_ns.iter().enumerate() {
        stats.record(ns, i as u64);
    }
    stats.missed = missed;
    ThreadReport {
        cpu,
        numa_node: 0,
        tid: 4242 + cpu as i32,
        priority: 80,
        interval_ns: 1_000_000,
        realtime: true,
        stats,
        smi_count: None,
    }
}

fn run(nsecs: bool, bins: Option<usize>, histofall: bool) -> RunReport {
    let a: Vec<u64> = (0..40)
        .map(|i| 2_500 + (i * 937) % 9_000)
        .chain([31_400, 7_250])
        .collect();
    let b: Vec<u64> = (0..25)
        .map(|i| 3_100 + (i * 611) % 4_000)
        .chain([123_456])
        .collect();
    RunReport {
        cmdline: "latencyd measure -q -l 42".to_string(),
        start_time: UNIX_EPOCH + Duration::from_secs(1_795_315_538),
        end_time: UNIX_EPOCH + Duration::from_secs(1_795_315_540),
        return_code: 0,
        host: common::synthetic_host(&[0, 3, 5], &[0, 1, 2, 3, 4, 5]),
        fingerprint: {
            let track = common::synthetic_fingerprint(1_795_315_538_000_000_000);
            (*track.current).clone()
        },
        topology: common::synthetic_fingerprint(0).topology[..2].to_vec(),
        pm_qos_us: Some(0),
        policy: Policy::Fifo,
        nsecs,
        histofall,
        threads: vec![
            thread(0, &a, 0, nsecs, bins),
            thread(3, &b, 2, nsecs, bins),
            thread(5, &[], 0, nsecs, bins),
        ],
        notes: vec!["-n: accepted from cyclictest 1.x; clock_nanosleep is always used".to_string()],
        load: None,
        captures: vec![],
        timerlat: None,
    }
}

#[test]
fn summary_lines_in_microseconds_and_nanoseconds() {
    common::check_expected(
        "summary-us.txt",
        &measure::summary_lines(&run(false, None, false)),
    );
    common::check_expected(
        "summary-ns.txt",
        &measure::summary_lines(&run(true, None, false)),
    );
}

#[test]
fn histogram_blocks() {
    common::check_expected(
        "histogram.txt",
        &measure::histogram_block(&run(false, Some(12), false)),
    );
    common::check_expected(
        "histofall.txt",
        &measure::histogram_block(&run(false, Some(12), true)),
    );
    assert_eq!(measure::histogram_block(&run(false, None, false)), "");
}

#[test]
fn json_documents() {
    common::check_expected(
        "run.json",
        &measure::json_document(&run(false, Some(12), false)),
    );
    common::check_expected(
        "run-ns-no-histogram.json",
        &measure::json_document(&run(true, None, false)),
    );
}
