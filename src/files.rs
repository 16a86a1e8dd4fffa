//! Files opened as from a stranger. The capture and record directories
//! may be shared (a drop-in gives the daemon CAP_DAC_OVERRIDE; a group may
//! write there), and a file a report or a plot reads may come from
//! anywhere: so a file read from a directory is never a symbolic link
//! (`O_NOFOLLOW`), is a regular file, and is read only up to a bound; a
//! file latencyd creates is created new (`O_EXCL`, `O_NOFOLLOW`); and a
//! directory others may write to is said by name. (A symlink to
//! `/etc/shadow` in the capture directory was served as a capture.)

use crate::rt::sys;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Whether a symbolic link at the path itself is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// A file found by listing a directory: a link is refused.
    Refuse,
    /// A path a person named on the command line: followed, as `cat`
    /// follows it.
    Follow,
}

/// Opens `path` for reading: a regular file (not a directory, a FIFO, a
/// device), not a symbolic link unless `links` follows them.
pub fn open_regular(path: &Path, links: Links) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    // O_NONBLOCK: opening a FIFO someone put there must not hang.
    let mut flags = sys::O_NONBLOCK | sys::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= sys::O_NOFOLLOW;
    }
    options.custom_flags(flags);
    let file = options.open(path).map_err(|err| {
        if err.raw_os_error() == Some(sys::ELOOP) {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is a symbolic link, which latencyd does not follow in its directories",
                    path.display()
                ),
            )
        } else {
            err
        }
    })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

/// Reads `path` whole, if it is a regular file of at most `max_bytes`;
/// the error names the path and what is wrong with it.
pub fn read_bounded(path: &Path, links: Links, max_bytes: u64) -> Result<Vec<u8>, String> {
    let file = open_regular(path, links).map_err(|err| match err.kind() {
        io::ErrorKind::InvalidInput => err.to_string(),
        _ => format!("cannot read {}: {err}", path.display()),
    })?;
    let size = file.metadata().map(|m| m.size()).unwrap_or(0);
    if size > max_bytes {
        return Err(format!(
            "{} takes {size} bytes, more than the {max_bytes} latencyd reads of such a file",
            path.display()
        ));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // A file that grows while it is read is cut at the bound.
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!(
            "{} grew past {max_bytes} bytes while it was read",
            path.display()
        ));
    }
    Ok(bytes)
}

/// `read_bounded` as UTF-8 text.
pub fn read_text_bounded(path: &Path, links: Links, max_bytes: u64) -> Result<String, String> {
    String::from_utf8(read_bounded(path, links, max_bytes)?)
        .map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// The most latencyd reads of a small kernel-made file (a `/proc/PID`
/// entry, a sysfs value, a tracefs setting).
pub const MAX_KERNEL_FILE_BYTES: u64 = 1 << 20;

/// Reads a text file the kernel makes (procfs, sysfs, tracefs), of at
/// most `max_bytes`. Such files report no size, so the read stops at the
/// bound, and a longer file is an error (`InvalidData`, naming the path
/// and the bound), never a value cut short. Reads go in one large buffer:
/// tracefs's `events/header_page` answers a small first read with its
/// start and the next with nothing (std's `read_to_string` probes with
/// 32 bytes when the size is 0). The error keeps its errno, for callers
/// that tell a passing failure from an absent file.
pub fn read_kernel_text(path: &Path, max_bytes: u64) -> io::Result<String> {
    let mut file = File::open(path)?;
    let cap = max_bytes.saturating_add(1) as usize;
    let mut bytes = vec![0u8; cap.min(64 * 1024)];
    let mut len = 0;
    loop {
        match file.read(&mut bytes[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if len >= cap {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{} is longer than the {max_bytes} bytes latencyd reads of it",
                            path.display()
                        ),
                    ));
                }
                if len == bytes.len() {
                    bytes.resize((len * 2).min(cap), 0);
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    bytes.truncate(len);
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text", path.display()),
        )
    })
}

/// `/proc/cpuinfo` (empty when unreadable), within 16 MiB: about 1.5 KiB
/// a CPU, so 8,192 CPUs.
pub fn read_cpuinfo() -> String {
    read_kernel_text(Path::new("/proc/cpuinfo"), 16 << 20).unwrap_or_default()
}

