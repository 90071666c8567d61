//! The body of a Matrix Market file, read in blocks cut at line ends and parsed in parallel.

use super::error::MtxErrorKind;
use super::parse::{Facts, parse_block};
use crate::text::MAX_LINE;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// Size of the blocks the body is cut into: large enough that spawning a task per block costs
/// nothing, small enough that both cores get work early and few blocks wait in memory.
const BLOCK: usize = 1 << 20;
// A line longer than a block can only begin in the carried-over tail (see `read_blocks`).
const _: () = assert!(BLOCK <= MAX_LINE);

/// The entries of one block of lines, 0-based, before symmetric expansion.
pub(super) struct Block {
    pub(super) entries: Vec<(u32, u32, f64)>,
    /// Lines parsed (all of the block's lines unless `error` is set).
    pub(super) lines: usize,
    /// Block-local 0-based indices of the comment and blank lines, to find an entry's line.
    pub(super) skipped: Vec<usize>,
    /// The first bad line (block-local, 0-based) and what is wrong with it.
    pub(super) error: Option<(usize, MtxErrorKind)>,
}

impl Block {
    /// Block-local 0-based line of entry `k` of the block.
    pub(super) fn line_of_entry(&self, k: usize) -> usize {
        let mut line = k;
        for &s in &self.skipped {
            if s <= line {
                line += 1;
            } else {
                break;
            }
        }
        line
    }
}

/// Reads the body in blocks cut at line ends and parses them on rayon's pool while this thread
/// goes on reading (and decompressing). Returns the parsed blocks in file order and the error
/// that stopped the reading, if one did (the complete lines read before it are parsed).
///
/// The blocks are parsed independently and put back in file order, so the result does not
/// depend on thread timing. Reading stops early once a block has an error or more entries
/// than declared have been seen: the first error in the file then lies in a block already read.
pub(super) fn read_blocks<R: Read>(
    r: &mut R,
    facts: &Facts,
    declared: usize,
) -> (Vec<Block>, Option<Stopped>) {
    let stop = AtomicBool::new(false);
    let seen = AtomicUsize::new(0);
    let in_flight = AtomicUsize::new(0);
    // With this many blocks waiting, this thread parses the next block itself: it bounds the
    // memory held in blocks when reading is faster than parsing (an uncompressed file).
    let limit = 2 * rayon::current_num_threads() + 2;
    let (tx, rx) = mpsc::channel::<(usize, Block)>();
    let mut failure: Option<Stopped> = None;

    let parse = |i: usize, buf: Vec<u8>, tx: &mpsc::Sender<(usize, Block)>| {
        let b = parse_block(&buf, facts);
        drop(buf);
        let total = seen.fetch_add(b.entries.len(), Ordering::Relaxed) + b.entries.len();
        if b.error.is_some() || total > declared {
            stop.store(true, Ordering::Relaxed);
        }
        // The receiver lives until after the scope, so sending cannot fail.
        let _ = tx.send((i, b));
    };
    rayon::in_place_scope(|s| {
        let mut carry: Vec<u8> = Vec::new();
        let mut index = 0;
        while !stop.load(Ordering::Relaxed) {
            let mut buf = Vec::with_capacity(carry.len() + BLOCK);
            buf.append(&mut carry);
            let eof = match fill(r, &mut buf, BLOCK) {
                Ok(eof) => eof,
                Err(e) => {
                    // Parse the complete lines before the failure (a truncated .gz yields
                    // valid text up to the cut), so that the error names the first line
                    // that could not be read.
                    failure = Some(Stopped::Io(e));
                    let whole = buf.iter().rposition(|&c| c == b'\n').map_or(0, |k| k + 1);
                    buf.truncate(whole);
                    if !buf.is_empty() {
                        parse(index, buf, &tx);
                    }
                    break;
                }
            };
            // A line longer than MAX_LINE ends the reading, with the complete lines before it
            // parsed (the long line is the one after them). Only a line that began in `carry`
            // can be longer: a block alone holds at most BLOCK = MAX_LINE bytes.
            let first_end = buf.iter().position(|&c| c == b'\n');
            let long = match first_end {
                Some(k) => k > MAX_LINE,
                None => buf.len() > MAX_LINE,
            };
            if long {
                buf.truncate(64);
                failure = Some(Stopped::LongLine(buf));
                break;
            }
            if !eof {
                match buf.iter().rposition(|&c| c == b'\n') {
                    Some(k) => carry = buf.split_off(k + 1),
                    None => {
                        // One line longer than a block (but not than MAX_LINE): read on until
                        // it ends.
                        carry = buf;
                        continue;
                    }
                }
            }
            if buf.is_empty() {
                break; // eof (a non-eof block always holds a newline)
            }
            let i = index;
            index += 1;
            if eof || in_flight.load(Ordering::Relaxed) >= limit {
                parse(i, buf, &tx);
            } else {
                in_flight.fetch_add(1, Ordering::Relaxed);
                let tx = tx.clone();
                let (parse, in_flight) = (&parse, &in_flight);
                s.spawn(move |_| {
                    parse(i, buf, &tx);
                    in_flight.fetch_sub(1, Ordering::Relaxed);
                });
            }
            if eof {
                break;
            }
        }
    });
    drop(tx);
    let mut blocks: Vec<(usize, Block)> = rx.into_iter().collect();
    blocks.sort_unstable_by_key(|b| b.0);
    (blocks.into_iter().map(|b| b.1).collect(), failure)
}

/// Why [`read_blocks`] stopped before the end of the input.
pub(super) enum Stopped {
    /// Reading failed.
    Io(io::Error),
    /// A line is longer than [`MAX_LINE`]; its first bytes.
    LongLine(Vec<u8>),
}

/// Appends up to `want` bytes from `r` to `buf`; `Ok(true)` when the input has ended.
fn fill<R: Read>(r: &mut R, buf: &mut Vec<u8>, want: usize) -> io::Result<bool> {
    let mut got = buf.len();
    let end = got + want;
    buf.resize(end, 0);
    while got < end {
        match r.read(&mut buf[got..end]) {
            Ok(0) => {
                buf.truncate(got);
                return Ok(true);
            }
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(got);
                return Err(e);
            }
        }
    }
    Ok(false)
}
