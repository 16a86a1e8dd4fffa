//! The kernel-facing module: every `unsafe` block and every libc call of
//! latencyd lives here (and in `timer`, its POSIX interval timer).
//!
//! It owns thread affinity (`cpus`), scheduling policy and priority, memory locking,
//! the sleeps and the clocks, signal masks, resource limits, named pipes
//! and the `/dev/cpu_dma_latency` hold. Functions are thin:
//! they translate between Rust types and the C API and report failures as
//! `io::Error` so callers can say what failed and how to fix it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::mem::MaybeUninit;

use crate::cpulist::MAX_CPUS;

mod counter;
mod cpus;
mod errno;
mod memory;
mod sched;
mod time;
mod timer;
mod timerfd;

pub use counter::Counter;
pub use cpus::{
    cpu_set_of, current_cpu, online_cpus, pin_current_thread, process_affinity,
    set_current_thread_affinity, still_pinned_to,
};
pub use errno::{EBUSY, EIO, ELOOP, ENOENT, is_passing_error};
pub use memory::{HeapTrim, lock_all_memory, trim_heap};
pub use sched::{ThreadScheduling, set_thread_scheduling, thread_scheduling};
use time::timespec_of;
pub use time::{ClockSource, clock_now_ns, clock_sleep_ns, process_cpu_ns, thread_cpu_ns};
pub use timer::IntervalTimer;
pub use timerfd::PeriodicTimerFd;

/// `open(2)` flags the rest of latencyd opens files with (through
/// `OpenOptionsExt::custom_flags`), so that libc stays in this module:
/// `O_NONBLOCK` also opens a named pipe's writing end without waiting for
/// a reader (`measure -F`).
pub const O_CLOEXEC: i32 = libc::O_CLOEXEC;
pub const O_NOFOLLOW: i32 = libc::O_NOFOLLOW;
pub const O_NONBLOCK: i32 = libc::O_NONBLOCK;

/// The scheduling policies a sampler can run under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Fifo,
    RoundRobin,
    Other,
    /// `SCHED_BATCH` and `SCHED_IDLE`: cyclictest's `--policy` offers them.
    Batch,
    Idle,
}

impl Policy {
    /// The name cyclictest uses (`fifo`, `rr`, `other`, `batch`, `idle`).
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::RoundRobin => "rr",
            Policy::Other => "other",
            Policy::Batch => "batch",
            Policy::Idle => "idle",
        }
    }

    pub fn is_realtime(self) -> bool {
        matches!(self, Policy::Fifo | Policy::RoundRobin)
    }

    fn to_libc(self) -> libc::c_int {
        match self {
            Policy::Fifo => libc::SCHED_FIFO,
            Policy::RoundRobin => libc::SCHED_RR,
            Policy::Other => libc::SCHED_OTHER,
            Policy::Batch => libc::SCHED_BATCH,
            Policy::Idle => libc::SCHED_IDLE,
        }
    }

    /// The priority range the kernel accepts for this policy.
    pub fn priority_range(self) -> (i32, i32) {
        // SAFETY: both calls take a policy number and touch no memory.
        unsafe {
            (
                libc::sched_get_priority_min(self.to_libc()),
                libc::sched_get_priority_max(self.to_libc()),
            )
        }
    }
}

/// Reads `CLOCK_MONOTONIC` in nanoseconds. Served by the vDSO: no system
/// call, so it is allowed on the sampler's hot path.
#[inline]
pub fn monotonic_now_ns() -> u64 {
    let mut ts = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on
    // Linux, so the call cannot fail and fully initialises `ts`.
    let ts = unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, ts.as_mut_ptr());
        ts.assume_init()
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `deadline_ns` on `CLOCK_MONOTONIC` (absolute time, so a
/// late start of the call does not shift the deadline). Interrupted sleeps
/// are resumed to the same deadline. Returns the error number on failure.
#[inline]
pub fn sleep_until_ns(deadline_ns: u64) -> Result<(), i32> {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remaining
        // time pointer is unused and may be null.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        match rc {
            0 => return Ok(()),
            libc::EINTR => continue,
            err => return Err(err),
        }
    }
}

/// The resolution of `CLOCK_MONOTONIC` in nanoseconds.
pub fn clock_resolution_ns() -> io::Result<u64> {
    reported_resolution_ns(ClockSource::Monotonic)
}

