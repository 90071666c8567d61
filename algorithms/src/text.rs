//! Text input, read safely: lines read with a bound on their length, and input (or anything
//! else a message quotes: tokens, paths) shown without raw control characters.
//!
//! A file of zero bytes or random data has no line ends: reading "a line" of it unbounded would
//! take all the memory there is, and quoting it would send raw control bytes (NUL, ESC, ...) to
//! the user's terminal. The readers of this crate ([`sparse::mtx`](crate::sparse::mtx),
//! [`sparse::mondriaan`](crate::sparse::mondriaan)) read lines with [`read_line`] and at most
//! [`MAX_LINE`] bytes each, and quote input with [`shown`].

use std::io::{self, BufRead};

/// The longest line the readers of this crate accept: 1 MiB, its line end not counted. The
/// formats they read have short lines (an entry line of a Matrix Market file is a few dozen
/// bytes; the format's own reference code allows 1024 characters), so a longer line is taken
/// for input that is not text of the format at all.
pub const MAX_LINE: usize = 1 << 20;

/// What [`read_line`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// A line, in the buffer with its `\n` (none if the input ends without one).
    Read,
    /// The input has ended: no line (the buffer is empty).
    End,
    /// The line is longer than the limit: the buffer holds its first `limit + 1` bytes, and the
    /// rest of it is not consumed.
    TooLong,
}

/// Reads one line of `r` into `buf` (cleared first), up to and including its `\n`, taking at
/// most `limit` bytes before the `\n`: a longer line is [`Line::TooLong`], not a larger buffer.
///
/// ```
/// use mbsp_algorithms::text::{Line, read_line};
/// let mut input = &b"ab\ncdefgh\n"[..];
/// let mut buf = Vec::new();
/// assert_eq!(read_line(&mut input, &mut buf, 4).unwrap(), Line::Read);
/// assert_eq!(buf, b"ab\n");
/// assert_eq!(read_line(&mut input, &mut buf, 4).unwrap(), Line::TooLong);
/// assert_eq!(buf, b"cdefg"); // the limit, plus the byte that proves the line longer
/// ```
pub fn read_line<R: BufRead + ?Sized>(
    r: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> io::Result<Line> {
    buf.clear();
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(if buf.is_empty() {
                Line::End
            } else {
                Line::Read
            });
        }
        // buf.len() <= limit here: room for the rest of a line of `limit` bytes and its `\n`.
        let take = avail.len().min(limit + 1 - buf.len());
        if let Some(k) = avail[..take].iter().position(|&c| c == b'\n') {
            buf.extend_from_slice(&avail[..=k]);
            r.consume(k + 1);
            return Ok(Line::Read);
        }
        buf.extend_from_slice(&avail[..take]);
        r.consume(take);
        if buf.len() > limit {
            return Ok(Line::TooLong);
        }
    }
}

