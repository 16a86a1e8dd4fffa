//! What an error number means to the rest of latencyd, so that libc stays
//! in this module: the one the test-only faulty clock returns, and which
//! failed reads say nothing about the file read.

use std::io;

/// The error number of an I/O error, for the test-only faulty clock
/// (`clock::fault`), so that libc stays in this module.
pub const EIO: i32 = libc::EIO;

/// Error numbers the rest of latencyd tells apart: a tracefs file the
/// kernel holds busy, a link where none may be, a file that is not there.
pub const EBUSY: i32 = libc::EBUSY;
pub const ELOOP: i32 = libc::ELOOP;
pub const ENOENT: i32 = libc::ENOENT;

/// Whether a failed read says nothing about the file read: the process's
/// own limits (`EMFILE`, `ENFILE`, `ENOMEM`, `ENOBUFS`) or a passing fault
/// (`EAGAIN`, `EINTR`, `EBUSY`, `EIO`), as against the file not being
/// there or not being readable by this user, which are facts.
pub fn is_passing_error(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(
            libc::EMFILE
                | libc::ENFILE
                | libc::ENOMEM
                | libc::ENOBUFS
                | libc::EAGAIN
                | libc::EINTR
                | libc::EBUSY
                | libc::EIO
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_processs_own_limits_are_passing_and_a_missing_file_is_not() {
        assert!(is_passing_error(&io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(is_passing_error(&io::Error::from_raw_os_error(
            libc::ENOMEM
        )));
        assert!(!is_passing_error(&io::Error::from_raw_os_error(
            libc::ENOENT
        )));
        assert!(!is_passing_error(&io::Error::from_raw_os_error(
            libc::EACCES
        )));
        assert!(!is_passing_error(&io::Error::other("no errno")));
    }
}
