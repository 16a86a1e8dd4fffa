//! A tracefs instance latencyd owns: its name tells its owner, nobody
//! can remove it while the owner lives, leftovers of owners that are gone
//! are removed, and a change made to it behind latencyd's back is found
//! and set back.
//!
//! - **Names.** `latencyd-forensics-PID` and `latencyd-observe-PID`
//!   (`.N` appended when the name is taken: the same pid in another pid
//!   namespace, a container's latencyd beside the host's).
//! - **Ownership the kernel enforces.** The owner keeps `tracing_on` of its
//!   instance open for the instance's life. The kernel refuses to remove an
//!   instance any of whose files is open (`rmdir` fails with EBUSY), so no
//!   other process — another latencyd sweeping for leftovers, rtla,
//!   trace-cmd — can remove it while its owner runs, and when the owner
//!   dies, however it dies, the kernel closes the file and the instance
//!   becomes removable. That holds across pid namespaces, where a pid
//!   proves nothing.
//! - **Leftovers.** Before creating its own, and every 10 s while it runs
//!   (`sweep_leftovers`), a process removes every other instance of the
//!   same role that the kernel lets it remove: those are
//!   exactly the ones whose owner is gone (and the unpinned instances of
//!   older latencyd releases, `latencyd` and `latencyd-observe`).
//! - **Changes behind its back.** Every setting written is remembered;
//!   `check` reads them back (five to ten small reads) and writes them
//!   again when another program changed one. The caller checks at every
//!   collector tick and says what it found.

use crate::rt::sys;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What an instance is for; its name says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Forensics,
    Observe,
    /// The timerlat tracer's instance (`crate::instruments`).
    Timerlat,
    /// The hwlat tracer's instance, for hardware-noise windows.
    Hwnoise,
}

impl Role {
    /// The part of the name before the owner's pid.
    pub fn prefix(self) -> &'static str {
        match self {
            Role::Forensics => "latencyd-forensics",
            Role::Observe => "latencyd-observe",
            Role::Timerlat => "latencyd-timerlat",
            Role::Hwnoise => "latencyd-hwnoise",
        }
    }

    /// The fixed name releases before owner-named instances used.
    fn legacy_name(self) -> Option<&'static str> {
        match self {
            Role::Forensics => Some("latencyd"),
            Role::Observe => Some("latencyd-observe"),
            Role::Timerlat | Role::Hwnoise => None,
        }
    }

    /// What the errors say needs tracefs (and its systemd drop-in).
    pub fn who(self) -> &'static str {
        match self {
            Role::Forensics => "forensics",
            Role::Observe => "observe",
            Role::Timerlat => "timerlat",
            Role::Hwnoise => "hwnoise",
        }
    }

    /// Whether `name` is an instance of this role, owned by any process.
    pub fn owns_name(self, name: &str) -> bool {
        if Some(name) == self.legacy_name() {
            return true;
        }
        let Some(owner) = name
            .strip_prefix(self.prefix())
            .and_then(|rest| rest.strip_prefix('-'))
        else {
            return false;
        };
        let (pid, suffix) = owner.split_once('.').unwrap_or((owner, "1"));
        [pid, suffix]
            .iter()
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    }
}

/// What `Instance::check` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Every setting as latencyd wrote it.
    Intact,
    /// Something was changed (said here) and has been set back.
    Repaired(String),
    /// Something was changed and cannot be set back: the instance cannot
    /// be relied on (why, in words).
    Broken(String),
    /// Recording is paused and cannot be turned on: another program has
    /// the instance's trace open, and with `pause-on-trace` the kernel
    /// stops recording until it closes it (`tracing_on` reads 0 meanwhile
    /// on kernels such as 6.1). Not a reason to make the instance again,
    /// which would lose what the buffer holds. Returned once per pause.
    Paused(String),
}

/// Whether the differences left after setting back (`still`) are those
/// of a reader pausing recording: `tracing_on` alone reads 0 where
/// `pause-on-trace` is on.
fn paused_by_reader(pauses_on_trace: bool, still: &[String]) -> bool {
    pauses_on_trace && !still.is_empty() && still.iter().all(|d| d.starts_with("tracing_on: 0 "))
}

/// An instance this process created, removed when dropped.
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
    role: Role,
    /// `tracing_on`, open for the instance's life (see the module's
    /// documentation).
    pin: Option<File>,
    /// Every setting written, in order: the file, the value written, and
    /// what the file read right after (the kernel's own form of it).
    written: RefCell<Vec<Written>>,
    /// Whether the pause of a reader (see `Check::Paused`) was said.
    paused: std::cell::Cell<bool>,
}

