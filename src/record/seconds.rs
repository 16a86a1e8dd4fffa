//! Times as the `.hlog` lines write them: seconds since the epoch with a
//! decimal fraction, read back to the nanosecond.

use crate::units::NS_PER_SEC;

/// Seconds with milliseconds, as HdrHistogram's tools write them.
pub fn seconds(ns: u64) -> String {
    format!("{}.{:03}", ns / NS_PER_SEC, ns % NS_PER_SEC / 1_000_000)
}

/// A decimal number of `unit`s (`1795315538.123`) in nanoseconds, exactly.
pub fn decimal_ns(text: &str, unit_ns: u64) -> Option<u64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() || !whole.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut ns = whole.parse::<u64>().ok()?.checked_mul(unit_ns)?;
    let mut scale = unit_ns;
    for c in frac.bytes() {
        scale /= 10;
        if scale == 0 {
            break;
        }
        ns = ns.checked_add(u64::from(c - b'0') * scale)?;
    }
    Some(ns)
}
