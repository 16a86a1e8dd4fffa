//! What tests/oslat.rs and tests/full/oslat.rs share.

/// One CPU to poll on: the last this process may use (the first often
/// carries housekeeping).
pub fn poll_cpu() -> String {
    let cpus = latencyd::host::HostInfo::detect().usable_cpus;
    cpus.last().copied().unwrap_or(0).to_string()
}
