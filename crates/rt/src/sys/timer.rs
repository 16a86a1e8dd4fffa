//! cyclictest's `-x`: a POSIX interval timer that wakes its thread with
//! a signal. Kernel-facing like the rest of `sys`, so it lives here.

use std::io;
use std::mem::MaybeUninit;

use super::{ClockSource, current_tid, timespec_of};

/// A POSIX interval timer that signals the thread that made it (cyclictest's
/// `-x`): armed once to an absolute first expiry and a period, then waited
/// for with `sigwaitinfo`. The signal is blocked in that thread, so it is
/// only ever taken by the wait. Deleted when dropped.
#[derive(Debug)]
pub struct IntervalTimer {
    timer: libc::timer_t,
    signals: libc::sigset_t,
}

/// The signal an `IntervalTimer` sends (the first real-time signal glibc
/// leaves to programs).
fn interval_timer_signal() -> libc::c_int {
    libc::SIGRTMIN()
}

impl IntervalTimer {
    /// Makes a timer on `clock` that signals the calling thread. The signal
    /// must be blocked in it (`block_signals_in_current_thread`).
    pub fn for_current_thread(clock: ClockSource) -> io::Result<IntervalTimer> {
        // SAFETY: sigevent is plain data; all-zeroes is a valid start.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = interval_timer_signal();
        event.sigev_notify_thread_id = current_tid();
        let mut timer = MaybeUninit::<libc::timer_t>::uninit();
        // SAFETY: `event` is initialised and `timer` is a valid out-pointer,
        // written on success.
        let rc = unsafe { libc::timer_create(clock.to_libc(), &mut event, timer.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut signals = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the set, sigaddset adds a valid
        // signal number to it.
        let signals = unsafe {
            libc::sigemptyset(signals.as_mut_ptr());
            libc::sigaddset(signals.as_mut_ptr(), interval_timer_signal());
            signals.assume_init()
        };
        Ok(IntervalTimer {
            // SAFETY: timer_create returned 0, so `timer` was written.
            timer: unsafe { timer.assume_init() },
            signals,
        })
    }

    /// Arms the timer: first expiry at the absolute `first_ns`, then every
    /// `interval_ns`.
    pub fn arm(&self, first_ns: u64, interval_ns: u64) -> Result<(), i32> {
        let spec = libc::itimerspec {
            it_interval: timespec_of(interval_ns),
            it_value: timespec_of(first_ns),
        };
        // SAFETY: `self.timer` is a live timer and `spec` a valid itimerspec;
        // the old-value pointer may be null.
        let rc = unsafe {
            libc::timer_settime(self.timer, libc::TIMER_ABSTIME, &spec, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO));
        }
        Ok(())
    }

    /// Waits for the next expiry (expiries missed meanwhile are merged into
    /// one signal by the kernel).
    #[inline]
    pub fn wait(&self) -> Result<(), i32> {
        loop {
            // SAFETY: `self.signals` is an initialised set; the info pointer
            // may be null.
            let rc = unsafe { libc::sigwaitinfo(&self.signals, std::ptr::null_mut()) };
            if rc >= 0 {
                return Ok(());
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                err => return Err(err.unwrap_or(libc::EIO)),
            }
        }
    }
}

impl Drop for IntervalTimer {
    fn drop(&mut self) {
        // SAFETY: `self.timer` was made by timer_create and is deleted once.
        unsafe {
            libc::timer_delete(self.timer);
        }
    }
}

// SAFETY: a timer_t is a kernel id; the timer signals the thread named at
// creation whichever thread holds the handle.
unsafe impl Send for IntervalTimer {}
