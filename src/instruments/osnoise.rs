//! The `osnoise/` settings timerlat runs by. They are global to the host,
//! not per instance: `cpus`, `timerlat_period_us`, `stop_tracing_us`,
//! `stop_tracing_total_us`, `print_stack` and the flags of `options` apply
//! to every timerlat and osnoise user at once, rtla's included. So latencyd
//! reads them all when it starts, writes only those whose value is not
//! the one it needs, reads back what it wrote at every check (a change is
//! someone else retuning the tracer under it, said and never fought), and
//! at the end sets back what it changed, unless someone changed it since.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

// One large read: the kernel answers `osnoise/cpus` with EINVAL when the
// buffer is smaller than the list, and std's `read_to_string` starts with
// a small one.
use crate::tracefs::read_text;

/// The files latencyd reads and may write (`print_stack` and
/// `timerlat_period_us` exist only where timerlat is built in).
pub const FILES: [&str; 8] = [
    "cpus",
    "options",
    "period_us",
    "runtime_us",
    "stop_tracing_us",
    "stop_tracing_total_us",
    "timerlat_period_us",
    "print_stack",
];

/// The settings as read: file name to its trimmed text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings(pub BTreeMap<String, String>);

impl Settings {
    /// Reads every file of `FILES` that `dir` (an `osnoise/` directory)
    /// has; those it lacks or cannot read are left out.
    pub fn read(dir: &Path) -> Settings {
        Settings::read_files(dir, &FILES)
    }

    /// Reads each of `files` that `dir` has.
    pub fn read_files(dir: &Path, files: &[&str]) -> Settings {
        Settings(
            files
                .iter()
                .filter_map(|name| {
                    let text = read_text(&dir.join(name)).ok()?;
                    Some((name.to_string(), text.trim().to_string()))
                })
                .collect(),
        )
    }

    pub fn get(&self, file: &str) -> Option<&str> {
        self.0.get(file).map(String::as_str)
    }

    /// Whether the flag `name` of `options` is set (`NAME`, not `NO_NAME`).
    pub fn option(&self, name: &str) -> Option<bool> {
        let options = self.get("options")?;
        options
            .split_whitespace()
            .find_map(|flag| match flag.strip_prefix("NO_") {
                Some(rest) if rest == name => Some(false),
                None if flag == name => Some(true),
                _ => None,
            })
    }
}

/// One setting latencyd needs: what it was, what latencyd needs it to
/// read (as the kernel reads it back), and whether latencyd wrote it (a
/// setting already right is watched, not written, and not set back).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    file: String,
    /// For a flag of `options`, the flag's name.
    flag: Option<String>,
    before: String,
    ours: String,
    wrote: bool,
}

/// The settings held for a timerlat run: what latencyd changed, set back
/// by `restore` (or on drop).
#[derive(Debug)]
pub struct Guard {
    dir: PathBuf,
    prefix: String,
    files: Vec<String>,
    /// As read when the guard was taken.
    pub before: Settings,
    changes: Vec<Change>,
    restored: bool,
}

impl Guard {
    pub fn take(dir: &Path) -> Guard {
        Guard::take_files(dir, &FILES, "osnoise/")
    }

    /// A guard over `files` of `dir`, named `prefix` + file in what it
    /// says (the hwlat tracer's settings are in `hwlat_detector/` and the
    /// top-level `tracing_thresh`).
    pub fn take_files(dir: &Path, files: &[&str], prefix: &str) -> Guard {
        Guard {
            dir: dir.to_path_buf(),
            prefix: prefix.to_string(),
            files: files.iter().map(ToString::to_string).collect(),
            before: Settings::read_files(dir, files),
            changes: Vec::new(),
            restored: false,
        }
    }

    fn now(&self) -> Settings {
        let files: Vec<&str> = self.files.iter().map(String::as_str).collect();
        Settings::read_files(&self.dir, &files)
    }

