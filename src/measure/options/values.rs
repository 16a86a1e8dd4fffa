//! Reading one option's value as cyclictest reads it, and saying so when
//! that differs from what was typed.
//!
//! cyclictest reads numbers with `atoi`: leading blanks are skipped (rteval
//! passes `"-h 3500"`), and anything after the digits is dropped. `measure`
//! takes the same numbers, but never quietly: what it drops or changes is a
//! `Note`, printed on stderr and kept in the JSON. A value with no number
//! at all is refused, naming the option, where cyclictest would read 0.

use std::fmt;

use crate::units::parse_duration_ns;

/// An option accepted, but not exactly as typed, or with no effect here;
/// printed on stderr before the run and listed in the JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub option: &'static str,
    pub message: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.option, self.message)
    }
}

/// A command-line value that cannot be used, with the option it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    pub option: &'static str,
    pub message: String,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.option, self.message)
    }
}

impl std::error::Error for UsageError {}

pub fn usage(option: &'static str, message: impl Into<String>) -> UsageError {
    UsageError {
        option,
        message: message.into(),
    }
}

/// Collects the notes of one command line.
#[derive(Debug, Default)]
pub struct Notes(pub Vec<Note>);

impl Notes {
    pub fn add(&mut self, option: &'static str, message: impl Into<String>) {
        self.0.push(Note {
            option,
            message: message.into(),
        });
    }
}

fn without_leading_blanks(text: &str) -> &str {
    text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c'])
}

/// An integer as `atoi` reads it, refusing a value without one.
pub fn integer(option: &'static str, text: &str, notes: &mut Notes) -> Result<i64, UsageError> {
    let body = without_leading_blanks(text);
    let sign_len = usize::from(body.starts_with(['-', '+']));
    let digits = body[sign_len..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    if digits == 0 {
        return Err(usage(
            option,
            format!("'{text}' is not a number; write a whole number such as 100"),
        ));
    }
    let number_len = sign_len + digits;
    let value: i64 = body[..number_len].parse().map_err(|_| {
        usage(
            option,
            format!("'{text}' is too large; write a smaller number"),
        )
    })?;
    if number_len < body.len() {
        notes.add(
            option,
            format!(
                "'{text}' read as {value}, as cyclictest's atoi reads it; '{}' ignored",
                &body[number_len..]
            ),
        );
    }
    Ok(value)
}

/// An integer that must lie in `range`.
pub fn integer_in(
    option: &'static str,
    text: &str,
    range: std::ops::RangeInclusive<i64>,
    notes: &mut Notes,
) -> Result<i64, UsageError> {
    let value = integer(option, text, notes)?;
    if !range.contains(&value) {
        return Err(usage(
            option,
            format!("{value} is outside {}..={}", range.start(), range.end()),
        ));
    }
    Ok(value)
}

/// A duration with a unit, or a bare number in `bare_unit_ns` (what
/// cyclictest's plain number means for this option).
pub fn duration(option: &'static str, text: &str, bare_unit_ns: u64) -> Result<u64, UsageError> {
    parse_duration_ns(without_leading_blanks(text), Some(bare_unit_ns))
        .map_err(|e| usage(option, e.to_string()))
}

/// A duration that may be negative (`-d`'s distance between intervals).
pub fn signed_duration(
    option: &'static str,
    text: &str,
    bare_unit_ns: u64,
) -> Result<i64, UsageError> {
    let body = without_leading_blanks(text);
    let (negative, rest) = match body.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, body),
    };
    let ns = duration(option, rest, bare_unit_ns)?;
    let ns = i64::try_from(ns).map_err(|_| usage(option, format!("'{text}' is too large")))?;
    Ok(if negative { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_as_atoi_reads_them_and_what_is_dropped_is_said() {
        let mut notes = Notes::default();
        assert_eq!(integer("-h", " 3500", &mut notes), Ok(3500));
        assert!(notes.0.is_empty(), "leading blanks are not worth a note");
        assert_eq!(integer("-p", "-5", &mut notes), Ok(-5));
        assert_eq!(integer("-p", "90x", &mut notes), Ok(90));
        assert_eq!(notes.0.len(), 1);
        assert!(notes.0[0].to_string().contains("'x' ignored"));
        let err = integer("-p", "abc", &mut notes).unwrap_err();
        assert!(err.to_string().contains("not a number"), "{err}");
        assert!(integer("-p", "99999999999999999999", &mut notes).is_err());
        assert!(integer_in("-c", "5", 0..=1, &mut notes).is_err());
    }

    #[test]
    fn durations_take_a_unit_or_the_options_own() {
        assert_eq!(duration("-i", " 200", 1_000), Ok(200_000));
        assert_eq!(duration("-i", "1ms", 1_000), Ok(1_000_000));
        assert_eq!(signed_duration("-d", "-5", 1_000), Ok(-5_000));
        assert_eq!(signed_duration("-d", "500", 1_000), Ok(500_000));
        assert!(duration("-i", "soon", 1_000).is_err());
    }
}
