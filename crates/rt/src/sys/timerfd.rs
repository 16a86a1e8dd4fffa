//! A periodic `timerfd` for the daemon's runtime thread: the collector's
//! tick as one file descriptor that epoll reports readable once per
//! period. tokio's own timers keep a 100 ms deadline on the second level
//! of their wheel and wake the thread twice for it (once to move it down a
//! level, once when due); a timerfd wakes it once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::timespec_of;

/// A non-blocking, close-on-exec `CLOCK_MONOTONIC` timerfd armed with an
/// absolute first expiry and a period (re-armed, it may also expire just
/// once). Closed when dropped.
#[derive(Debug)]
pub struct PeriodicTimerFd {
    fd: OwnedFd,
}

impl PeriodicTimerFd {
    /// First expiry at the absolute `first_ns` of `CLOCK_MONOTONIC`, then
    /// every `period_ns` (which must not be 0).
    pub fn new(first_ns: u64, period_ns: u64) -> io::Result<PeriodicTimerFd> {
        if period_ns == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a periodic timer needs a period above 0",
            ));
        }
        // SAFETY: timerfd_create takes a clock id and flags and returns a
        // new descriptor or -1.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor just returned to us and owned by
        // nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let timer = PeriodicTimerFd { fd };
        timer.rearm(first_ns, period_ns)?;
        Ok(timer)
    }

    /// Arms it anew: first expiry at the absolute `first_ns`, then every
    /// `period_ns`, or only once if `period_ns` is 0. Expirations not yet
    /// read are dropped.
    pub fn rearm(&self, first_ns: u64, period_ns: u64) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: timespec_of(period_ns),
            // An it_value of 0 would disarm it: the epoch's first instant
            // stands in for "already due".
            it_value: timespec_of(first_ns.max(1)),
        };
        // SAFETY: `fd` is a timerfd and `spec` a valid itimerspec; the old
        // value is not asked for.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The expirations since the last read (at least 1), or
    /// `ErrorKind::WouldBlock` when none is due yet.
    pub fn expirations(&self) -> io::Result<u64> {
        let mut count = 0u64;
        // SAFETY: reads at most 8 bytes into `count`, which has 8.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if n == std::mem::size_of::<u64>() as isize {
            Ok(count)
        } else if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a short read from a timerfd",
            ))
        }
    }
}

impl AsRawFd for PeriodicTimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::monotonic_now_ns;

    #[test]
    fn expires_once_per_period_and_says_when_nothing_is_due() {
        let now = monotonic_now_ns();
        let timer = PeriodicTimerFd::new(now + 200_000_000, 10_000_000).unwrap();
        let err = timer.expirations().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        std::thread::sleep(std::time::Duration::from_millis(230));
        // Due at +200, +210, +220 and +230 ms: at least 2 by the end of a
        // sleep of at least 230 ms, and the read consumed them.
        assert!(timer.expirations().unwrap() >= 2);
        assert_eq!(
            timer.expirations().unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }

    #[test]
    fn rearmed_once_it_expires_once_then_keeps_the_new_period() {
        let now = monotonic_now_ns();
        let timer = PeriodicTimerFd::new(now + 10_000_000_000, 10_000_000).unwrap();
        // Once, 20 ms from now, instead of the period far away.
        timer.rearm(now + 20_000_000, 0).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert_eq!(timer.expirations().unwrap(), 1);
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert_eq!(
            timer.expirations().unwrap_err().kind(),
            io::ErrorKind::WouldBlock,
            "a one-shot expiry does not repeat"
        );
        // Back to a period: due at once, then every 10 ms.
        timer.rearm(monotonic_now_ns(), 10_000_000).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(25));
        assert!(timer.expirations().unwrap() >= 2);
    }

    #[test]
    fn a_zero_period_is_refused() {
        let err = PeriodicTimerFd::new(1, 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
