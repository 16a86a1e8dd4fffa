//! Durations as people write them on a command line or in a config file.
//!
//! latencyd keeps every time in integer nanoseconds. Users write durations
//! with a unit (`100us`, `1ms`, `10s`, `5m`); some cyclictest options take a
//! bare number whose unit is implied by the option (`-i 1000` is
//! microseconds, `-D 60` is seconds), so the parser is told which unit a
//! bare number has, or that a bare number is an error.

use std::fmt;

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// The units a duration may carry, smallest first.
const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", NS_PER_US),
    ("µs", NS_PER_US),
    ("ms", NS_PER_MS),
    ("s", NS_PER_SEC),
    ("m", 60 * NS_PER_SEC),
    ("h", 3_600 * NS_PER_SEC),
    ("d", 86_400 * NS_PER_SEC),
];

/// Why a duration string was rejected. The message says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    Empty,
    NotANumber(String),
    MissingUnit(String),
    UnknownUnit { input: String, unit: String },
    TooLarge(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const ALLOWED: &str = "use a whole number with one of the units ns, us, ms, s, m, h, d (e.g. 100us, 1ms, 10s)";
        match self {
            DurationError::Empty => write!(f, "empty duration: {ALLOWED}"),
            DurationError::NotANumber(s) => write!(f, "'{s}' is not a duration: {ALLOWED}"),
            DurationError::MissingUnit(s) => write!(f, "'{s}' has no unit: {ALLOWED}"),
            DurationError::UnknownUnit { input, unit } => {
                write!(f, "'{input}' has an unknown unit '{unit}': {ALLOWED}")
            }
            DurationError::TooLarge(s) => {
                write!(
                    f,
                    "'{s}' is too large: durations are limited to 2^64 ns (about 584 years)"
                )
            }
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a duration into nanoseconds.
///
/// `bare_unit_ns` is the unit of a number written without one (`Some(1000)`
/// makes `"250"` mean 250 µs); `None` makes a bare number an error, which is
/// what configuration files want: `interval = 1000` is ambiguous there.
/// Fractions are refused rather than rounded, so nothing is silently
/// changed: `1.5ms` should be written `1500us`.
pub fn parse_duration_ns(input: &str, bare_unit_ns: Option<u64>) -> Result<u64, DurationError> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(DurationError::Empty);
    }
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    if number.is_empty() {
        return Err(DurationError::NotANumber(input.to_string()));
    }
    let unit = unit.trim();
    let scale = if unit.is_empty() {
        bare_unit_ns.ok_or_else(|| DurationError::MissingUnit(input.to_string()))?
    } else {
        UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(|| {
                if unit.starts_with('.') || unit.starts_with(',') {
                    DurationError::NotANumber(input.to_string())
                } else {
                    DurationError::UnknownUnit {
                        input: input.to_string(),
                        unit: unit.to_string(),
                    }
                }
            })?
    };
    let value: u64 = number
        .parse()
        .map_err(|_| DurationError::TooLarge(input.to_string()))?;
    value
        .checked_mul(scale)
        .ok_or_else(|| DurationError::TooLarge(input.to_string()))
}

/// Formats nanoseconds with the largest unit that divides them exactly, so
/// that printing and parsing round-trip (`1500000` → `1500us`).
pub fn format_duration_ns(ns: u64) -> String {
    if ns == 0 {
        return "0s".to_string();
    }
    // Skip "µs" (an alias of "us") and walk from the largest unit down.
    for (name, scale) in UNITS.iter().rev().filter(|(name, _)| *name != "µs") {
        if ns.is_multiple_of(*scale) {
            return format!("{}{}", ns / scale, name);
        }
    }
    unreachable!("every integer is a whole number of nanoseconds")
}

/// The wall clock as ns since the Unix epoch (0 before it).
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

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
    Ok(utc * NS_PER_SEC + frac_ns)
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn parses_each_unit() {
        let cases = [
            ("7ns", 7),
            ("100us", 100_000),
            ("100µs", 100_000),
            ("1ms", 1_000_000),
            ("10s", 10_000_000_000),
            ("2m", 120_000_000_000),
            ("1h", 3_600_000_000_000),
            ("1d", 86_400_000_000_000),
            (" 5 ms ", 5_000_000),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_duration_ns(input, None), Ok(expected), "{input}");
        }
    }

    #[test]
    fn bare_numbers_take_the_callers_unit() {
        assert_eq!(parse_duration_ns("250", Some(NS_PER_US)), Ok(250_000));
        assert_eq!(
            parse_duration_ns("60", Some(NS_PER_SEC)),
            Ok(60 * NS_PER_SEC)
        );
        assert_eq!(
            parse_duration_ns("250", None),
            Err(DurationError::MissingUnit("250".into()))
        );
    }

    #[test]
    fn rejects_malformed_input_with_a_reason() {
        assert_eq!(parse_duration_ns("", None), Err(DurationError::Empty));
        assert_eq!(parse_duration_ns("  ", None), Err(DurationError::Empty));
        assert!(matches!(
            parse_duration_ns("ms", None),
            Err(DurationError::NotANumber(_))
        ));
        assert!(matches!(
            parse_duration_ns("-5ms", None),
            Err(DurationError::NotANumber(_))
        ));
        assert!(matches!(
            parse_duration_ns("1.5ms", None),
            Err(DurationError::NotANumber(_))
        ));
        assert!(matches!(
            parse_duration_ns("10 parsecs", None),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration_ns("99999999999999999999ns", None),
            Err(DurationError::TooLarge(_))
        ));
        assert!(matches!(
            parse_duration_ns("999999999999d", None),
            Err(DurationError::TooLarge(_))
        ));
        let message = parse_duration_ns("5 parsecs", None)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("parsecs") && message.contains("ms"),
            "{message}"
        );
    }

    #[test]
    fn formatting_round_trips() {
        for ns in [
            0,
            1,
            999,
            1_000,
            1_500_000,
            60 * NS_PER_SEC,
            90 * NS_PER_SEC,
            123_456_789,
        ] {
            let text = format_duration_ns(ns);
            assert_eq!(parse_duration_ns(&text, None), Ok(ns), "{text}");
        }
        assert_eq!(format_duration_ns(1_000_000), "1ms");
        assert_eq!(format_duration_ns(100_000), "100us");
    }
}
