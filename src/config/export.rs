//! `[export]`: where and how the metrics and the API are served.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use config::{Value, ValueKind};

use super::{
    ConfigError, Effective, SectionReader, as_bool, as_cpu_selection, as_duration_list_ns,
    as_duration_ns, as_string, count_up_to, key_error, quoted,
};
use crate::host::HostInfo;
use crate::sampling::CpuSelection;
use crate::units::{NS_PER_SEC, NS_PER_US, format_duration_ns};

const MAX_WINDOW_NS: u64 = 86_400 * NS_PER_SEC;
/// More buckets than this cost series without telling more.
const MAX_BUCKETS: usize = 64;
/// Each connection costs a task and its buffers; beyond this a host has
/// a problem that more connections will not solve.
const MAX_CONNECTIONS_LIMIT: i64 = 65_536;
/// The longest header or request timeout: beyond it a slow client is
/// indistinguishable from an attack.
const MAX_HTTP_TIMEOUT_NS: u64 = 300 * NS_PER_SEC;

/// The daemon's own routes, which the metrics' path may not take: these
/// paths, and everything under those ending in '/' but the root (kept in
/// step with the router's by `tests/daemon_http.rs`).
pub const OWN_ROUTES: &[&str] = &[
    "/",
    "/plot.svg",
    "/healthz",
    "/livez",
    "/runbooks",
    "/spikes",
    "/spikes/",
    "/api",
    "/api/",
];

/// Whether `path` can serve the metrics: a path the router takes without
/// a second thought, and none of latencyd's own.
pub fn check_telemetry_path(path: &str) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.' | '~');
    if !path.starts_with('/') || path.len() < 2 || !path.chars().all(plain) || path.contains("//") {
        return Err(
            "must be a path such as \"/metrics\": a '/' then letters, digits and - _ . ~ /, \
             no empty segment"
                .to_string(),
        );
    }
    let taken = OWN_ROUTES.iter().any(|route| {
        path == *route || (route.len() > 1 && route.ends_with('/') && path.starts_with(route))
    });
    if taken {
        return Err(format!(
            "{path} is one of latencyd's own routes ({}); choose another",
            OWN_ROUTES.join(", ")
        ));
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportConfig {
    /// Where to serve, one listener each (`[::]` is dual-stack, and falls
    /// back to `0.0.0.0` where IPv6 is off).
    pub listen: Vec<SocketAddr>,
    /// The path of the metrics (Prometheus exporters' `--web.telemetry-path`).
    pub telemetry_path: String,
    /// The trailing window of `latencyd_wakeup_latency_window_max_seconds`,
    /// in whole seconds.
    pub max_window_ns: u64,
    /// One histogram per CPU (`cpu` label), or one summed over CPUs.
    pub per_cpu_histograms: bool,
    /// Upper bounds of the Prometheus histogram buckets, ascending.
    pub buckets_ns: Vec<u64>,
    /// CPUs the exporter thread may run on (`All`: not pinned).
    pub cpus: CpuSelection,
    /// The exporter-toolkit web configuration (TLS, basic auth); `None`:
    /// plain HTTP, open.
    pub web_config_file: Option<PathBuf>,
    /// Connections served at once; more get 503 and are closed.
    pub max_connections: usize,
    /// A client must send a request's headers within this long of
    /// connecting or of its previous response (idle keep-alive included).
    pub header_timeout_ns: u64,
    /// The longest a request may take to be answered, the writing of the
    /// response to a client that does not read included.
    pub request_timeout_ns: u64,
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

/// Listen addresses: a TOML array of strings, or (from the environment, a
/// flag, or a plain string) one comma-separated string. At least one, no
/// repeats.
fn as_listen_list(value: &Value) -> Result<Vec<SocketAddr>, String> {
    let items: Vec<String> = match &value.kind {
        ValueKind::Array(items) => items.iter().map(as_string).collect::<Result<_, _>>()?,
        ValueKind::String(s) => s.split(',').map(|i| i.trim().to_string()).collect(),
        _ => return Err("expected an address and port such as \"[::]:9479\"".to_string()),
    };
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        // ":9479", node_exporter's habit (Go's "all addresses"), is the
        // dual-stack "[::]:9479".
        let all = item
            .strip_prefix(':')
            .and_then(|port| port.parse::<u16>().ok())
            .map(|port| SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)));
        let addr = all
            .map_or_else(|| item.parse::<SocketAddr>(), Ok)
            .map_err(|_| {
                format!(
                    "{}'{item}' is not an IP address and port such as \"[::]:9479\" or \":9479\" \
                 (all addresses, dual-stack), \"0.0.0.0:9479\" or \"127.0.0.1:9479\" (host \
                 names are not resolved)",
                    if items.len() > 1 {
                        format!("item {}: ", i + 1)
                    } else {
                        String::new()
                    }
                )
            })?;
        if addrs.contains(&addr) {
            return Err(format!("{addr} is listed twice"));
        }
        addrs.push(addr);
    }
    if addrs.is_empty() {
        return Err("give at least one address".to_string());
    }
    Ok(addrs)
}

