//! The kernel's ring-buffer pages, as `per_cpu/cpuN/trace_pipe_raw` hands
//! them out: one sub-buffer per `read`, binary, in the CPU's byte order.
//!
//! A page is a header (`events/header_page`: a timestamp, then `commit`,
//! the bytes of data, whose top bits flag events lost before the page)
//! and the data: records of a 32-bit header (`type_len`: 5 bits,
//! `time_delta`: 27 bits) and a payload. `type_len` 1–28 is a payload of
//! that many 32-bit words; 0, a payload whose length is in the next word;
//! 29, padding (a discarded event, or the rest of the page when its delta
//! is 0); 30, a time extension (the next word, shifted by 27, added to the
//! delta); 31, an absolute timestamp. Each record's time is the page's
//! timestamp plus the deltas before it, including its own.
//!
//! Nothing here allocates: the records are handed to a closure as slices
//! of the page.

/// Where the page header keeps what (from `events/header_page`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    /// Offset and size of `commit` (the data's length and the flags).
    pub commit_offset: usize,
    pub commit_size: usize,
    /// Where the data starts.
    pub data_offset: usize,
}

/// `commit`'s flag: events were lost before this page.
const MISSED_EVENTS: u64 = 1 << 31;
/// The data's length is in `commit`'s low 27 bits... on every kernel
/// since the flags were added (2.6.36); older ones have no flags.
const COMMIT_MASK: u64 = (1 << 27) - 1;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// An absolute timestamp carries 59 bits; the top bits stay the page's.
const TIME_STAMP_BITS: u64 = (1 << 59) - 1;

/// What a page held besides its records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageInfo {
    /// Records handed to the closure.
    pub records: u64,
    /// The kernel flagged events lost before this page.
    pub missed: bool,
}

/// Why a page could not be read to its end (what was read before the
/// fault was still handed out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageError(pub String);

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PageLayout {
    /// Reads `events/header_page`:
    /// `field: u64 timestamp; offset:0; size:8; ...` and so on.
    pub fn parse(text: &str) -> Result<PageLayout, String> {
        let mut commit = None;
        let mut data = None;
        for line in text.lines() {
            let Some(field) = line.trim().strip_prefix("field:") else {
                continue;
            };
            let name = field
                .split(';')
                .next()
                .and_then(|decl| decl.split_whitespace().last())
                .unwrap_or("");
            let number = |key: &str| -> Option<usize> {
                field
                    .split(';')
                    .find_map(|part| part.trim().strip_prefix(key))
                    .and_then(|v| v.trim().parse().ok())
            };
            match (name, number("offset:"), number("size:")) {
                ("commit", Some(offset), Some(size)) => commit = Some((offset, size)),
                ("data", Some(offset), _) => data = Some(offset),
                _ => {}
            }
        }
        match (commit, data) {
            (Some((commit_offset, commit_size)), Some(data_offset))
                if matches!(commit_size, 4 | 8) =>
            {
                Ok(PageLayout {
                    commit_offset,
                    commit_size,
                    data_offset,
                })
            }
            _ => Err(format!(
                "events/header_page does not name the page's commit and data fields as \
                 expected: {:?}",
                text.lines().take(4).collect::<Vec<_>>()
            )),
        }
    }

    /// Hands each record of `page` to `each` as (timestamp in the
    /// instance's clock, payload), oldest first.
    pub fn records(
        &self,
        page: &[u8],
        mut each: impl FnMut(u64, &[u8]),
    ) -> Result<PageInfo, PageError> {
        let mut info = PageInfo::default();
        let header_end = self.data_offset.max(self.commit_offset + self.commit_size);
        if page.len() < header_end.max(8) {
            return Err(PageError(format!(
                "a page of {} bytes is shorter than its header",
                page.len()
            )));
        }
        let mut ts = u64_at(page, 0);
        let commit = match self.commit_size {
            4 => u64::from(u32_at(page, self.commit_offset)),
            _ => u64_at(page, self.commit_offset),
        };
        info.missed = commit & MISSED_EVENTS != 0;
        let length = (commit & COMMIT_MASK) as usize;
        let end = self.data_offset + length;
        if end > page.len() {
            return Err(PageError(format!(
                "the page says it holds {length} bytes of data, more than the {} read",
                page.len() - self.data_offset
            )));
        }
        let mut at = self.data_offset;
        while at + 4 <= end {
            let header = u32_at(page, at);
            let type_len = header & 0x1f;
            let delta = u64::from(header >> 5);
            let word = |at: usize| -> Result<u32, PageError> {
                if at + 4 > end {
                    return Err(PageError(format!(
                        "a record at byte {at} runs past the page's data"
                    )));
                }
                Ok(u32_at(page, at))
            };
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        break;
                    }
                    ts = ts.wrapping_add(delta);
                    at += 4 + word(at + 4)? as usize;
                }
                TYPE_TIME_EXTEND => {
                    ts = ts.wrapping_add((u64::from(word(at + 4)?) << 27) + delta);
                    at += 8;
                }
                TYPE_TIME_STAMP => {
                    let stamp = (u64::from(word(at + 4)?) << 27) | delta;
                    ts = (ts & !TIME_STAMP_BITS) | (stamp & TIME_STAMP_BITS);
                    at += 8;
                }
                0 => {
                    let len = word(at + 4)? as usize;
                    if len < 4 || at + 4 + len > end {
                        return Err(PageError(format!(
                            "a record at byte {at} has a length of {len} bytes that does not \
                             fit the page"
                        )));
                    }
                    ts = ts.wrapping_add(delta);
                    each(ts, &page[at + 8..at + 4 + len]);
                    info.records += 1;
                    at += 4 + len;
                }
                words => {
                    let len = words as usize * 4;
                    if at + 4 + len > end {
                        return Err(PageError(format!(
                            "a record at byte {at} of {len} bytes runs past the page's data"
                        )));
                    }
                    ts = ts.wrapping_add(delta);
                    each(ts, &page[at + 4..at + 4 + len]);
                    info.records += 1;
                    at += 4 + len;
                }
            }
        }
        Ok(info)
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Builds pages as the kernel writes them, for tests here and in the
/// modules that read events.
#[cfg(test)]
pub(crate) mod build {
    use super::*;

