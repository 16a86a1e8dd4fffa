//! Calendar time: Unix nanoseconds to and from RFC 3339 text (UTC,
//! milliseconds), the proleptic Gregorian conversions under them, and the
//! points in time people give for a range (`-7d`, an RFC 3339 time), and
//! the RFC 2822 dates of cyclictest's and oslat's JSON.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::units::{NS_PER_SEC, parse_duration_ns};

/// Converts days since 1970-01-01 to a (year, month, day) date in the
/// proleptic Gregorian calendar (Howard Hinnant's civil_from_days).
pub fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// `unix_ns` as an RFC 3339 UTC time with milliseconds, e.g.
/// `2026-11-22T02:45:38.123Z`.
pub fn format_rfc3339_ms(unix_ns: u64) -> String {
    let secs = unix_ns / NS_PER_SEC;
    let (year, month, day) = civil_from_days(secs / 86_400);
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60,
        unix_ns % NS_PER_SEC / 1_000_000
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of
/// `civil_from_days`), `None` before 1970.
pub fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let y = year.checked_sub(u64::from(month <= 2))?;
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
}

/// Parses an RFC 3339 time (`2026-11-22T02:45:38Z`, with an optional
/// fraction and a `Z` or `±HH:MM` offset) to nanoseconds since the epoch.
pub fn parse_rfc3339_ns(input: &str) -> Result<u64, String> {
    let bad =
        |why: &str| format!("'{input}' is not an RFC 3339 time ({why}), e.g. 2026-11-22T02:45:38Z");
    // Fields are cut by byte position: only ASCII can be cut anywhere.
    if !input.is_ascii() {
        return Err(bad("a character that is not ASCII"));
    }
    let b = input.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad("expected YYYY-MM-DDTHH:MM:SS and a zone"));
    }
    let num = |range: std::ops::Range<usize>| -> Result<u64, String> {
        let text = &input[range];
        if text.bytes().all(|c| c.is_ascii_digit()) {
            text.parse().map_err(|_| bad("a number is out of range"))
        } else {
            Err(bad("a field is not a number"))
        }
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let month_days = [
        31,
        28 + u64::from(year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)),
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day == 0
        || day > month_days[month as usize - 1]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad("a field is out of range"));
    }
    let mut rest = &input[19..];
    let mut frac_ns = 0;
    if let Some(after) = rest.strip_prefix('.') {
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("a '.' without digits"));
        }
        for (i, c) in after[..digits].bytes().take(9).enumerate() {
            frac_ns += u64::from(c - b'0') * 10u64.pow(8 - i as u32);
        }
        rest = &after[digits..];
    }
    let offset_s: i64 = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && matches!(&rest[..1], "+" | "-") && &rest[3..4] == ":" => {
            let h = num(input.len() - 5..input.len() - 3)?;
            let m = num(input.len() - 2..input.len())?;
            if h > 23 || m > 59 {
                return Err(bad("the zone offset is out of range"));
            }
            let s = (h * 3_600 + m * 60) as i64;
            if rest.starts_with('-') { -s } else { s }
        }
        _ => return Err(bad("the zone must be Z or +HH:MM")),
    };
    let days = days_from_civil(year, month, day).ok_or_else(|| bad("before 1970"))?;
    let local = (days * 86_400 + hour * 3_600 + minute * 60 + second.min(59)) as i64;
    let utc = u64::try_from(local - offset_s).map_err(|_| bad("before 1970"))?;
    utc.checked_mul(NS_PER_SEC)
        .and_then(|ns| ns.checked_add(frac_ns))
        .ok_or_else(|| bad("after 2554, beyond nanoseconds in 64 bits"))
}

/// Parses a point in time as people give one for a range: an RFC 3339
/// time, or a negative duration from `now_unix_ns` (`-7d`, `-90m`).
pub fn parse_time_ns(input: &str, now_unix_ns: u64) -> Result<u64, String> {
    if let Some(ago) = input.strip_prefix('-') {
        let ns = parse_duration_ns(ago, None).map_err(|e| {
            format!(
                "'{input}': {e} (a time is RFC 3339 or a negative duration such as -7d or -90m)"
            )
        })?;
        return Ok(now_unix_ns.saturating_sub(ns));
    }
    parse_rfc3339_ns(input).map_err(|e| format!("{e}, or a negative duration such as -7d or -90m"))
}

/// Formats a time as cyclictest's JSON does (`Sun, 22 Nov 2026 02:45:38
/// +0000`), always in UTC so that files from a fleet compare directly.
pub fn format_rfc2822_utc(time: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let (year, month, day) = civil_from_days(days);
    let rem = secs % 86_400;
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} +0000",
        DAYS[(days % 7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_format_like_cyclictest() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_315_538);
        assert_eq!(format_rfc2822_utc(t), "Sun, 22 Nov 2026 02:45:38 +0000");
        assert_eq!(
            format_rfc2822_utc(UNIX_EPOCH),
            "Thu, 01 Jan 1970 00:00:00 +0000"
        );
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(format_rfc2822_utc(leap), "Tue, 29 Feb 2000 00:00:00 +0000");
    }

    #[test]
    fn rfc3339_times_parse_back() {
        for ns in [0, 1_795_315_538_123_000_000, 951_782_400_000_000_000] {
            assert_eq!(parse_rfc3339_ns(&format_rfc3339_ms(ns)), Ok(ns));
        }
        assert_eq!(
            parse_rfc3339_ns("2026-11-22T03:45:38.5+01:00"),
            Ok(1_795_315_538_500_000_000)
        );
        assert_eq!(
            parse_rfc3339_ns("2000-02-29T00:00:00Z"),
            Ok(951_782_400 * NS_PER_SEC)
        );
        for bad in [
            "",
            "2026-11-22",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-11-22T24:00:00Z",
            "2026-11-22T00:00:00",
            "2026-11-22T00:00:00+1:00",
            "1969-12-31T23:59:59Z",
            "2026-11-22T00:00:00.Z",
            "2026-1x-22T00:00:00Z",
            // Once a panic (a cut inside a character), once a wrap.
            "2026-11-22T00:00:0\u{e9}Z",
            "2026-11-22T00:00:00+\u{e9}:00",
            "2026-11-22T00:00:00\u{e9}1:00",
            "2555-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
        ] {
            assert!(parse_rfc3339_ns(bad).is_err(), "{bad}");
        }
        let now = 1_000 * NS_PER_SEC;
        assert_eq!(parse_time_ns("-90s", now), Ok(910 * NS_PER_SEC));
        assert_eq!(parse_time_ns("-7d", now), Ok(0));
        let err = parse_time_ns("yesterday", now).unwrap_err();
        assert!(err.contains("RFC 3339") && err.contains("-7d"), "{err}");
        assert!(parse_time_ns("-7", now).unwrap_err().contains("-90m"));
    }

    #[test]
    fn rfc3339_times_are_utc_with_milliseconds() {
        assert_eq!(
            format_rfc3339_ms(1_795_315_538_123_456_789),
            "2026-11-22T02:45:38.123Z"
        );
        assert_eq!(format_rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_rfc3339_ms(951_782_400 * NS_PER_SEC),
            "2000-02-29T00:00:00.000Z"
        );
    }
}
