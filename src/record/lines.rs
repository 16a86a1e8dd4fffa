//! A record file's lines, each read within a bound: an entry of the
//! widest histogram takes tens of kilobytes, and a longer line (a forged
//! or broken file, the zeros a crash leaves) is read past, never held,
//! asking its reader's client whether to go on as it goes.

use std::io::{BufRead, Read};

/// The longest line read: an entry of the widest histogram takes tens of
/// kilobytes; a longer line (a forged or broken file) is not held whole.
pub(super) const MAX_LINE_BYTES: u64 = 1 << 20;

/// What `next_line` found.
pub(super) enum NextLine {
    /// A line (its text in the buffer when it `fits` in
    /// `MAX_LINE_BYTES`; skipped to its end when not).
    Line {
        fits: bool,
    },
    End,
    /// `go_on` said stop inside a long line.
    Stopped,
}

/// How many bytes of an overlong line are skipped between two questions
/// to `go_on`: a range read inside a 5 GB line stopped with its client.
const SKIP_CHECK_BYTES: usize = 1 << 20;

/// Reads the next line into `buf`, never holding more than
/// `MAX_LINE_BYTES + 1` of it: a longer line is read past, asking `go_on`
/// every `SKIP_CHECK_BYTES`.
pub(super) fn next_line(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    go_on: &dyn Fn() -> bool,
) -> std::io::Result<NextLine> {
    buf.clear();
    let n = reader.take(MAX_LINE_BYTES + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(NextLine::End);
    }
    if buf.len() as u64 <= MAX_LINE_BYTES || buf.ends_with(b"\n") {
        return Ok(NextLine::Line {
            fits: buf.len() as u64 <= MAX_LINE_BYTES,
        });
    }
    buf.clear();
    let mut since_check = 0;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(NextLine::Line { fits: false });
        }
        if let Some(at) = available.iter().position(|&b| b == b'\n') {
            reader.consume(at + 1);
            return Ok(NextLine::Line { fits: false });
        }
        let n = available.len();
        reader.consume(n);
        since_check += n;
        if since_check >= SKIP_CHECK_BYTES {
            since_check = 0;
            if !go_on() {
                return Ok(NextLine::Stopped);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_read_past_within_its_bound_and_stops_with_its_client() {
        // A 5 MB line, then an ordinary one.
        let mut text = vec![b'0'; 5 << 20];
        text.extend_from_slice(b"\nnext\n");
        let mut reader = std::io::BufReader::new(&text[..]);
        let mut buf = Vec::new();
        let read = next_line(&mut reader, &mut buf, &|| true).unwrap();
        assert!(matches!(read, NextLine::Line { fits: false }));
        assert!(
            buf.capacity() as u64 <= 2 * (MAX_LINE_BYTES + 1),
            "held whole"
        );
        assert!(matches!(
            next_line(&mut reader, &mut buf, &|| true).unwrap(),
            NextLine::Line { fits: true }
        ));
        assert_eq!(buf, b"next\n");
        assert!(matches!(
            next_line(&mut reader, &mut buf, &|| true).unwrap(),
            NextLine::End
        ));
        // The client leaves inside the long line: stopped within a MiB or so.
        let asked = std::cell::Cell::new(0);
        let mut reader = std::io::BufReader::new(&text[..]);
        let read = next_line(&mut reader, &mut buf, &|| {
            asked.set(asked.get() + 1);
            false
        })
        .unwrap();
        assert!(matches!(read, NextLine::Stopped));
        assert_eq!(asked.get(), 1);
    }
}
