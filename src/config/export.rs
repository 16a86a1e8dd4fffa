//! `[export]`: where and how the metrics and the API are served.

use std::net::SocketAddr;

use std::collections::BTreeMap;

use super::{
    ConfigError, CpuSelection, Effective, SectionReader, as_bool, as_cpu_selection,
    as_duration_list_ns, as_duration_ns, as_string, key_error, quoted,
};
use crate::cpulist::format_cpu_list;
use crate::host::HostInfo;
use crate::units::{NS_PER_SEC, NS_PER_US, format_duration_ns};

const MAX_WINDOW_NS: u64 = 86_400 * NS_PER_SEC;
/// More buckets than this cost series without telling more.
const MAX_BUCKETS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportConfig {
    pub listen: SocketAddr,
    /// The trailing window of `latencyd_wakeup_latency_window_max_seconds`,
    /// in whole seconds.
    pub max_window_ns: u64,
    /// One histogram per CPU (`cpu` label), or one summed over CPUs.
    pub per_cpu_histograms: bool,
    /// Upper bounds of the Prometheus histogram buckets, ascending.
    pub buckets_ns: Vec<u64>,
    /// CPUs the exporter thread may run on (`All`: not pinned).
    pub cpus: CpuSelection,
}

/// 1-2-5 steps from 1 µs to 1 s.
pub fn default_buckets_ns() -> Vec<u64> {
    let mut buckets = Vec::new();
    let mut decade = NS_PER_US;
    while decade < NS_PER_SEC {
        buckets.extend([decade, 2 * decade, 5 * decade]);
        decade *= 10;
    }
    buckets.push(NS_PER_SEC);
    buckets
}

impl ExportConfig {
    pub(super) fn read(r: &mut SectionReader<'_>) -> Result<ExportConfig, ConfigError> {
        r.only(&[
            "listen",
            "max_window",
            "per_cpu_histograms",
            "buckets",
            "cpus",
        ])?;
        let listen = r.read(
            "listen",
            || SocketAddr::from(([0, 0, 0, 0], 9479)),
            |v| {
                as_string(v)?.parse::<SocketAddr>().map_err(|_| {
                    "expected an IP address and port such as \"0.0.0.0:9479\", \
                     \"127.0.0.1:9479\" or \"[::]:9479\" (host names are not resolved)"
                        .to_string()
                })
            },
            |addr| quoted(&addr.to_string()),
        )?;
        let max_window_ns = r.read(
            "max_window",
            || 60 * NS_PER_SEC,
            |v| {
                let ns = as_duration_ns(v)?;
                if !(NS_PER_SEC..=MAX_WINDOW_NS).contains(&ns) || ns % NS_PER_SEC != 0 {
                    return Err("must be whole seconds between 1s and 24h".to_string());
                }
                Ok(ns)
            },
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let per_cpu_histograms =
            r.read("per_cpu_histograms", || true, as_bool, |b| b.to_string())?;
        let buckets_ns = r.read(
            "buckets",
            default_buckets_ns,
            |v| {
                let buckets = as_duration_list_ns(v)?;
                if buckets.is_empty() || buckets.len() > MAX_BUCKETS {
                    return Err(format!("give between 1 and {MAX_BUCKETS} bucket bounds"));
                }
                if buckets[0] == 0 {
                    return Err("bucket bounds must be above 0".to_string());
                }
                if let Some(i) = buckets.windows(2).position(|w| w[0] >= w[1]) {
                    return Err(format!(
                        "bounds must be strictly ascending: item {} ({}) is not above item {} ({})",
                        i + 2,
                        format_duration_ns(buckets[i + 1]),
                        i + 1,
                        format_duration_ns(buckets[i])
                    ));
                }
                Ok(buckets)
            },
            |buckets| {
                let items: Vec<String> = buckets
                    .iter()
                    .map(|ns| quoted(&format_duration_ns(*ns)))
                    .collect();
                format!("[{}]", items.join(", "))
            },
        )?;
        let cpus = r.read(
            "cpus",
            || CpuSelection::All,
            as_cpu_selection,
            |cpus| quoted(&cpus.to_string()),
        )?;
        Ok(ExportConfig {
            listen,
            max_window_ns,
            per_cpu_histograms,
            buckets_ns,
            cpus,
        })
    }

    pub(super) fn check_against(
        &self,
        host: &HostInfo,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        if let CpuSelection::List(cpus) = &self.cpus
            && let Some(bad) = cpus.iter().find(|cpu| !host.usable_cpus.contains(cpu))
        {
            return Err(key_error(
                effective,
                "export.cpus",
                format!(
                    "CPU {bad} is offline, absent or outside this process's affinity; usable \
                     CPUs are {}",
                    format_cpu_list(&host.usable_cpus)
                ),
            ));
        }
        Ok(())
    }
}