impl ExportConfig {
    pub(super) fn read(r: &mut SectionReader<'_>) -> Result<ExportConfig, ConfigError> {
        r.only(&[
            "listen",
            "telemetry_path",
            "max_window",
            "per_cpu_histograms",
            "buckets",
            "cpus",
            "web_config_file",
            "max_connections",
            "header_timeout",
            "request_timeout",
        ])?;
        let listen = r.read(
            "listen",
            || vec![SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 9479))],
            as_listen_list,
            |addrs| show_listen(addrs),
        )?;
        let telemetry_path = r.read(
            "telemetry_path",
            || "/metrics".to_string(),
            |v| {
                let path = as_string(v)?;
                check_telemetry_path(&path).map(|()| path)
            },
            |p| quoted(p),
        )?;
        let max_window_ns = r.read(
            "max_window",
            || 60 * NS_PER_SEC,
            as_max_window,
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let per_cpu_histograms =
            r.read("per_cpu_histograms", || true, as_bool, |b| b.to_string())?;
        let buckets_ns = r.read("buckets", default_buckets_ns, as_buckets, |buckets| {
            let items: Vec<String> = buckets
                .iter()
                .map(|ns| quoted(&format_duration_ns(*ns)))
                .collect();
            format!("[{}]", items.join(", "))
        })?;
        let cpus = r.read(
            "cpus",
            || CpuSelection::All,
            as_cpu_selection,
            |cpus| quoted(&cpus.to_string()),
        )?;
        let web_config_file = r.read(
            "web_config_file",
            || None,
            as_web_config_file,
            show_web_config_file,
        )?;
        let max_connections = r.read(
            "max_connections",
            || 256,
            count_up_to(MAX_CONNECTIONS_LIMIT),
            |n| n.to_string(),
        )?;
        let header_timeout_ns = r.read(
            "header_timeout",
            || 10 * NS_PER_SEC,
            http_timeout,
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        let request_timeout_ns = r.read(
            "request_timeout",
            || 10 * NS_PER_SEC,
            http_timeout,
            |ns| quoted(&format_duration_ns(*ns)),
        )?;
        Ok(ExportConfig {
            listen,
            telemetry_path,
            max_window_ns,
            per_cpu_histograms,
            buckets_ns,
            cpus,
            web_config_file,
            max_connections,
            header_timeout_ns,
            request_timeout_ns,
        })
    }

    pub(super) fn check_against(
        &self,
        host: &HostInfo,
        effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        // `all` leaves the exporter where it is; a list must be usable.
        if let CpuSelection::List(_) = &self.cpus
            && let Err(reason) = self.cpus.resolve(host)
        {
            return Err(key_error(effective, "export.cpus", reason));
        }
        Ok(())
    }
}

fn show_listen(addrs: &[SocketAddr]) -> String {
    let addrs: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
    quoted(&addrs.join(","))
}

/// `web_config_file`: a path, or "" for none.
fn as_web_config_file(v: &config::Value) -> Result<Option<PathBuf>, String> {
    let path = as_string(v)?;
    Ok((!path.is_empty()).then(|| PathBuf::from(path)))
}

fn show_web_config_file(path: &Option<PathBuf>) -> String {
    quoted(
        &path
            .as_ref()
            .map_or(String::new(), |p| p.display().to_string()),
    )
}

/// `max_window`: whole seconds from 1 s to 24 h.
fn as_max_window(v: &config::Value) -> Result<u64, String> {
    let ns = as_duration_ns(v)?;
    if !(NS_PER_SEC..=MAX_WINDOW_NS).contains(&ns) || ns % NS_PER_SEC != 0 {
        return Err("must be whole seconds between 1s and 24h".to_string());
    }
    Ok(ns)
}

/// `buckets`: 1 to `MAX_BUCKETS` bounds above 0, strictly ascending.
fn as_buckets(v: &config::Value) -> Result<Vec<u64>, String> {
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
}

/// `header_timeout` and `request_timeout`: 100 ms to 5 min.
fn http_timeout(v: &config::Value) -> Result<u64, String> {
    let ns = as_duration_ns(v)?;
    if !(NS_PER_SEC / 10..=MAX_HTTP_TIMEOUT_NS).contains(&ns) {
        return Err("must be between 100ms and 5m".to_string());
    }
    Ok(ns)
}