    pub const LAYOUT: PageLayout = PageLayout {
        commit_offset: 8,
        commit_size: 8,
        data_offset: 16,
    };

    /// A page under construction.
    pub struct Page {
        pub bytes: Vec<u8>,
        pub last_ts: u64,
    }

    impl Page {
        pub fn new(ts: u64) -> Page {
            let mut bytes = vec![0u8; 16];
            bytes[..8].copy_from_slice(&ts.to_ne_bytes());
            Page { bytes, last_ts: ts }
        }

        fn header(&mut self, type_len: u32, delta: u64) {
            assert!(delta < 1 << 27);
            let header = type_len | ((delta as u32) << 5);
            self.bytes.extend_from_slice(&header.to_ne_bytes());
        }

        /// A record at `ts`, with a time extension first when the delta
        /// does not fit 27 bits.
        pub fn record(&mut self, ts: u64, payload: &[u8]) -> &mut Page {
            let mut delta = ts - self.last_ts;
            if delta >= 1 << 27 {
                self.header(TYPE_TIME_EXTEND, delta & ((1 << 27) - 1));
                self.bytes
                    .extend_from_slice(&((delta >> 27) as u32).to_ne_bytes());
                delta = 0;
            }
            self.last_ts = ts;
            let mut padded = payload.to_vec();
            padded.resize(payload.len().div_ceil(4) * 4, 0);
            if padded.len() <= 28 * 4 && !padded.is_empty() {
                self.header((padded.len() / 4) as u32, delta);
            } else {
                self.header(0, delta);
                self.bytes
                    .extend_from_slice(&(padded.len() as u32 + 4).to_ne_bytes());
            }
            self.bytes.extend_from_slice(&padded);
            self
        }

        /// A discarded event: padding that still moves the time on.
        pub fn discarded(&mut self, ts: u64, len: u32) -> &mut Page {
            let delta = ts - self.last_ts;
            self.last_ts = ts;
            self.header(TYPE_PADDING, delta);
            self.bytes.extend_from_slice(&len.to_ne_bytes());
            self.bytes.resize(self.bytes.len() + len as usize - 4, 0);
            self
        }

        /// The page as `read` returns it: commit set, `missed` flagged,
        /// filled with zeros to `size` bytes.
        pub fn finish(&self, missed: bool, size: usize) -> Vec<u8> {
            let mut bytes = self.bytes.clone();
            let mut commit = (bytes.len() - 16) as u64;
            if missed {
                commit |= MISSED_EVENTS;
            }
            bytes[8..16].copy_from_slice(&commit.to_ne_bytes());
            bytes.resize(size.max(bytes.len()), 0);
            bytes
        }
    }
}