/// One setting as written.
#[derive(Debug, Clone)]
struct Written {
    file: String,
    value: String,
    /// The file's text right after the write; None where it cannot be
    /// read back.
    read_back: Option<String>,
}

/// How many names with `.N` suffixes are tried before giving up.
const NAME_ATTEMPTS: usize = 16;

impl Instance {
    /// Removes the leftovers of `role` whose owners are gone, then
    /// creates this process's instance under `root` (a tracefs mount).
    /// The notes say what was removed, and which instances of another
    /// running latencyd were left alone.
    pub fn create(root: &Path, role: Role) -> Result<(Instance, Vec<String>), String> {
        let instances = root.join("instances");
        let notes = sweep(&instances, role);
        let pid = std::process::id();
        for n in 0..NAME_ATTEMPTS {
            let name = match n {
                0 => format!("{}-{pid}", role.prefix()),
                n => format!("{}-{pid}.{n}", role.prefix()),
            };
            let dir = instances.join(&name);
            match fs::create_dir(&dir) {
                Ok(()) => {}
                // The same pid in another pid namespace owns it.
                Err(err) if err.kind() == ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(create_error(&dir, &err, role)),
            }
            // Another process's sweep may remove the instance between
            // its creation and the pin; then the name is free again.
            match File::open(dir.join("tracing_on")) {
                Ok(pin) => {
                    let instance = Instance {
                        dir,
                        role,
                        pin: Some(pin),
                        written: RefCell::new(Vec::new()),
                        paused: std::cell::Cell::new(false),
                    };
                    return Ok((instance, notes));
                }
                Err(err) if err.kind() == ErrorKind::NotFound && dir.exists() => {
                    // Not tracefs: a directory the kernel does not fill.
                    let _ = fs::remove_dir(&dir);
                    return Err(format!(
                        "{} is not a tracefs instance: the kernel made no tracing_on in it \
                         (is {} tracefs?)",
                        dir.display(),
                        root.display()
                    ));
                }
                Err(err) if err.kind() == ErrorKind::NotFound => continue,
                Err(err) => {
                    let _ = fs::remove_dir(&dir);
                    return Err(format!(
                        "cannot open {}: {err}",
                        dir.join("tracing_on").display()
                    ));
                }
            }
        }
        Err(format!(
            "cannot create a tracefs instance for {}: {NAME_ATTEMPTS} names of the form \
             {}-{pid}.N are taken",
            role.who(),
            role.prefix()
        ))
    }

