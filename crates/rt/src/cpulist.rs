//! CPU lists in the kernel's notation (`0-3,8,10-11`), as found in
//! `/sys/devices/system/cpu/online` and as users write them after `--cpus`.
//!
//! Parsing is strict: a CPU named twice, a range written backwards or a
//! number past what the affinity API can address is an error that says
//! which part of the list was wrong, never something quietly fixed up.

use std::fmt;

/// The largest CPU count the affinity calls can address (`CPU_SETSIZE`).
pub const MAX_CPUS: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuListError {
    Empty,
    BadNumber { item: String },
    Backwards { item: String },
    TooLarge { cpu: usize },
    Duplicate { cpu: usize },
}

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuListError::Empty => write!(
                f,
                "the CPU list is empty: write CPU numbers and ranges such as 0-3,8 or 'all'"
            ),
            CpuListError::BadNumber { item } => write!(
                f,
                "'{item}' is not a CPU number or range: write e.g. 2 or 0-3, separated by commas"
            ),
            CpuListError::Backwards { item } => {
                write!(
                    f,
                    "range '{item}' runs backwards: write the lower CPU first"
                )
            }
            CpuListError::TooLarge { cpu } => write!(
                f,
                "CPU {cpu} is beyond the largest CPU number latencyd can pin to ({})",
                MAX_CPUS - 1
            ),
            CpuListError::Duplicate { cpu } => {
                write!(f, "CPU {cpu} is named more than once in the list")
            }
        }
    }
}

impl std::error::Error for CpuListError {}

/// Parses a CPU list into ascending, distinct CPU numbers.
///
/// A trailing newline (as sysfs files have) is accepted; empty items
/// (`0,,1`) are not.
pub fn parse_cpu_list(input: &str) -> Result<Vec<usize>, CpuListError> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(CpuListError::Empty);
    }
    let mut cpus = Vec::new();
    for item in trimmed.split(',') {
        let item = item.trim();
        let bad = || CpuListError::BadNumber {
            item: item.to_string(),
        };
        let (first, last) = match item.split_once('-') {
            Some((lo, hi)) => (
                parse_cpu(lo).ok_or_else(bad)?,
                parse_cpu(hi).ok_or_else(bad)?,
            ),
            None => {
                let cpu = parse_cpu(item).ok_or_else(bad)?;
                (cpu, cpu)
            }
        };
        if last < first {
            return Err(CpuListError::Backwards {
                item: item.to_string(),
            });
        }
        if last >= MAX_CPUS {
            return Err(CpuListError::TooLarge { cpu: last });
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    if let Some(pair) = cpus.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(CpuListError::Duplicate { cpu: pair[0] });
    }
    Ok(cpus)
}

/// A CPU number: ASCII digits only, so `+1`, ` 1` and `-1` are refused.
/// Numbers too large for `usize` map to a value that fails the range check.
fn parse_cpu(text: &str) -> Option<usize> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.parse::<usize>().unwrap_or(usize::MAX))
}

/// Formats ascending CPU numbers in the kernel's compact notation.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_notation() {
        let cases: &[(&str, &[usize])] = &[
            ("0", &[0]),
            ("0-3", &[0, 1, 2, 3]),
            ("0-3,8,10-11", &[0, 1, 2, 3, 8, 10, 11]),
            ("8,0-1\n", &[0, 1, 8]),
            (" 2 , 4 ", &[2, 4]),
            ("5-5", &[5]),
            ("1023", &[1023]),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_cpu_list(input).as_deref(), Ok(*expected), "{input:?}");
        }
    }

    #[test]
    fn rejects_malformed_lists() {
        use CpuListError::*;
        let cases: &[(&str, CpuListError)] = &[
            ("", Empty),
            (" \n", Empty),
            ("a", BadNumber { item: "a".into() }),
            ("0,,1", BadNumber { item: "".into() }),
            ("1-", BadNumber { item: "1-".into() }),
            ("-1", BadNumber { item: "-1".into() }),
            (
                "1-2-3",
                BadNumber {
                    item: "1-2-3".into(),
                },
            ),
            ("+1", BadNumber { item: "+1".into() }),
            ("0x1", BadNumber { item: "0x1".into() }),
            ("3-1", Backwards { item: "3-1".into() }),
            ("1024", TooLarge { cpu: 1024 }),
            ("0-99999999999999999999999", TooLarge { cpu: usize::MAX }),
            ("1,1", Duplicate { cpu: 1 }),
            ("0-3,2", Duplicate { cpu: 2 }),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_cpu_list(input).as_ref(), Err(expected), "{input:?}");
        }
    }

    #[test]
    fn formats_compactly_and_round_trips() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "");
        for list in ["0", "0-7", "1,3,5", "0-1,4-5,9"] {
            let cpus = parse_cpu_list(list).unwrap();
            assert_eq!(format_cpu_list(&cpus), list);
        }
    }
}
