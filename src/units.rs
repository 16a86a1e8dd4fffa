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

#[cfg(test)]
mod tests {
    use super::*;

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

/// Both clocks read once, for one answer: `CLOCK_MONOTONIC`, which every
/// time kept is kept in, and the wall clock, read only to turn a
/// monotonic time into a Unix time at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Now {
    pub monotonic_ns: u64,
    pub unix_ns: u64,
}

impl Now {
    /// The Unix time, in seconds, of the `CLOCK_MONOTONIC` time `mono_ns`.
    pub fn unix_seconds_of(&self, mono_ns: u64) -> f64 {
        let age_ns = self.monotonic_ns.saturating_sub(mono_ns);
        let unix_ns = self.unix_ns.saturating_sub(age_ns);
        // Whole seconds and the fraction apart: ns since 1970 have more
        // digits than an f64 holds exactly.
        (unix_ns / NS_PER_SEC) as f64 + (unix_ns % NS_PER_SEC) as f64 / NS_PER_SEC as f64
    }
}
