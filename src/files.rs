//! Files opened as from a stranger. The capture and record directories
//! may be shared (a drop-in gives the daemon CAP_DAC_OVERRIDE; a group may
//! write there), and a file a report or a plot reads may come from
//! anywhere: so a file read from a directory is never a symbolic link
//! (`O_NOFOLLOW`), is a regular file, and is read only up to a bound; a
//! file latencyd creates is created new (`O_EXCL`, `O_NOFOLLOW`); and a
//! directory others may write to is said by name. (A symlink to
//! `/etc/shadow` in the capture directory was served as a capture.)

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
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    options.custom_flags(flags);
    let file = options.open(path).map_err(|err| {
        if err.raw_os_error() == Some(libc::ELOOP) {
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

/// Creates `path` new, for appending: an existing file or link there is
/// an error (`AlreadyExists`), never truncated or followed.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o640)
        .open(path)
}

/// Opens `path` to append, creating it new if absent: never through a
/// link, and only a regular file.
pub fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
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
}
