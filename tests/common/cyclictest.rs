//! A parser for cyclictest's text output, written the way scripts read it
//! (by the `T:` lines and the `#` footers), and used on real cyclictest
//! output and on latencyd's alike.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadLine {
    pub thread: u64,
    pub tid: u64,
    pub priority: u64,
    pub interval_us: u64,
    pub cycles: u64,
    pub min: u64,
    pub act: u64,
    pub avg: u64,
    pub max: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistogramBlock {
    /// bin → count per column (threads, then the all-threads column of -H).
    pub rows: BTreeMap<u64, Vec<u64>>,
    pub footers: BTreeMap<String, Vec<u64>>,
    /// Per thread: the overflow sample numbers listed, and "N others".
    pub overflow_samples: Vec<(Vec<u64>, u64)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The last line seen for each thread (live output repeats them).
    pub threads: BTreeMap<u64, ThreadLine>,
    pub histogram: Option<HistogramBlock>,
    pub comments: Vec<String>,
}

/// Drops terminal control sequences (`ESC [ n A`) as a terminal would.
fn strip_escapes(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The number after `key:` (spaces allowed between), as `%7ld` pads it.
fn field(line: &str, key: &str) -> Result<u64, String> {
    let start = line
        .find(&format!("{key}:"))
        .ok_or_else(|| format!("no '{key}:' in {line:?}"))?
        + key.len()
        + 1;
    let digits: String = line[start..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits
        .parse()
        .map_err(|_| format!("'{key}:' has no number in {line:?}"))
}

fn parse_thread_line(line: &str) -> Result<ThreadLine, String> {
    let open = line.find('(').ok_or("no '(' before the tid")?;
    let close = line.find(')').ok_or("no ')' after the tid")?;
    let tid = line[open + 1..close]
        .trim()
        .parse()
        .map_err(|_| format!("bad tid in {line:?}"))?;
    Ok(ThreadLine {
        thread: field(line, "T")?,
        tid,
        priority: field(line, "P")?,
        interval_us: field(line, "I")?,
        cycles: field(line, "C")?,
        min: field(line, "Min")?,
        act: field(line, "Act")?,
        avg: field(line, "Avg")?,
        max: field(line, "Max")?,
    })
}

fn numbers(text: &str) -> Result<Vec<u64>, String> {
    text.split_whitespace()
        .map(|n| n.parse().map_err(|_| format!("'{n}' is not a number")))
        .collect()
}

pub fn parse(text: &str) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut histogram: Option<HistogramBlock> = None;
    let mut in_overflow_list = false;
    for raw in text.lines() {
        let line = strip_escapes(raw);
        let line = line.trim_end();
        if line.starts_with("T:") {
            let thread = parse_thread_line(line)?;
            parsed.threads.insert(thread.thread, thread);
        } else if line == "# Histogram" {
            histogram = Some(HistogramBlock::default());
        } else if let Some(block) = histogram.as_mut() {
            if line.is_empty() {
                continue;
            } else if line == "# Histogram Overflow at cycle number:" {
                in_overflow_list = true;
            } else if in_overflow_list && line.starts_with("# Thread ") {
                let (_, rest) = line.split_once(':').ok_or("no ':' after the thread")?;
                let (listed, others) = match rest.split_once('#') {
                    Some((listed, others)) => {
                        let count = others.trim().trim_end_matches("others").trim();
                        let count = count
                            .parse()
                            .map_err(|_| format!("bad overflow count in {line:?}"))?;
                        (listed, count)
                    }
                    None => (rest, 0),
                };
                block.overflow_samples.push((numbers(listed)?, others));
            } else if let Some(footer) = line.strip_prefix("# ") {
                let (name, values) = footer.split_once(':').ok_or("footer without ':'")?;
                block.footers.insert(name.to_string(), numbers(values)?);
            } else if line.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                let mut values = numbers(line)?;
                let bin = values.remove(0);
                block.rows.insert(bin, values);
            } else {
                return Err(format!("unexpected line in the histogram block: {line:?}"));
            }
        } else if line.starts_with('#') {
            parsed.comments.push(line.to_string());
        }
    }
    parsed.histogram = histogram;
    Ok(parsed)
}
