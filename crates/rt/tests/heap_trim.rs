//! Under `mlockall`, freed heap memory goes back to the kernel and what
//! is still in use stays locked (`sys::trim_heap`). A binary of its own:
//! locking is per process.

use latencyd_rt::sys::{self, HeapTrim};

/// (resident KiB, locked KiB) of this process, from /proc/self/status.
fn resident_and_locked_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    };
    (field("VmRSS:"), field("VmLck:"))
}

/// The `VmFlags` of the heap's mappings (`lo`: locked).
fn heap_flags() -> Vec<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut flags = Vec::new();
    let mut in_heap = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        let is_header = first
            .split_once('-')
            .is_some_and(|(a, b)| [a, b].iter().all(|h| u64::from_str_radix(h, 16).is_ok()));
        if is_header {
            in_heap = line.ends_with("[heap]");
        } else if in_heap && let Some(f) = line.strip_prefix("VmFlags:") {
            flags.push(f.trim().to_string());
        }
    }
    flags
}

/// Set in the child that does the work.
const CHILD: &str = "HEAP_TRIM_CHILD";

#[test]
fn freed_memory_leaves_a_locked_heap_and_what_is_kept_stays_locked() {
    if std::env::var_os(CHILD).is_none() {
        // The work runs alone in a child of this binary whose threads all
        // use glibc's main arena (the heap) from the start, as the
        // daemon's do (it limits the arenas before its first thread); this
        // harness started its threads, each with an arena, before.
        let name = "freed_memory_leaves_a_locked_heap_and_what_is_kept_stays_locked";
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env("MALLOC_ARENA_MAX", "1")
            .output()
            .unwrap();
        // Straight to stderr, past the harness's capture: the gate's
        // summary lists the child's skipped parts.
        std::io::Write::write_all(&mut std::io::stderr(), &child.stderr).unwrap();
        assert!(
            child.status.success(),
            "{}",
            String::from_utf8_lossy(&child.stdout)
        );
        return;
    }
    // Locking 40 MB needs CAP_IPC_LOCK: under a user's memlock limit the
    // allocations below would fail once memory is locked.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap_or("");
    if euid != "0" {
        eprintln!(
            "\n*** SKIPPED PART of freed_memory_leaves_a_locked_heap_and_what_is_kept_stays_locked: \
             not root: locking 40 MB of heap needs CAP_IPC_LOCK ***\n"
        );
        return;
    }
    if let Err(err) = sys::lock_all_memory() {
        eprintln!(
            "\n*** SKIPPED PART of freed_memory_leaves_a_locked_heap_and_what_is_kept_stays_locked: \
             memory cannot be locked without real-time privileges ({err}) ***\n"
        );
        return;
    }
    // 40 MB in small blocks (below glibc's mmap threshold, so in the
    // heap), 99 of each 100 freed: the heap cannot shrink from its top.
    let mut blocks: Vec<Option<Vec<u8>>> =
        (0..20_000).map(|i| Some(vec![i as u8; 2_000])).collect();
    let (full, _) = resident_and_locked_kib();
    for (i, block) in blocks.iter_mut().enumerate() {
        if i % 100 != 0 {
            *block = None;
        }
    }
    let trim = sys::trim_heap().unwrap();
    let (after, locked) = resident_and_locked_kib();
    eprintln!(
        "resident {full} KiB full, {after} KiB after the trim ({trim:?}); locked {locked} KiB"
    );
    if trim == HeapTrim::Trimmed {
        eprintln!(
            "\n*** SKIPPED PART of freed_memory_leaves_a_locked_heap_and_what_is_kept_stays_locked: \
             this kernel has no MCL_ONFAULT, so the locked heap is not unlocked to trim ***\n"
        );
        return;
    }
    // Most of the 39 MB freed went back (malloc_trim alone gave back
    // nothing: the pages were locked).
    assert!(
        full - after > 30_000,
        "resident {full} KiB before, {after} KiB after"
    );
    // The heap is locked again, and what was kept is intact.
    let flags = heap_flags();
    assert!(
        !flags.is_empty() && flags.iter().all(|f| f.split(' ').any(|w| w == "lo")),
        "{flags:?}"
    );
    for (i, block) in blocks.iter().enumerate() {
        if let Some(block) = block {
            assert!(block.iter().all(|&b| b == i as u8));
        }
    }
    // New allocations land in locked memory too.
    let again: Vec<Vec<u8>> = (0..5_000).map(|_| vec![7u8; 2_000]).collect();
    assert!(heap_flags().iter().all(|f| f.split(' ').any(|w| w == "lo")));
    drop(again);
}