/// Whether a character is shown escaped: control characters (NUL, ESC, DEL, C1, ...), and the
/// invisible ones that change how the text around them is displayed (bidirectional overrides,
/// zero-width characters, line and paragraph separators, the byte order mark).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// Appends `c`, escaped if it is [`hidden`]: `\t`, `\n`, `\r`, else `\u{..}` (Rust's notation).
fn push_char(out: &mut String, c: char) {
    if hidden(c) {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

/// `bytes` as text for a message: valid UTF-8 as it is except that control characters and
/// invisible formatting characters are escaped (`\u{0}`, `\u{1b}`, `\t`, ...), bytes that are
/// not UTF-8 as `\xNN`, one line end at the end dropped, and at most `max_chars` characters
/// of the result (an escape is not cut), followed by `...` when there is more.
///
/// ```
/// use mbsp_algorithms::text::shown;
/// assert_eq!(shown(b"caf\xc3\xa9 \x1b[31mred\r\n", 60), r"café \u{1b}[31mred");
/// assert_eq!(shown(b"\0\0\0\0\0\xff", 12), r"\u{0}\u{0}...");
/// assert_eq!(shown(b"a\xffb", 60), r"a\xffb");
/// ```
pub fn shown(bytes: &[u8], max_chars: usize) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let mut out = String::new();
    let mut count = 0;
    for chunk in bytes.utf8_chunks() {
        let invalid = chunk.invalid().iter().map(|&b| format!("\\x{b:02x}"));
        let valid = chunk.valid().chars().map(|c| {
            let mut s = String::new();
            push_char(&mut s, c);
            s
        });
        for piece in valid.chain(invalid) {
            let len = piece.chars().count();
            if count + len > max_chars {
                out.push_str("...");
                return out;
            }
            out.push_str(&piece);
            count += len;
        }
    }
    out
}

/// `s` with its control and invisible formatting characters escaped (see [`shown`]), whole:
/// for a message that quotes a path or anything else that came from outside.
///
/// ```
/// use mbsp_algorithms::text::escaped;
/// assert_eq!(escaped("dir/a\u{1b}[2Jb.mtx: not found"), r"dir/a\u{1b}[2Jb.mtx: not found");
/// assert_eq!(escaped("plain, ünïcode"), "plain, ünïcode");
/// ```
pub fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_char(&mut out, c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out its bytes `step` at a time (lines then span many refills).
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl io::Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let k = self.step.min(out.len()).min(self.data.len());
            out[..k].copy_from_slice(&self.data[..k]);
            self.data = &self.data[k..];
            Ok(k)
        }
    }

    fn lines(data: &[u8], limit: usize, step: usize) -> Vec<(Line, Vec<u8>)> {
        let mut r = io::BufReader::with_capacity(3, Trickle { data, step });
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            let l = read_line(&mut r, &mut buf, limit).unwrap();
            out.push((l, buf.clone()));
            if l != Line::Read {
                return out;
            }
        }
    }

    #[test]
    fn lines_up_to_the_limit_are_read_whole_across_refills() {
        for step in [1, 2, 5, 100] {
            let got = lines(b"abcd\n\nxyz", 4, step);
            assert_eq!(
                got,
                [
                    (Line::Read, b"abcd\n".to_vec()),
                    (Line::Read, b"\n".to_vec()),
                    (Line::Read, b"xyz".to_vec()),
                    (Line::End, Vec::new()),
                ],
                "step {step}"
            );
        }
    }

    #[test]
    fn a_longer_line_stops_at_the_limit() {
        for step in [1, 3, 100] {
            let got = lines(b"ab\nabcde\nrest\n", 4, step);
            assert_eq!(got[1], (Line::TooLong, b"abcde".to_vec()), "step {step}");
            assert_eq!(got.len(), 2);
        }
        // An endless line costs `limit + 1` bytes of buffer, not the input's size.
        let mut zeros = io::BufReader::new(io::Read::take(io::repeat(0), 1 << 30));
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut zeros, &mut buf, 1000).unwrap(),
            Line::TooLong
        );
        assert_eq!(buf.len(), 1001);
        assert!(buf.capacity() < 1 << 20, "{}", buf.capacity());
    }

    #[test]
    fn nothing_raw_is_shown() {
        let all: Vec<u8> = (0..=255u8).collect();
        let s = shown(&all, usize::MAX);
        assert!(!s.chars().any(hidden), "{s:?}");
        assert!(s.starts_with(r"\u{0}\u{1}"), "{s}");
        assert!(s.contains(r"\xff"), "{s}");
        let bidi = "a\u{202e}b\u{2066}c\u{feff}";
        assert_eq!(escaped(bidi), r"a\u{202e}b\u{2066}c\u{feff}");
        assert_eq!(shown(b"line\r\n", 60), "line");
        assert_eq!(shown(b"abcdef", 6), "abcdef");
        assert_eq!(shown(b"abcdefg", 6), "abcdef...");
    }
}
