//! Fields of a task's `/proc/PID/stat` and `/proc/PID/status`.

/// `PF_KTHREAD` in `/proc/PID/stat`'s flags (field 9): a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;

/// A number field of `/proc/PID/status` (`Tgid:`), when it has one.
pub fn status_field(status: &str, name: &str) -> Option<i32> {
    let line = status.lines().find(|line| line.starts_with(name))?;
    line[name.len()..].trim().parse().ok()
}

/// The flags field of `/proc/PID/stat` (after the parenthesised name,
/// which may itself hold spaces and parentheses).
pub fn stat_flags(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // state ppid pgrp session tty_nr tpgid flags
    rest.split_whitespace().nth(6)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_flags_are_read_past_a_name_with_spaces_and_parentheses() {
        // A kworker's flags, as a 6.18 guest kernel shows them.
        let stat = "42 (kworker/1:1 (x)) I 2 0 0 0 -1 69238880 0 0";
        let flags = stat_flags(stat).unwrap();
        assert_eq!(flags, 69_238_880);
        assert_ne!(flags & PF_KTHREAD, 0);
        assert_eq!(stat_flags("garbage"), None);
    }
}