    /// An instance over a plain directory (made if missing), held by
    /// nothing: for tests of what is set up in an instance.
    #[cfg(test)]
    pub(crate) fn unpinned(dir: &Path, role: Role) -> Instance {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("tracing_on"), "0").unwrap();
        Instance {
            dir: dir.to_path_buf(),
            role,
            pin: None,
            written: RefCell::new(Vec::new()),
            paused: std::cell::Cell::new(false),
        }
    }

    /// Writes `value` to one of the instance's files and remembers it, so
    /// that `check` can see it changed and write it again.
    pub fn write(&self, file: &str, value: &str) -> Result<(), String> {
        fs::write(self.dir.join(file), value).map_err(|err| {
            format!(
                "cannot write {value:?} to {}: {err}",
                self.dir.join(file).display()
            )
        })?;
        let read_back = super::read_text(&self.dir.join(file))
            .ok()
            .map(|text| text.trim().to_string());
        self.written.borrow_mut().push(Written {
            file: file.to_string(),
            value: value.to_string(),
            read_back,
        });
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The instance's name under `instances/`.
    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Removes the instances of this role left by latencyd processes that
    /// are gone since this one started (a `measure --forensics` killed
    /// with SIGKILL leaves its kernel buffers behind); says each removal.
    /// Running owners' instances are left alone: the kernel refuses to
    /// remove them.
    pub fn sweep_leftovers(&self) -> Vec<String> {
        let Some(instances) = self.dir.parent() else {
            return Vec::new();
        };
        sweep_but(instances, self.role, Some(&self.name()))
            .into_iter()
            .filter(|note| note.starts_with("removed"))
            .collect()
    }

    /// Reads every setting back and writes again those another program
    /// changed.
    pub fn check(&self) -> Check {
        if !self.dir.join("tracing_on").exists() {
            return Check::Broken(format!(
                "{}'s tracefs instance {} is gone (was tracefs unmounted?)",
                self.role.who(),
                self.dir.display()
            ));
        }
        let changed = self.differences();
        if changed.is_empty() {
            self.paused.set(false);
            return Check::Intact;
        }
        let what = changed.join(", ");
        // Only what differs is written again: writing an unchanged
        // trace_clock would clear the buffer.
        for setting in self.written.borrow().iter() {
            if changed
                .iter()
                .any(|c| c.starts_with(&format!("{}: ", setting.file)))
            {
                let _ = fs::write(self.dir.join(&setting.file), &setting.value);
            }
        }
        let still = self.differences();
        if paused_by_reader(self.pauses_on_trace(), &still) {
            // Said once per pause; recording resumes when the reader
            // closes the trace.
            if self.paused.replace(true) {
                return Check::Intact;
            }
            Check::Paused(format!(
                "{}'s tracefs instance {} is not recording: another program has its trace open \
                 (pause-on-trace stops recording until it is closed)",
                self.role.who(),
                self.name()
            ))
        } else if still.is_empty() {
            Check::Repaired(format!(
                "{}'s tracefs instance {} was changed behind latencyd ({what}); set back",
                self.role.who(),
                self.name()
            ))
        } else {
            Check::Broken(format!(
                "{}'s tracefs instance {} was changed behind latencyd ({what}) and cannot be \
                 set back ({})",
                self.role.who(),
                self.name(),
                still.join(", ")
            ))
        }
    }

    /// Whether latencyd turned the `pause-on-trace` option on here.
    fn pauses_on_trace(&self) -> bool {
        self.written
            .borrow()
            .iter()
            .any(|w| w.file == "options/pause-on-trace" && w.value == "1")
    }

    /// The settings whose value is not what latencyd wrote, each as
    /// `file: found (wrote value)`. A file is compared with what it read
    /// right after latencyd wrote it (the kernel rounds buffer sizes and
    /// shows clocks and masks in its own form); event switches with the
    /// instance's `set_event` list where the kernel has one.
    fn differences(&self) -> Vec<String> {
        let mut latest: BTreeMap<&str, &Written> = BTreeMap::new();
        let written = self.written.borrow();
        for setting in written.iter() {
            latest.insert(&setting.file, setting);
        }
        let enabled: Option<Vec<String>> = super::read_text(&self.dir.join("set_event"))
            .ok()
            .map(|text| text.lines().map(|l| l.trim().to_string()).collect());
        let mut found = Vec::new();
        for (file, setting) in latest {
            let value = setting.value.trim();
            if let (Some(enabled), Some(event)) = (&enabled, event_of_enable(file)) {
                let on = enabled.iter().any(|e| e == &event);
                if on != (value == "1") {
                    let now = if on { "1" } else { "0" };
                    found.push(format!("{file}: {now} (wrote {value})"));
                }
                continue;
            }
            let Some(expected) = &setting.read_back else {
                continue;
            };
            match super::read_text(&self.dir.join(file)) {
                Ok(read) if read.trim() == expected => {}
                Ok(read) => {
                    let shown: String = read.trim().chars().take(60).collect();
                    found.push(format!("{file}: {shown} (wrote {value})"));
                }
                Err(_) => found.push(format!("{file}: unreadable (wrote {value})")),
            }
        }
        found
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join("tracing_on"), "0");
        self.pin = None;
        // A file of the instance another thread is closing right now keeps
        // it busy for a moment.
        for _ in 0..50 {
            match fs::remove_dir(&self.dir) {
                Err(err) if err.raw_os_error() == Some(sys::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => return,
            }
        }
    }
}

/// Removes the instances of `role` under the tracefs mount `root` whose
/// owners are gone, before anything looks at who uses a tracer: a killed
/// latencyd's instance keeps its tracer running until it is removed.
/// Says what it removed and what it left because its owner runs.
pub fn sweep_role(root: &Path, role: Role) -> Vec<String> {
    sweep(&root.join("instances"), role)
}

/// Removes every instance of `role` under `instances` that the kernel
/// lets go (those whose owner is gone); says what it removed and what it
/// left because its owner runs.
fn sweep(instances: &Path, role: Role) -> Vec<String> {
    sweep_but(instances, role, None)
}

/// `sweep`, leaving the instance named `own` alone.
fn sweep_but(instances: &Path, role: Role, own: Option<&str>) -> Vec<String> {
    let mut notes = Vec::new();
    let Ok(entries) = fs::read_dir(instances) else {
        return notes;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| role.owns_name(name) && Some(name.as_str()) != own)
        .collect();
    names.sort();
    for name in names {
        let dir = instances.join(&name);
        match fs::remove_dir(&dir) {
            Ok(()) => notes.push(format!(
                "removed the tracefs instance {} left by a latencyd that is gone",
                dir.display()
            )),
            Err(err) if err.raw_os_error() == Some(sys::EBUSY) => notes.push(format!(
                "the tracefs instance {} belongs to another latencyd that runs; left alone",
                dir.display()
            )),
            Err(err) => notes.push(format!(
                "the tracefs instance {} is left from an earlier run and cannot be removed \
                 ({err}); if no latencyd runs, remove it with `rmdir {}`",
                dir.display(),
                dir.display()
            )),
        }
    }
    notes
}