    fn read(&self, file: &str) -> Option<String> {
        read_text(&self.dir.join(file))
            .ok()
            .map(|t| t.trim().to_string())
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        fs::write(self.dir.join(file), value).map_err(|err| {
            format!(
                "cannot write {value:?} to {}: {err}",
                self.dir.join(file).display()
            )
        })
    }

    /// Sets `file` to `value` unless it reads so already (`same` compares
    /// the kernel's form with ours: `0-3` and `0,1,2,3` are one list).
    pub fn set(
        &mut self,
        file: &str,
        value: &str,
        same: fn(&str, &str) -> bool,
    ) -> Result<(), String> {
        let Some(before) = self.read(file) else {
            return Err(format!(
                "{} is missing: this kernel's timerlat cannot be set up",
                self.dir.join(file).display()
            ));
        };
        let wrote = !same(&before, value);
        if wrote {
            self.write(file, value)?;
        }
        let ours = self.read(file).unwrap_or_else(|| value.to_string());
        self.changes.push(Change {
            file: file.to_string(),
            flag: None,
            before,
            ours,
            wrote,
        });
        Ok(())
    }

    /// Sets the flag `name` of `options` on or off, unless it is already.
    pub fn set_option(&mut self, name: &str, on: bool) -> Result<(), String> {
        let now = self.now();
        let Some(state) = now.option(name) else {
            return Err(format!(
                "{} has no flag {name}: this kernel's timerlat cannot be set up so",
                self.dir.join("options").display()
            ));
        };
        let wrote = state != on;
        if wrote {
            self.write("options", &flag(name, on))?;
        }
        self.changes.push(Change {
            file: "options".to_string(),
            flag: Some(name.to_string()),
            before: flag(name, state),
            ours: flag(name, on),
            wrote,
        });
        Ok(())
    }

    /// What someone else changed among the settings latencyd needs, as
    /// "file: now X, latencyd set Y". Empty while all hold.
    pub fn changed_behind(&self) -> Vec<String> {
        let now = self.now();
        self.changes
            .iter()
            .filter_map(|c| {
                let (value, ours) = match &c.flag {
                    Some(name) => (now.option(name).map(|on| flag(name, on))?, c.ours.clone()),
                    None => (now.get(&c.file)?.to_string(), c.ours.clone()),
                };
                (value != ours)
                    .then(|| format!("osnoise/{}: now {value}, latencyd set {ours}", c.file))
            })
            .collect()
    }

    /// The settings latencyd changed, in the order it changed them.
    pub fn changes(&self) -> Vec<String> {
        self.changes
            .iter()
            .filter(|c| c.wrote)
            .map(|c| format!("{}: {} -> {}", self.name(&c.file), c.before, c.ours))
            .collect()
    }

    /// Sets back every setting latencyd changed, newest first, unless
    /// someone changed it since (theirs is kept and said).
    pub fn restore(&mut self) -> Vec<String> {
        self.restored = true;
        let changed: Vec<String> = self.changed_behind();
        let mut notes = Vec::new();
        for c in self.changes.iter().rev().filter(|c| c.wrote) {
            if changed
                .iter()
                .any(|line| line.starts_with(&format!("osnoise/{}:", c.file)))
            {
                notes.push(format!(
                    "osnoise/{} left as another program set it (latencyd had set {})",
                    c.file, c.ours
                ));
                continue;
            }
            if let Err(err) = self.write(&c.file, &c.before) {
                notes.push(format!("cannot set osnoise/{} back: {err}", c.file));
            }
        }
        notes
    }
}

impl Guard {
    /// `file` as the notes name it: `osnoise/cpus`, `hwlat_detector/width`,
    /// `tracing_thresh`.
    fn name(&self, file: &str) -> String {
        format!("{}{file}", self.prefix)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.restored {
            let _ = self.restore();
        }
    }
}

fn flag(name: &str, on: bool) -> String {
    if on {
        name.to_string()
    } else {
        format!("NO_{name}")
    }
}

/// Two numbers are the same value.
pub fn same_number(a: &str, b: &str) -> bool {
    a.trim().parse::<u64>().ok() == b.trim().parse::<u64>().ok()
}

