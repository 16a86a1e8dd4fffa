//! tracefs as latencyd shares it with every other tracing user on the
//! host: where it is mounted, the instances latencyd owns there
//! (`instance`), the mark a one-shot run leaves in the top-level trace
//! (`mark`), and the capabilities the kernel does or does not offer.
//!
//! tracefs is global to the host. Other latencyd processes (`measure`
//! beside the daemon, a second daemon, a test run), rtla, trace-cmd and
//! perf use it at the same time, so latencyd works in private instances
//! named after their owner, removes only its own and those whose owner is
//! gone, and checks that nobody changed them behind its back.

pub mod format;
pub mod instance;
mod mark;
pub mod ring;

use crate::rt::sys;
use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use instance::{Check, Instance, Role};
pub use mark::TraceMark;

/// Where tracefs is mounted by default.
pub const DEFAULT_TRACEFS: &str = "/sys/kernel/tracing";
/// Where tracefs is found when it is not where it was configured to be
/// and that was the default (older systems mount it under debugfs).
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// One thing the kernel or hardware may or may not offer, and what
/// latencyd makes of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    pub name: String,
    pub available: bool,
    pub detail: String,
}

impl Capability {
    pub fn new(name: &str, available: bool, detail: impl Into<String>) -> Capability {
        Capability {
            name: name.to_string(),
            available,
            detail: detail.into(),
        }
    }
}

/// Finds tracefs for `who` (`forensics`, `observe`): `configured`, or
/// for the default, the debugfs mount. The errors name the fix.
pub fn locate_for(configured: &Path, who: &str) -> Result<PathBuf, String> {
    match fs::metadata(configured.join("instances")) {
        Ok(meta) if meta.is_dir() => return Ok(configured.to_path_buf()),
        Err(err) if err.kind() == ErrorKind::PermissionDenied => {
            return Err(format!(
                "cannot access tracefs at {} (permission denied): {who} needs root, or \
                 access to tracefs (see deploy/systemd/latencyd-{who}.conf)",
                configured.display()
            ));
        }
        _ => {}
    }
    let fallback = Path::new(DEBUGFS_TRACING);
    if configured == Path::new(DEFAULT_TRACEFS) && fallback.join("instances").is_dir() {
        return Ok(fallback.to_path_buf());
    }
    Err(format!(
        "tracefs is not mounted at {} (mount it with `mount -t tracefs nodev {}`, or set \
         forensics.tracefs to where it is)",
        configured.display(),
        configured.display()
    ))
}

/// Who runs one of `tracers` on this tracefs: the top-level buffer
/// (named `top`) and every instance but `except`, each with its tracer,
/// e.g. `("timerlat_hist", "timerlat")` for an rtla run.
pub fn tracer_users(root: &Path, tracers: &[&str], except: Option<&str>) -> Vec<(String, String)> {
    let read = |dir: &Path| {
        read_text(&dir.join("current_tracer"))
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| tracers.contains(&t.as_str()))
    };
    let mut users: Vec<(String, String)> = read(root)
        .map(|t| ("top".to_string(), t))
        .into_iter()
        .collect();
    let mut names: Vec<String> = fs::read_dir(root.join("instances"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| Some(name.as_str()) != except)
        .collect();
    names.sort();
    for name in names {
        if let Some(tracer) = read(&root.join("instances").join(&name)) {
            users.push((name, tracer));
        }
    }
    users
}

/// A tracefs text file, of at most [`MAX_TRACEFS_TEXT_BYTES`] (the
/// largest, `available_events` and the event formats, are tens of KiB).
pub fn read_text(path: &Path) -> Result<String, String> {
    crate::files::read_kernel_text(path, MAX_TRACEFS_TEXT_BYTES).map_err(|err| match err.kind() {
        ErrorKind::InvalidData => err.to_string(),
        _ => format!("cannot read {}: {err}", path.display()),
    })
}

/// The most latencyd reads of one tracefs text file.
pub const MAX_TRACEFS_TEXT_BYTES: u64 = 16 << 20;

/// The size of one ring-buffer page of the instance in `dir` (4 KiB
/// where the kernel does not say: before `buffer_subbuf_size_kb`).
pub fn page_size(dir: &Path) -> usize {
    read_text(&dir.join("buffer_subbuf_size_kb"))
        .ok()
        .and_then(|kb| kb.trim().parse::<usize>().ok())
        .map_or(4096, |kb| kb * 1024)
}

/// Each of `cpus`' `per_cpu/cpuN/trace_pipe_raw` in the instance `dir`,
/// opened non-blocking: binary pages, consumed as they are read.
pub fn raw_readers(dir: &Path, cpus: &[usize]) -> Result<Vec<(usize, File)>, String> {
    cpus.iter()
        .map(|&cpu| {
            let path = dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(sys::O_NONBLOCK)
                .open(&path)
                .map(|file| (cpu, file))
                .map_err(|err| format!("cannot open {}: {err}", path.display()))
        })
        .collect()
}

/// `tracing_cpumask` for `cpus`: hexadecimal, 32 bits a group, groups
/// separated by commas, most significant first.
pub fn cpumask(cpus: &[usize]) -> String {
    let groups = cpus.iter().max().map_or(1, |&m| m / 32 + 1);
    let mut words = vec![0u32; groups];
    for &cpu in cpus {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    words
        .iter()
        .rev()
        .enumerate()
        .map(|(i, w)| {
            if i == 0 {
                format!("{w:x}")
            } else {
                format!("{w:08x}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumasks_are_written_as_the_kernel_reads_them() {
        assert_eq!(cpumask(&[0, 1]), "3");
        assert_eq!(cpumask(&[1]), "2");
        assert_eq!(cpumask(&[0, 33]), "2,00000001");
        assert_eq!(cpumask(&[63, 64]), "1,80000000,00000000");
    }

    #[test]
    fn users_of_a_tracer_are_found_at_the_top_and_in_instances() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("current_tracer"), "nop\n").unwrap();
        for (name, tracer) in [
            ("timerlat_hist", "timerlat"),
            ("mine", "timerlat"),
            ("other", "function"),
        ] {
            fs::create_dir_all(root.join("instances").join(name)).unwrap();
            fs::write(
                root.join("instances").join(name).join("current_tracer"),
                tracer,
            )
            .unwrap();
        }
        let found = tracer_users(root, &["timerlat", "osnoise"], Some("mine"));
        assert_eq!(
            found,
            [("timerlat_hist".to_string(), "timerlat".to_string())]
        );
        fs::write(root.join("current_tracer"), "osnoise\n").unwrap();
        assert_eq!(tracer_users(root, &["osnoise"], None)[0].0, "top");
    }

    #[test]
    fn a_missing_tracefs_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let err = locate_for(dir.path(), "forensics").unwrap_err();
        assert!(err.contains("not mounted"), "{err}");
        assert!(err.contains("forensics.tracefs"), "{err}");
    }
}