fn create_error(dir: &Path, err: &std::io::Error, role: Role) -> String {
    let hint = if matches!(
        err.kind(),
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
    ) {
        format!(
            " ({} needs root, or write access to tracefs: see \
             deploy/systemd/latencyd-{}.conf)",
            role.who(),
            role.who()
        )
    } else {
        String::new()
    };
    format!(
        "cannot create the tracefs instance {}: {err}{hint}",
        dir.display()
    )
}

/// `events/SYSTEM/EVENT/enable` as `SYSTEM:EVENT` (as `set_event` lists
/// it); None for other files, and for a whole system's switch.
fn event_of_enable(file: &str) -> Option<String> {
    let mut parts = file.split('/');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("events"), Some(system), Some(event), Some("enable")) if parts.next().is_none() => {
            Some(format!("{system}:{event}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory standing for tracefs: `mkdir` under `instances` makes
    /// a directory the test fills with the files the kernel would make.
    fn fake_tracefs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("instances")).unwrap();
        dir
    }

    #[test]
    fn names_say_their_role_and_owner() {
        assert!(Role::Forensics.owns_name("latencyd-forensics-123"));
        assert!(Role::Forensics.owns_name("latencyd-forensics-123.2"));
        assert!(Role::Forensics.owns_name("latencyd"));
        assert!(!Role::Forensics.owns_name("latencyd-observe-123"));
        assert!(!Role::Forensics.owns_name("latencyd-forensics-"));
        assert!(!Role::Forensics.owns_name("latencyd-forensics-12x"));
        assert!(!Role::Forensics.owns_name("latencyd-forensics-12."));
        assert!(!Role::Forensics.owns_name("rtla-timerlat"));
        assert!(Role::Observe.owns_name("latencyd-observe"));
        assert!(Role::Observe.owns_name("latencyd-observe-9"));
        assert!(!Role::Observe.owns_name("latencyd"));
    }

    #[test]
    fn a_directory_the_kernel_does_not_fill_is_refused_and_left_clean() {
        let root = fake_tracefs();
        let err = Instance::create(root.path(), Role::Forensics).unwrap_err();
        assert!(err.contains("is not a tracefs instance"), "{err}");
        let left: Vec<_> = fs::read_dir(root.path().join("instances"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn leftovers_are_swept_and_others_instances_are_not_touched() {
        let root = fake_tracefs();
        let instances = root.path().join("instances");
        // Empty directories are what the sweep can remove (as the kernel
        // lets an unused instance go); one with a file in it stands for an
        // instance whose owner runs, and another tool's for itself.
        for name in ["latencyd", "latencyd-forensics-77", "rtla"] {
            fs::create_dir(instances.join(name)).unwrap();
        }
        fs::create_dir(instances.join("latencyd-forensics-88")).unwrap();
        fs::write(instances.join("latencyd-forensics-88/tracing_on"), "1").unwrap();
        let notes = sweep(&instances, Role::Forensics);
        assert!(!instances.join("latencyd").exists());
        assert!(!instances.join("latencyd-forensics-77").exists());
        assert!(instances.join("latencyd-forensics-88").exists());
        assert!(instances.join("rtla").exists(), "not latencyd's");
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes
                .iter()
                .any(|n| n.contains("-77 left by a latencyd that is gone"))
        );
    }

    #[test]
    fn event_switches_are_named_as_set_event_lists_them() {
        assert_eq!(
            event_of_enable("events/sched/sched_switch/enable").as_deref(),
            Some("sched:sched_switch")
        );
        assert_eq!(event_of_enable("events/osnoise/enable"), None);
        assert_eq!(event_of_enable("tracing_on"), None);
    }

    fn instance_in(dir: &Path) -> Instance {
        Instance::unpinned(dir, Role::Observe)
    }

    #[test]
    fn a_setting_changed_behind_its_back_is_found_and_set_back() {
        let root = fake_tracefs();
        let dir = root.path().join("instances/latencyd-observe-1");
        let instance = instance_in(&dir);
        fs::create_dir_all(dir.join("events/sched/sched_switch")).unwrap();
        instance.write("tracing_on", "0").unwrap();
        instance.write("trace_clock", "mono").unwrap();
        instance
            .write("events/sched/sched_switch/enable", "1")
            .unwrap();
        instance.write("tracing_on", "1").unwrap();
        assert_eq!(instance.check(), Check::Intact);
        // Another program turns recording off and the event too.
        fs::write(dir.join("tracing_on"), "0").unwrap();
        fs::write(dir.join("events/sched/sched_switch/enable"), "0").unwrap();
        let Check::Repaired(what) = instance.check() else {
            panic!("not repaired");
        };
        assert!(what.contains("tracing_on: 0 (wrote 1)"), "{what}");
        assert!(what.contains("sched_switch/enable: 0 (wrote 1)"), "{what}");
        assert!(what.contains("latencyd-observe-1"), "{what}");
        assert_eq!(fs::read_to_string(dir.join("tracing_on")).unwrap(), "1");
        assert_eq!(instance.check(), Check::Intact);
        // With `set_event` the event switches are read from it.
        fs::write(dir.join("set_event"), "irq:irq_handler_entry\n").unwrap();
        let Check::Broken(why) = instance.check() else {
            panic!("set_event cannot be set back by rewriting the switch in a plain directory");
        };
        assert!(why.contains("cannot be set back"), "{why}");
        fs::write(dir.join("set_event"), "sched:sched_switch\n").unwrap();
        assert_eq!(instance.check(), Check::Intact);
        // A setting that cannot be written again: broken, and said.
        fs::remove_file(dir.join("trace_clock")).unwrap();
        fs::create_dir(dir.join("trace_clock")).unwrap();
        let Check::Broken(why) = instance.check() else {
            panic!("not broken");
        };
        assert!(
            why.contains("trace_clock: unreadable (wrote mono)"),
            "{why}"
        );
        // The whole instance gone.
        fs::remove_dir_all(&dir).unwrap();
        let Check::Broken(why) = instance.check() else {
            panic!("not broken");
        };
        assert!(why.contains("is gone"), "{why}");
    }

    #[test]
    fn a_reader_pausing_recording_is_not_a_broken_instance() {
        // With pause-on-trace the kernel keeps tracing_on at 0 while
        // another program has the trace open, whatever latencyd writes.
        let only_on = vec!["tracing_on: 0 (wrote 1)".to_string()];
        assert!(paused_by_reader(true, &only_on));
        assert!(
            !paused_by_reader(false, &only_on),
            "without the option: broken"
        );
        let more = vec![
            "tracing_on: 0 (wrote 1)".to_string(),
            "trace_clock: local (wrote mono)".to_string(),
        ];
        assert!(!paused_by_reader(true, &more), "another change: broken");
        assert!(!paused_by_reader(true, &[]));
        // Setting back writes only what differs: writing an unchanged
        // trace_clock would clear the buffer.
        let root = fake_tracefs();
        let dir = root.path().join("instances/latencyd-forensics-1");
        let instance = Instance::unpinned(&dir, Role::Forensics);
        instance.write("trace_clock", "mono").unwrap();
        instance.write("tracing_on", "1").unwrap();
        let before = fs::metadata(dir.join("trace_clock"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(dir.join("tracing_on"), "0").unwrap();
        assert!(matches!(instance.check(), Check::Repaired(_)));
        let after = fs::metadata(dir.join("trace_clock"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(before, after, "trace_clock was written again");
    }

    #[test]
    fn a_running_latencyd_removes_what_dead_ones_left_not_its_own() {
        let root = fake_tracefs();
        let instances = root.path().join("instances");
        let own = Instance::unpinned(&instances.join("latencyd-forensics-1"), Role::Forensics);
        fs::create_dir_all(instances.join("latencyd-forensics-424242")).unwrap();
        fs::create_dir_all(instances.join("latencyd-observe-424242")).unwrap();
        fs::create_dir_all(instances.join("rtla")).unwrap();
        let notes = own.sweep_leftovers();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("latencyd-forensics-424242"), "{notes:?}");
        assert!(!instances.join("latencyd-forensics-424242").exists());
        assert!(instances.join("latencyd-forensics-1").exists(), "its own");
        assert!(
            instances.join("latencyd-observe-424242").exists(),
            "another role's"
        );
        assert!(instances.join("rtla").exists(), "another tool's");
    }

    #[test]
    fn a_gone_instance_is_broken() {
        let root = fake_tracefs();
        let dir = root.path().join("instances/latencyd-observe-3");
        let instance = instance_in(&dir);
        fs::create_dir_all(&dir).unwrap();
        instance.write("tracing_on", "1").unwrap();
        fs::remove_dir_all(&dir).unwrap();
        let Check::Broken(why) = instance.check() else {
            panic!("not broken");
        };
        assert!(why.contains("is gone"), "{why}");
    }
}
