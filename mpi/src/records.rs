//! The records of one rank's outgoing stream to another in a superstep: little-endian words,
//! a kind word first.
//!
//! ```text
//! put:  1, registration, byte offset, length, bytes (padded to 8)
//! get:  2, registration, byte offset, length
//! send: 3, tag length, payload length, tag, payload (padded to 8)
//! ```

const PUT: u64 = 1;
const GET: u64 = 2;
const SEND: u64 = 3;

/// One record, borrowing its bytes.
pub(crate) enum Record<'a> {
    Put {
        reg: usize,
        at: usize,
        bytes: &'a [u8],
    },
    Get {
        reg: usize,
        at: usize,
        len: usize,
    },
    Send {
        tag: &'a [u8],
        payload: &'a [u8],
    },
}

fn word(out: &mut Vec<u8>, w: u64) {
    out.extend_from_slice(&w.to_le_bytes());
}

fn padded(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(bytes);
    out.resize(out.len().next_multiple_of(8), 0);
}

impl Record<'_> {
    /// Appends the record to `out`.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match *self {
            Record::Put { reg, at, bytes } => {
                for w in [PUT, reg as u64, at as u64, bytes.len() as u64] {
                    word(out, w);
                }
                padded(out, bytes);
            }
            Record::Get { reg, at, len } => {
                for w in [GET, reg as u64, at as u64, len as u64] {
                    word(out, w);
                }
            }
            Record::Send { tag, payload } => {
                for w in [SEND, tag.len() as u64, payload.len() as u64] {
                    word(out, w);
                }
                let start = out.len();
                out.extend_from_slice(tag);
                out.extend_from_slice(payload);
                let end = out.len();
                out.resize(start + (end - start).next_multiple_of(8), 0);
            }
        }
    }
}

/// The records of one stream, in order. The streams come from this crate's own writer on
/// another rank of the same program; a stream that does not parse is a bug, and panics.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    fn word(&mut self) -> usize {
        let (w, rest) = self.0.split_at(8);
        self.0 = rest;
        u64::from_le_bytes(w.try_into().expect("8 bytes")) as usize
    }

    fn bytes(&mut self, len: usize) -> &'a [u8] {
        let (b, rest) = self.0.split_at(len);
        self.0 = &rest[(len.next_multiple_of(8) - len).min(rest.len())..];
        b
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        if self.0.is_empty() {
            return None;
        }
        Some(match self.word() as u64 {
            PUT => {
                let (reg, at, len) = (self.word(), self.word(), self.word());
                Record::Put {
                    reg,
                    at,
                    bytes: self.bytes(len),
                }
            }
            GET => Record::Get {
                reg: self.word(),
                at: self.word(),
                len: self.word(),
            },
            SEND => {
                let (t, n) = (self.word(), self.word());
                let both = self.bytes(t + n);
                Record::Send {
                    tag: &both[..t],
                    payload: &both[t..],
                }
            }
            k => panic!("mbsp-mpi: record kind {k} in a stream: a bug"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let mut out = Vec::new();
        Record::Put {
            reg: 3,
            at: 16,
            bytes: &[1, 2, 3],
        }
        .write(&mut out);
        Record::Get {
            reg: 1,
            at: 8,
            len: 24,
        }
        .write(&mut out);
        Record::Send {
            tag: &[9],
            payload: &[7, 7, 7, 7, 7, 7, 7, 7, 7],
        }
        .write(&mut out);
        Record::Put {
            reg: 0,
            at: 0,
            bytes: &[],
        }
        .write(&mut out);
        assert_eq!(out.len() % 8, 0);
        let got: Vec<String> = Reader(&out)
            .map(|r| match r {
                Record::Put { reg, at, bytes } => format!("put {reg} {at} {bytes:?}"),
                Record::Get { reg, at, len } => format!("get {reg} {at} {len}"),
                Record::Send { tag, payload } => format!("send {tag:?} {payload:?}"),
            })
            .collect();
        assert_eq!(
            got,
            [
                "put 3 16 [1, 2, 3]",
                "get 1 8 24",
                "send [9] [7, 7, 7, 7, 7, 7, 7, 7, 7]",
                "put 0 0 []"
            ]
        );
    }
}