#[cfg(test)]
mod tests {
    use super::build::{LAYOUT, Page};
    use super::*;

    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
        \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
        \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
        \tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

    type Records = Vec<(u64, Vec<u8>)>;

    fn collect(page: &[u8]) -> (Records, Result<PageInfo, PageError>) {
        let mut out = Vec::new();
        let info = LAYOUT.records(page, |ts, data| out.push((ts, data.to_vec())));
        (out, info)
    }

    #[test]
    fn the_header_page_of_a_64_bit_kernel_is_read() {
        assert_eq!(PageLayout::parse(HEADER_PAGE).unwrap(), LAYOUT);
        let err = PageLayout::parse("field: u64 timestamp; offset:0; size:8;").unwrap_err();
        assert!(err.contains("header_page"), "{err}");
    }

    #[test]
    fn records_come_out_with_their_times_and_payloads() {
        let mut page = Page::new(1_000);
        page.record(1_500, &[1, 2, 3, 4])
            .record(1_500, &[5; 8])
            // A payload too long for type_len: its length in a word.
            .record(2_000, &[7; 200])
            // A delta too long for 27 bits: a time extension first.
            .record(2_000 + (1 << 30) + 3, &[9; 4]);
        let (records, info) = collect(&page.finish(false, 4096));
        let info = info.unwrap();
        assert_eq!(info.records, 4);
        assert!(!info.missed);
        let times: Vec<u64> = records.iter().map(|r| r.0).collect();
        assert_eq!(times, vec![1_500, 1_500, 2_000, 2_000 + (1 << 30) + 3]);
        assert_eq!(records[0].1, vec![1, 2, 3, 4]);
        assert_eq!(records[1].1, vec![5; 8]);
        assert_eq!(records[2].1, vec![7; 200]);
        assert_eq!(records[3].1, vec![9; 4]);
    }

    #[test]
    fn discarded_events_are_skipped_but_keep_the_time_and_lost_events_are_flagged() {
        let mut page = Page::new(100);
        page.record(110, &[1; 4])
            .discarded(150, 16)
            .record(160, &[2; 4]);
        let (records, info) = collect(&page.finish(true, 4096));
        assert!(info.unwrap().missed);
        assert_eq!(records, vec![(110, vec![1; 4]), (160, vec![2; 4])]);
    }

    #[test]
    fn an_absolute_timestamp_replaces_the_running_time() {
        let mut page = Page::new(5_000);
        page.record(5_010, &[1; 4]);
        let mut bytes = page.bytes.clone();
        let stamp: u64 = 9_000_000_000;
        let header = TYPE_TIME_STAMP | (((stamp & ((1 << 27) - 1)) as u32) << 5);
        bytes.extend_from_slice(&header.to_ne_bytes());
        bytes.extend_from_slice(&((stamp >> 27) as u32).to_ne_bytes());
        // A record 7 ns after the absolute stamp.
        bytes.extend_from_slice(&(1u32 | (7 << 5)).to_ne_bytes());
        bytes.extend_from_slice(&[3; 4]);
        let page = Page {
            bytes,
            ..Page::new(0)
        };
        let (records, info) = collect(&page.finish(false, 4096));
        info.unwrap();
        assert_eq!(records[1].0, stamp + 7);
    }

    #[test]
    fn a_corrupt_page_is_an_error_after_what_could_be_read() {
        let mut page = Page::new(0);
        page.record(10, &[1; 4]);
        let mut bytes = page.finish(false, 0);
        // A second record claiming 40 words where the data ends.
        bytes.extend_from_slice(&(20u32).to_ne_bytes());
        let commit = (bytes.len() - 16) as u64;
        bytes[8..16].copy_from_slice(&commit.to_ne_bytes());
        let (records, info) = collect(&bytes);
        assert_eq!(records.len(), 1);
        assert!(info.unwrap_err().0.contains("runs past"));
        // A commit larger than what was read.
        let mut short = page.finish(false, 0);
        short[8..16].copy_from_slice(&4096u64.to_ne_bytes());
        assert!(collect(&short).1.unwrap_err().0.contains("more than"));
        assert!(collect(&[0u8; 7]).1.is_err());
    }
}