/// The last `max_bytes` of a regular file (all of it when shorter), as
/// text with anything not UTF-8 replaced: where a program's summary and
/// last words are, however much it wrote before them.
pub fn read_tail(path: &Path, max_bytes: u64) -> io::Result<String> {
    use std::io::{Seek, SeekFrom};
    let mut file = open_regular(path, Links::Refuse)?;
    let size = file.metadata()?.size();
    file.seek(SeekFrom::Start(size.saturating_sub(max_bytes)))?;
    let mut bytes = Vec::new();
    file.take(max_bytes).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Creates `path` new, for appending: an existing file or link there is
/// an error (`AlreadyExists`), never truncated or followed.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create_new(true)
        .custom_flags(sys::O_NOFOLLOW | sys::O_CLOEXEC)
        .mode(0o640)
        .open(path)
}

/// Opens `path` to append, creating it new if absent: never through a
/// link, and only a regular file.
pub fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(sys::O_NOFOLLOW | sys::O_CLOEXEC)
        .mode(0o640)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

/// Why `dir` is open to others, if it is: writable by its group or by
/// everyone (where anyone could put a link or a forged file in it).
pub fn loose_permissions(dir: &Path) -> Option<String> {
    let meta = std::fs::metadata(dir).ok()?;
    let mode = meta.permissions().mode() & 0o7777;
    let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (_, true) => "everyone",
        (true, false) => "its group",
        (false, false) => return None,
    };
    Some(format!(
        "{} is writable by {who} (mode {mode:o}): anyone who may write there can put files \
         latencyd reads; chmod go-w {}",
        dir.display(),
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_big_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("a.json");
        std::fs::write(&plain, b"{}").unwrap();
        let link = dir.path().join("b.json");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        assert_eq!(read_bounded(&plain, Links::Refuse, 10).unwrap(), b"{}");
        let err = read_bounded(&link, Links::Refuse, 1 << 20).unwrap_err();
        assert!(err.contains("is a symbolic link"), "{err}");
        assert!(
            read_bounded(&link, Links::Follow, 1 << 20).is_ok(),
            "named: followed"
        );
        let err = read_bounded(&plain, Links::Refuse, 1).unwrap_err();
        assert!(err.contains("more than the 1 latencyd reads"), "{err}");
        let err = read_bounded(dir.path(), Links::Refuse, 10).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        let err = read_text_bounded(&dir.path().join("none"), Links::Refuse, 10).unwrap_err();
        assert!(err.contains("cannot read"), "{err}");
    }

    #[test]
    fn created_files_are_new_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("tmp");
        let target = dir.path().join("target");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_new(&link).is_err(), "a link is there");
        assert!(!target.exists(), "and was not followed");
        assert!(open_append(&link).is_err());
        let fresh = dir.path().join("fresh");
        create_new(&fresh).unwrap();
        assert_eq!(
            create_new(&fresh).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert!(open_append(&fresh).is_ok());
    }

    #[test]
    fn a_directory_others_may_write_to_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let set = |mode| {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap()
        };
        set(0o750);
        assert_eq!(loose_permissions(dir.path()), None);
        set(0o770);
        assert!(
            loose_permissions(dir.path())
                .unwrap()
                .contains("by its group")
        );
        set(0o1777);
        let said = loose_permissions(dir.path()).unwrap();
        assert!(
            said.contains("by everyone") && said.contains("chmod go-w"),
            "{said}"
        );
    }

    #[test]
    fn kernel_text_is_read_whole_within_its_bound_and_refused_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("stat");
        std::fs::write(&file, "a".repeat(200_000)).unwrap();
        assert_eq!(read_kernel_text(&file, 200_000).unwrap().len(), 200_000);
        let err = read_kernel_text(&file, 199_999).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(
            err.to_string().contains("longer than the 199999 bytes"),
            "{err}"
        );
        // A real kernel file of size 0 in stat: procfs.
        let online = read_kernel_text(Path::new("/proc/self/stat"), MAX_KERNEL_FILE_BYTES);
        assert!(online.unwrap().contains(')'));
        let missing = read_kernel_text(&dir.path().join("gone"), 10).unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(sys::ENOENT));
    }

    #[test]
    fn a_tail_is_the_end_of_a_long_file_and_all_of_a_short_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out");
        let mut text = "x".repeat(3_000_000);
        text.push_str("Time: 0.123\n");
        std::fs::write(&file, &text).unwrap();
        let tail = read_tail(&file, 1_000).unwrap();
        assert_eq!(tail.len(), 1_000);
        assert!(tail.ends_with("Time: 0.123\n"));
        std::fs::write(&file, "short").unwrap();
        assert_eq!(read_tail(&file, 1_000).unwrap(), "short");
    }
}