/// Two CPU lists name the same CPUs.
pub fn same_cpus(a: &str, b: &str) -> bool {
    let parse = |s: &str| crate::cpulist::parse_cpu_list(s.trim()).ok();
    parse(a).is_some() && parse(a) == parse(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of a captured kernel's `osnoise/` files in a temporary
    /// directory: a plain file keeps what is written to it, where the
    /// kernel's `options` applies one flag a write.
    fn captured(kernel: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let from = format!(
            "{}/tests/data/kernels/{kernel}/tracefs/osnoise",
            env!("CARGO_MANIFEST_DIR")
        );
        for entry in fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        dir
    }

    #[test]
    fn every_rt_kernels_settings_are_read_with_their_defaults() {
        for kernel in [
            "6.1-rt-amd64",
            "6.1-rt-arm64",
            "6.12-rt-amd64",
            "6.12-rt-arm64",
        ] {
            let dir = captured(kernel);
            let s = Settings::read(dir.path());
            assert_eq!(s.get("timerlat_period_us"), Some("1000"), "{kernel}");
            assert_eq!(s.get("stop_tracing_us"), Some("0"), "{kernel}");
            assert_eq!(s.get("cpus"), Some("0-1"), "{kernel}");
            assert_eq!(s.option("OSNOISE_WORKLOAD"), Some(true), "{kernel}");
            assert_eq!(s.option("PANIC_ON_STOP"), Some(false), "{kernel}");
            assert_eq!(s.option("NO_SUCH"), None, "{kernel}");
        }
    }

    #[test]
    fn only_what_differs_is_written_and_all_of_it_is_set_back() {
        let dir = captured("6.12-rt-amd64");
        let mut guard = Guard::take(dir.path());
        guard.set("cpus", "0,1", same_cpus).unwrap();
        guard.set("timerlat_period_us", "500", same_number).unwrap();
        guard.set("stop_tracing_us", "0", same_number).unwrap();
        assert_eq!(guard.changes(), ["osnoise/timerlat_period_us: 1000 -> 500"]);
        assert!(guard.changed_behind().is_empty());
        // rtla retunes the period under latencyd.
        fs::write(dir.path().join("timerlat_period_us"), "100").unwrap();
        assert_eq!(
            guard.changed_behind(),
            ["osnoise/timerlat_period_us: now 100, latencyd set 500"]
        );
        // A setting already right is watched too, and never written back.
        fs::write(dir.path().join("stop_tracing_us"), "10").unwrap();
        assert_eq!(
            guard.changed_behind().len(),
            2,
            "{:?}",
            guard.changed_behind()
        );
        fs::write(dir.path().join("stop_tracing_us"), "0").unwrap();
        // Theirs is kept at the end.
        let notes = guard.restore();
        assert_eq!(
            fs::read_to_string(dir.path().join("timerlat_period_us")).unwrap(),
            "100"
        );
        assert!(
            notes[0].contains("left as another program set it"),
            "{notes:?}"
        );
        let mut guard = Guard::take(dir.path());
        guard.set("timerlat_period_us", "500", same_number).unwrap();
        drop(guard);
        assert_eq!(
            fs::read_to_string(dir.path().join("timerlat_period_us")).unwrap(),
            "100"
        );
    }

    #[test]
    fn a_flag_of_options_is_written_alone_and_set_back() {
        let dir = captured("6.12-rt-amd64");
        let mut guard = Guard::take(dir.path());
        guard.set_option("OSNOISE_WORKLOAD", false).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("options")).unwrap(),
            "NO_OSNOISE_WORKLOAD"
        );
        assert!(
            guard
                .set_option("NO_SUCH", true)
                .unwrap_err()
                .contains("no flag NO_SUCH")
        );
        let notes = guard.restore();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            fs::read_to_string(dir.path().join("options")).unwrap(),
            "OSNOISE_WORKLOAD"
        );
        assert!(
            Guard::take(dir.path())
                .set("nothing", "1", same_number)
                .unwrap_err()
                .contains("missing")
        );
    }
}
