//! The record through a kill (read back by HdrHistogram's Python
//! package) and a full disk (a tmpfs root fills).
//! (tests/record.rs holds the quick tier's.)

#[path = "../common/mod.rs"]
mod common;

use common::record::*;
use common::{privileged, report_skip, wait_until};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
// Full tier: python3 with HdrHistogram's package.
fn the_record_outlives_a_kill_and_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let record_dir = dir.path().join("record");
    let t0 = rfc3339_now();

    // Run one, killed with SIGKILL after a few intervals.
    let mut one = record_daemon(dir.path(), &record_dir);
    wait_until(
        "3 intervals",
        Duration::from_millis(100),
        Duration::from_secs(20),
        || written(&one) >= 3,
    );
    let live_one = per_cpu(&json_of(&one, "/api/v1/latency"));
    one.signal(libc::SIGKILL);
    let _ = one.wait_with_log();
    let t_kill = rfc3339_now();
    // A crash in the middle of a write: the newest file ends in half a line.
    let newest = latencyd::record::writer::list(&record_dir)
        .unwrap()
        .pop()
        .unwrap()
        .0;
    let mut text = std::fs::read_to_string(&newest).unwrap();
    text.push_str("#[latencyd cpu0 count=7 sum=7 min=1 max=1 missed=0 overflows=0 spikes=0 threshold=1]\nTag=cpu0,17953");
    std::fs::write(&newest, text).unwrap();

    // Run two, stopped cleanly: it writes the interval in progress.
    let mut two = record_daemon(dir.path(), &record_dir);
    wait_until(
        "3 more intervals",
        Duration::from_millis(100),
        Duration::from_secs(20),
        || written(&two) >= 3,
    );
    let q = |from: &str, to: Option<&str>| {
        let mut path = format!("/api/v1/latency?from={}", common::url_encode(from));
        if let Some(to) = to {
            path.push_str(&format!("&to={}", common::url_encode(to)));
        }
        path
    };
    let first = json_of(&two, &q(&t0, Some(&t_kill)));
    let both = json_of(&two, &q(&t0, None));
    assert_eq!(both["torn_files"], 1, "{both}");
    assert!(
        both["warning"]
            .as_str()
            .unwrap()
            .contains("unfinished last line"),
        "{both}"
    );
    assert_eq!(both["skipped_lines"], 0);
    let live_two = per_cpu(&json_of(&two, "/api/v1/latency"));
    two.signal(libc::SIGTERM);
    let (status, log) = two.wait_with_log();
    assert!(status.success(), "{log:?}");

    // Read once more, now that run two wrote its last interval: a third
    // run only serves the record.
    let three = record_daemon(dir.path(), &record_dir);
    let first = per_cpu(&first);
    let second = per_cpu(&json_of(&three, &q(&t_kill, None)));
    let all = per_cpu(&json_of(&three, &q(&t0, Some(&t_kill))));
    assert_eq!(all, first, "run one's part does not change");
    let everything = per_cpu(&json_of(&three, &q(&t0, None)));
    drop(three);
    for (cpu, count, max) in &everything {
        let a = first.iter().find(|c| c.0 == *cpu).unwrap();
        let b = second.iter().find(|c| c.0 == *cpu).unwrap();
        // Run three's own samples (its first second) may be there too.
        assert!(
            *count >= a.1 + b.1,
            "CPU {cpu}: {count} < {} + {}",
            a.1,
            b.1
        );
        assert!(*max >= a.2.max(b.2));
        // Run one lost at most the interval in progress when killed.
        let live = live_one.iter().find(|c| c.0 == *cpu).unwrap();
        assert!(
            a.1 <= live.1 + 3_000,
            "CPU {cpu}: recorded {} > live {}",
            a.1,
            live.1
        );
        assert!(
            a.1 + 3_000 >= live.1,
            "CPU {cpu}: recorded {} lost more than an interval of {}",
            a.1,
            live.1
        );
        // Everything run two counted is in the record (it stopped cleanly).
        let live = live_two.iter().find(|c| c.0 == *cpu).unwrap();
        assert!(
            b.1 >= live.1,
            "CPU {cpu}: recorded {} < live {}",
            b.1,
            live.1
        );
        assert!(
            b.2 >= live.2,
            "CPU {cpu}: recorded max {} < live {}",
            b.2,
            live.2
        );
    }

    // HdrHistogram's own Python reader decodes every file: the same totals
    // per tag, maxima within the record's precision (1/128) of the exact.
    let files: Vec<String> = latencyd::record::writer::list(&record_dir)
        .unwrap()
        .into_iter()
        .map(|f| f.0.display().to_string())
        .collect();
    let probe = Command::new("python3").args(["-c", "import hdrh"]).output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "python3 with the hdrhistogram package is missing (scripts/test installs it as root: pip install hdrhistogram)"
    );
    let output = Command::new("python3")
        .arg("-c")
        .arg(
            r#"
import sys
from hdrh.log import HistogramLogReader
from hdrh.histogram import HdrHistogram
totals = {}
for path in sys.argv[1:]:
    reader = HistogramLogReader(path, HdrHistogram(1, 10_000_000_000, 2))
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        tag = h.get_tag()
        count, peak = totals.get(tag, (0, 0))
        totals[tag] = (count + h.get_total_count(), max(peak, h.get_max_value()))
for tag, (count, peak) in sorted(totals.items()):
    print(tag, count, peak)
"#,
        )
        .args(&files)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for (cpu, count, max) in &everything {
        let line = said
            .lines()
            .find(|l| l.starts_with(&format!("cpu{cpu} ")))
            .unwrap_or_else(|| panic!("no cpu{cpu} in {said}"));
        let fields: Vec<u64> = line
            .split(' ')
            .skip(1)
            .map(|f| f.parse().unwrap())
            .collect();
        assert_eq!(fields[0], *count, "CPU {cpu}: python's total");
        assert!(
            fields[1] >= *max * 127 / 128 && fields[1] <= *max + *max / 64 + 1,
            "CPU {cpu}: python's max {} vs exact {max}",
            fields[1]
        );
    }
}

