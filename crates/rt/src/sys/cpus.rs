//! Which CPUs: a thread's and the process's affinity, the CPU a thread
//! runs on, the CPUs online.

use std::io;

use crate::cpulist::{MAX_CPUS, parse_cpu_list};

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    set_current_thread_affinity(&[cpu])
}

/// The kernel's CPU set of `cpus`.
pub fn cpu_set_of(cpus: &[usize]) -> io::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; all-zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= MAX_CPUS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond CPU_SETSIZE"),
            ));
        }
        // SAFETY: `cpu` < CPU_SETSIZE was checked above.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    Ok(set)
}

/// Restricts the calling thread to a set of CPUs.
pub fn set_current_thread_affinity(cpus: &[usize]) -> io::Result<()> {
    let set = cpu_set_of(cpus)?;
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the
    // size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the calling thread is still pinned to `cpu` alone and runs
/// there: false once the CPU went offline (the kernel then lets the thread
/// run anywhere) or someone moved it. Allocates nothing.
pub fn still_pinned_to(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; all-zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a valid out-buffer of
    // the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    // SAFETY: `set` is initialised (by the kernel, or still empty).
    let count = unsafe { libc::CPU_COUNT(&set) };
    // SAFETY: `cpu` is checked against CPU_SETSIZE first.
    let pinned = rc == 0 && count == 1 && cpu < MAX_CPUS && unsafe { libc::CPU_ISSET(cpu, &set) };
    pinned && current_cpu() == Some(cpu)
}

/// The CPUs this process may run on (its affinity mask, which cgroups,
/// `taskset` and systemd's `CPUAffinity=` narrow).
pub fn process_affinity() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all-zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid out-buffer of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: every index is below CPU_SETSIZE and `set` is initialised.
    Ok((0..MAX_CPUS)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// The CPU the calling thread runs on. glibc answers from the rseq area
/// the kernel keeps up to date (or the vDSO): no system call, so the hot
/// loop may ask at every wake-up.
#[inline]
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no arguments.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// The CPUs online now (`/sys/devices/system/cpu/online`), if readable.
pub fn online_cpus() -> Option<Vec<usize>> {
    super::read_small("/sys/devices/system/cpu/online").and_then(|s| parse_cpu_list(&s).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_let_off_its_cpu_is_no_longer_pinned_to_it() {
        let usable = process_affinity().unwrap();
        let cpu = usable[0];
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert!(still_pinned_to(cpu));
            assert!(
                !still_pinned_to(cpu + 1),
                "pinned to {cpu}, not {}",
                cpu + 1
            );
            // What the kernel does when the CPU goes offline: the thread
            // may run anywhere.
            set_current_thread_affinity(&usable).unwrap();
            assert_eq!(still_pinned_to(cpu), usable.len() == 1);
        })
        .join()
        .unwrap();
    }
}
