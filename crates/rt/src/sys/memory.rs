//! The process's memory: locked, so that no sampler ever waits for a page
//! fault, and the heap's free memory given back to the kernel in spite of
//! the lock.
//!
//! Why the second needs more than `malloc_trim`: glibc gives free memory
//! inside the heap back with `madvise(MADV_DONTNEED)`, which the kernel
//! refuses (`EINVAL`) for locked pages, so under `mlockall` only a free
//! stretch at the very top of the heap ever went back; every burst (a
//! range read, a plot, a flood of connections) raised the heap's resident,
//! locked size for good. Measured with a C program here: 20,000 blocks of
//! 2,000 bytes, 99 of each 100 freed, then `malloc_trim(0)`: 41,096 KB
//! resident when locked, 2,740 KB when not, 2,868 KB locked with
//! `trim_heap`'s unlock, trim, relock.

use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

/// How the process's memory is locked (`LOCKED`).
const NOT_LOCKED: u8 = 0;
/// `MCL_FUTURE` without `MCL_ONFAULT` (kernels before 4.4): relocking the
/// heap would fault every free page back in, so the heap is not unlocked.
const LOCKED_AT_ONCE: u8 = 1;
/// `MCL_ONFAULT`: the heap can be unlocked, trimmed and relocked.
const LOCKED_ON_FAULT: u8 = 2;
/// Relocking failed once (said to the caller): trims since leave the lock
/// alone.
const RELOCK_FAILED: u8 = 3;

static LOCKED: AtomicU8 = AtomicU8::new(NOT_LOCKED);

/// Locks the process's pages into RAM, so no sampler ever waits for a
/// page fault: every page mapped now (the program's code and data, the
/// heap so far) is faulted in and locked at once, and every page mapped
/// later is locked when first touched (`MCL_ONFAULT`, Linux 4.4). What a
/// sampler touches later is written before it turns real-time (its
/// interval buffers, `PREFAULT_STACK_BYTES` of its stack); what it never
/// touches — most of its stack, the malloc arena glibc reserves per
/// thread — then costs no memory, where `MCL_FUTURE` alone made every
/// new mapping resident in full (ARCHITECTURE.md, "Choices").
/// Kernels without `MCL_ONFAULT` get `MCL_CURRENT | MCL_FUTURE`.
///
/// Threads started later share glibc's main malloc arena: an arena of
/// their own reserves 64 MiB of address space per thread, which counts in
/// `VmLck` and against `RLIMIT_MEMLOCK` once memory is locked (measured:
/// 142 MB of `VmLck` for two samplers), while no sampler allocates after
/// it starts and the exporter's few threads do not contend.
pub fn lock_all_memory() -> io::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers; a refusal (0) leaves glibc's
    // default, which is only bigger.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
    mlockall(libc::MCL_CURRENT)?;
    match mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) {
        Err(err) if err.raw_os_error() == Some(libc::EINVAL) => {
            mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE)?;
            LOCKED.store(LOCKED_AT_ONCE, Ordering::Relaxed);
            Ok(())
        }
        Err(err) => Err(err),
        Ok(()) => {
            LOCKED.store(LOCKED_ON_FAULT, Ordering::Relaxed);
            Ok(())
        }
    }
}

/// What `trim_heap` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapTrim {
    /// `malloc_trim` alone: memory is not locked (or locked at once, on a
    /// kernel without `MCL_ONFAULT`, or a relock failed before).
    Trimmed,
    /// The heap was unlocked, trimmed and locked again.
    Relocked,
}

