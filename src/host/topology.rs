//! Where each CPU sits: package (socket), core, NUMA node and its SMT
//! siblings, from `/sys/devices/system/cpu/cpuN/topology` and the
//! `nodeM` link beside it. A CPU whose files cannot be read has `None`
//! there: never a guess.

use std::fs;
use std::path::Path;

use crate::cpulist::{format_cpu_list, parse_cpu_list};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTopology {
    pub cpu: usize,
    /// `physical_package_id`.
    pub package: Option<i64>,
    /// `core_id` (unique within its package only).
    pub core: Option<i64>,
    pub node: Option<usize>,
    /// The hardware threads of this CPU's core, this one included, as a
    /// CPU list (`0,4`); just the CPU itself without SMT.
    pub smt_siblings: Option<String>,
}

/// The topology of `cpus`, read under `root` (`/` on a live host).
pub fn read(root: &Path, cpus: &[usize]) -> Vec<CpuTopology> {
    cpus.iter().map(|&cpu| read_one(root, cpu)).collect()
}

fn read_one(root: &Path, cpu: usize) -> CpuTopology {
    let dir = root.join(format!("sys/devices/system/cpu/cpu{cpu}"));
    let text = |file: &str| fs::read_to_string(dir.join("topology").join(file)).ok();
    let number = |file: &str| text(file).and_then(|s| s.trim().parse::<i64>().ok());
    let node = fs::read_dir(&dir).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
            .next()
    });
    let smt_siblings = text("thread_siblings_list")
        .and_then(|s| parse_cpu_list(&s).ok())
        .map(|cpus| format_cpu_list(&cpus));
    CpuTopology {
        cpu,
        package: number("physical_package_id"),
        core: number("core_id"),
        node,
        smt_siblings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_package_core_node_and_siblings() {
        let root = std::env::temp_dir().join(format!("latencyd-topo-{}", std::process::id()));
        let cpu1 = root.join("sys/devices/system/cpu/cpu1");
        fs::create_dir_all(cpu1.join("topology")).unwrap();
        fs::create_dir_all(cpu1.join("node1")).unwrap();
        fs::write(cpu1.join("topology/physical_package_id"), "1\n").unwrap();
        fs::write(cpu1.join("topology/core_id"), "3\n").unwrap();
        fs::write(cpu1.join("topology/thread_siblings_list"), "1,5\n").unwrap();
        let cpus = read(&root, &[1, 7]);
        assert_eq!(
            cpus[0],
            CpuTopology {
                cpu: 1,
                package: Some(1),
                core: Some(3),
                node: Some(1),
                smt_siblings: Some("1,5".to_string()),
            }
        );
        // Nothing readable: nothing claimed.
        assert_eq!(cpus[1].package, None);
        assert_eq!(cpus[1].node, None);
        assert_eq!(cpus[1].smt_siblings, None);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn this_host_has_a_topology() {
        let cpus = read(Path::new("/"), &[0]);
        assert_eq!(cpus[0].cpu, 0);
        assert!(cpus[0].smt_siblings.is_some(), "{:?}", cpus[0]);
    }
}