#[test]
// Full tier: root mounts a full tmpfs.
fn a_full_disk_holds_intervals_in_memory_and_writing_resumes() {
    if !privileged() {
        report_skip(
            "a_full_disk_holds_intervals_in_memory_and_writing_resumes",
            "mounting a small tmpfs needs root",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mount)
        .status()
        .unwrap();
    assert!(ok.success(), "mount tmpfs");
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&mount);
    // Fill it.
    let filler = mount.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 64 * 1024]);
    let daemon = record_daemon(dir.path(), &mount.join("record"));
    wait_until(
        "a write error",
        Duration::from_millis(100),
        Duration::from_secs(20),
        || json_of(&daemon, "/api/v1/status")["record"]["write_errors"].as_u64() > Some(1),
    );
    let record = json_of(&daemon, "/api/v1/status")["record"].clone();
    assert!(
        record["error"].as_str().unwrap().contains("No space left"),
        "{record}"
    );
    assert!(record["backlog"].as_u64() > Some(0), "{record}");
    assert_eq!(daemon.get("/healthz").0, 200);
    // Room again: the backlog goes to disk and the error clears.
    std::fs::remove_file(&filler).unwrap();
    wait_until(
        "writing to resume",
        Duration::from_millis(200),
        Duration::from_secs(30),
        || {
            let r = &json_of(&daemon, "/api/v1/status")["record"];
            r["error"].is_null() && r["backlog"] == 0 && r["intervals_written"].as_u64() > Some(2)
        },
    );
    // No interval was dropped: the record holds every second since start.
    let record = json_of(&daemon, "/api/v1/status")["record"].clone();
    assert_eq!(record["intervals_dropped"], 0, "{record}");
}

/// Per CPU: (count, max_ns).
fn per_cpu(body: &Value) -> Vec<(u64, u64, u64)> {
    body["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cpu"].as_u64().unwrap(),
                c["count"].as_u64().unwrap(),
                c["max_ns"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn rfc3339_now() -> String {
    latencyd::calendar::format_rfc3339_ms(latencyd::units::unix_now_ns())
}