/// Gives the heap's free memory back to the kernel (glibc's
/// `malloc_trim`): after a burst of short-lived allocations (a range read
/// of the record, a plot, a flood of connections), freed memory would
/// otherwise stay in the process, resident and, under `mlockall`, locked.
/// Under `MCL_ONFAULT` the heap is unlocked for the trim and locked again
/// at once (pages still in use are locked again as they are; freed ones
/// are locked when next touched): between the two, pages of the heap
/// could in principle be reclaimed, which needs swap and memory pressure
/// within those microseconds; the samplers' buffers live there, so a
/// relock that fails is an error the caller must say, and the process is
/// then locked again as at start (`mlockall`), or trims stop unlocking.
/// Not for a sampler: it walks the heap under glibc's lock.
pub fn trim_heap() -> io::Result<HeapTrim> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let unlock = LOCKED.load(Ordering::Relaxed) == LOCKED_ON_FAULT;
    let heap = if unlock { heap_range() } else { None };
    if let Some((start, len)) = heap {
        // SAFETY: munlock takes an address range and changes no memory;
        // a part of it no longer mapped is an error we can ignore.
        unsafe { libc::munlock(start as *const libc::c_void, len) };
    }
    malloc_trim();
    if heap.is_none() {
        return Ok(HeapTrim::Trimmed);
    }
    // The heap as it is now: it may have grown or shrunk meanwhile.
    let relocked = match heap_range() {
        Some((start, len)) => {
            // SAFETY: mlock2 takes an address range and flags, and
            // changes no memory.
            let done =
                unsafe { libc::mlock2(start as *const libc::c_void, len, libc::MLOCK_ONFAULT) };
            done == 0
        }
        None => true,
    };
    if relocked {
        return Ok(HeapTrim::Relocked);
    }
    let err = io::Error::last_os_error();
    LOCKED.store(RELOCK_FAILED, Ordering::Relaxed);
    // Everything mapped locked again, as at start.
    mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT).map_err(|again| {
        io::Error::new(
            again.kind(),
            format!(
                "the heap could not be locked again after a trim ({err}), nor the process ({again})"
            ),
        )
    })?;
    Err(io::Error::new(
        err.kind(),
        format!(
            "the heap could not be locked again after a trim ({err}); the process was locked again as at start, and later trims leave the lock alone"
        ),
    ))
}

fn malloc_trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a size and only touches glibc's own heap.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The heap's address range (`[heap]` in `/proc/self/maps`, from the
/// lowest start to the highest end: an unlocked heap that grew has two
/// mappings), as start and length.
fn heap_range() -> Option<(usize, usize)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    heap_range_in(&maps)
}

fn heap_range_in(maps: &str) -> Option<(usize, usize)> {
    let mut range: Option<(usize, usize)> = None;
    for line in maps.lines().filter(|l| l.ends_with("[heap]")) {
        let span = line.split_whitespace().next()?;
        let (start, end) = span.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        range = Some(match range {
            Some((low, high)) => (low.min(start), high.max(end)),
            None => (start, end),
        });
    }
    range.map(|(start, end)| (start, end - start))
}

fn mlockall(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: mlockall takes flags only.
    if unsafe { libc::mlockall(flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_is_found_whole_in_the_maps() {
        // Addresses a 32-bit process can have too (the armv7 build runs
        // these tests).
        let maps = "00400000-00600000 r-xp 00000000 fe:00 1 /usr/bin/latencyd\n\
                    01c00000-02000000 rw-p 00000000 00:00 0                          [heap]\n\
                    02000000-02200000 rw-p 00000000 00:00 0                          [heap]\n\
                    b6f00000-b6f21000 rw-p 00000000 00:00 0 \n";
        assert_eq!(heap_range_in(maps), Some((0x01c0_0000, 0x60_0000)));
        assert_eq!(heap_range_in("7f00-7f10 rw-p 0 00:00 0 [stack]\n"), None);
    }

    #[test]
    fn a_trim_keeps_memory_usable_and_locked_as_it_was() {
        // Unlocked here (a unit test does not lock): malloc_trim alone.
        let kept: Vec<Vec<u8>> = (0..1_000).map(|i| vec![i as u8; 2_000]).collect();
        assert_eq!(trim_heap().unwrap(), HeapTrim::Trimmed);
        assert!(kept.iter().enumerate().all(|(i, v)| v[1_999] == i as u8));
    }
}