/// The resolution the kernel reports for `clock` (`clock_getres`).
pub fn reported_resolution_ns(clock: ClockSource) -> io::Result<u64> {
    let mut ts = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `ts` is a valid out-pointer; it is read only on success.
    let rc = unsafe { libc::clock_getres(clock.to_libc(), ts.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: clock_getres returned 0, so `ts` was written.
    let ts = unsafe { ts.assume_init() };
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Sets the scheduling policy and priority of the calling thread only
/// (Linux applies `sched_setscheduler(0, …)` to the calling thread, not to
/// the whole process, so the other threads stay as they are).
pub fn set_current_thread_policy(policy: Policy, priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, policy.to_libc(), &param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the calling thread's timer slack: how much later than asked the
/// kernel may end its sleeps so as to batch wake-ups. The default is
/// 50 µs; a sampler under `SCHED_OTHER` would measure that slack rather
/// than its scheduling latency. (Real-time threads get no slack anyway.)
pub fn set_current_thread_timer_slack_ns(slack_ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and applies to
    // the calling thread only.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns as libc::c_ulong) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's current policy and priority, as the kernel reports
/// them, so that what is claimed can be checked.
pub fn current_thread_policy() -> io::Result<(i32, i32)> {
    // SAFETY: pid 0 is the calling thread.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid out-pointer.
    let rc = unsafe { libc::sched_getparam(0, &mut param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((policy, param.sched_priority))
}

/// The scheduling policy of thread `tid` by its kernel name
/// (`SCHED_FIFO`, ...), or `None` when the thread is gone.
pub fn thread_policy_name(tid: i32) -> Option<&'static str> {
    if tid <= 0 {
        return None;
    }
    // SAFETY: sched_getscheduler reads no memory of ours; a thread that
    // does not exist is an error return.
    let policy = unsafe { libc::sched_getscheduler(tid) };
    Some(match policy & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_FIFO => "SCHED_FIFO",
        libc::SCHED_RR => "SCHED_RR",
        libc::SCHED_OTHER => "SCHED_OTHER",
        libc::SCHED_BATCH => "SCHED_BATCH",
        libc::SCHED_IDLE => "SCHED_IDLE",
        6 => "SCHED_DEADLINE",
        _ => return None,
    })
}

/// The libc number of a policy, to compare with `current_thread_policy`.
pub fn policy_number(policy: Policy) -> i32 {
    policy.to_libc()
}

/// 64 random bits from the kernel (`getrandom`), for names others must not
/// guess (a temporary file's); falls back to the clock's nanoseconds
/// where the call is refused.
pub fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: the buffer is valid for its length; flags 0 blocks only
    // until the kernel's pool is first initialised.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n == bytes.len() as isize {
        u64::from_ne_bytes(bytes)
    } else {
        monotonic_now_ns() ^ u64::from(std::process::id()).rotate_left(32)
    }
}

/// Touches `bytes` of the calling thread's stack so that those pages are
/// mapped (and, under `mlockall`, locked) before the thread turns
/// real-time. The caller must leave that much stack free.
#[inline(never)]
pub fn prefault_stack<const BYTES: usize>() {
    let mut buffer = [0u8; BYTES];
    // Writing through black_box keeps the compiler from removing the array.
    std::hint::black_box(&mut buffer);
}

/// Blocks every blockable signal in the calling thread, so that signals
/// are delivered to the main thread and never interrupt a sampler.
pub fn block_signals_in_current_thread() -> io::Result<()> {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `set` is initialised by sigfillset before it is read, and
    // pthread_sigmask reads it and ignores the null old-set pointer.
    let rc = unsafe {
        libc::sigfillset(set.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// The kernel's id of the calling thread (what `ps -L` and cyclictest show).
pub fn current_tid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// The most latencyd reads of a one-line kernel file here: a CPU list of
/// 8,192 CPUs written one by one is under 48 KiB.
const MAX_SMALL_FILE_BYTES: u64 = 64 * 1024;

/// A one-line procfs or sysfs file, if readable and within
/// [`MAX_SMALL_FILE_BYTES`] (a longer one is not taken, rather than cut).
pub(crate) fn read_small(path: &str) -> Option<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_SMALL_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .ok()?;
    (text.len() as u64 <= MAX_SMALL_FILE_BYTES).then_some(text)
}

/// A resource limit's soft value; `None` means unlimited. The 64-bit call,
/// whose values are 64 bits on 32-bit targets too (armv7's `rlim_t` is 32).
fn soft_limit(resource: libc::__rlimit_resource_t) -> io::Result<Option<u64>> {
    let mut limit = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid out-pointer.
    let rc = unsafe { libc::getrlimit64(resource, &mut limit) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((limit.rlim_cur != libc::RLIM64_INFINITY).then_some(limit.rlim_cur))
}

/// `RLIMIT_RTPRIO`: the highest real-time priority an unprivileged process
/// may set (`None`: unlimited).
pub fn rtprio_limit() -> io::Result<Option<u64>> {
    soft_limit(libc::RLIMIT_RTPRIO)
}

/// `RLIMIT_MEMLOCK` in bytes (`None`: unlimited).
pub fn memlock_limit() -> io::Result<Option<u64>> {
    soft_limit(libc::RLIMIT_MEMLOCK)
}

/// What `uname(2)` reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uname {
    pub sysname: String,
    pub nodename: String,
    pub release: String,
    pub version: String,
    pub machine: String,
}

pub fn uname() -> io::Result<Uname> {
    let mut raw = MaybeUninit::<libc::utsname>::uninit();
    // SAFETY: `raw` is a valid out-pointer; it is read only on success.
    let rc = unsafe { libc::uname(raw.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: uname returned 0, so every field holds a NUL-terminated string.
    let raw = unsafe { raw.assume_init() };
    let field = |chars: &[libc::c_char]| {
        let bytes: Vec<u8> = chars
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok(Uname {
        sysname: field(&raw.sysname),
        nodename: field(&raw.nodename),
        release: field(&raw.release),
        version: field(&raw.version),
        machine: field(&raw.machine),
    })
}

/// Creates a named pipe at `path` (mode 0666 less the umask, as cyclictest
/// makes its `-F` pipe).
pub fn make_fifo(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    // SAFETY: `path` is a valid NUL-terminated string for the call's length.
    let rc = unsafe { libc::mkfifo(path.as_ptr(), 0o666) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A hold on `/dev/cpu_dma_latency`: while the file stays open the kernel
/// keeps CPUs out of idle states whose exit latency exceeds the value
/// written. Dropping the hold closes the file and releases the request.
#[derive(Debug)]
pub struct CpuDmaLatencyHold {
    _file: File,
    pub latency_us: i32,
}

pub const CPU_DMA_LATENCY_PATH: &str = "/dev/cpu_dma_latency";

impl CpuDmaLatencyHold {
    pub fn acquire(latency_us: i32) -> io::Result<CpuDmaLatencyHold> {
        let mut file = OpenOptions::new().write(true).open(CPU_DMA_LATENCY_PATH)?;
        // The PM QoS interface takes a binary 32-bit value in host order.
        file.write_all(&latency_us.to_ne_bytes())?;
        Ok(CpuDmaLatencyHold {
            _file: file,
            latency_us,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_advances_and_sleep_reaches_its_deadline() {
        let before = monotonic_now_ns();
        let deadline = before + 2_000_000;
        sleep_until_ns(deadline).unwrap();
        assert!(monotonic_now_ns() >= deadline);
    }

    #[test]
    fn sleep_to_a_past_deadline_returns_at_once() {
        let now = monotonic_now_ns();
        sleep_until_ns(now.saturating_sub(1_000_000_000)).unwrap();
    }

    #[test]
    fn policy_ranges_are_the_kernels() {
        assert_eq!(Policy::Fifo.priority_range(), (1, 99));
        assert_eq!(Policy::RoundRobin.priority_range(), (1, 99));
        assert_eq!(Policy::Other.priority_range(), (0, 0));
    }

    #[test]
    fn process_affinity_is_not_empty_and_pinning_works() {
        let cpus = process_affinity().unwrap();
        assert!(!cpus.is_empty());
        let cpu = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(process_affinity().unwrap(), vec![cpu]);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(MAX_CPUS).is_err());
    }

    #[test]
    fn uname_reports_linux() {
        let u = uname().unwrap();
        assert_eq!(u.sysname, "Linux");
        assert!(!u.release.is_empty());
    }

    #[test]
    fn timer_slack_is_set_for_the_calling_thread_only() {
        // Each thread asks for its own slack: reading another thread's
        // /proc/TID/timerslack_ns needs CAP_SYS_NICE.
        // SAFETY: PR_GET_TIMERSLACK takes no argument and returns the
        // calling thread's slack.
        let own_slack = || unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
        let before = own_slack();
        assert!(before > 1, "the default slack is 50 us, not {before}");
        let worker = std::thread::spawn(move || {
            let inherited = own_slack();
            set_current_thread_timer_slack_ns(1).unwrap();
            (inherited, own_slack())
        });
        let (inherited, set) = worker.join().unwrap();
        assert_eq!(inherited, before);
        assert_eq!(set, 1);
        assert_eq!(own_slack(), before, "other threads keep theirs");
    }

    #[test]
    fn clock_resolution_is_sane() {
        let res = clock_resolution_ns().unwrap();
        assert!((1..=10_000_000).contains(&res), "{res}");
    }
}
