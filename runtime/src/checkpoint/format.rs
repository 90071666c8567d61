//! The bytes of a checkpoint's files: one part per process and the manifest that makes the
//! checkpoint complete (layout in docs/checkpoint-design.md).
//!
//! A part is little-endian binary, every length written before its bytes, and ends with the
//! CRC-32 of everything before it; the manifest is text (a person can read what a folder
//! holds) and names each part's length and CRC-32, so a part that was truncated, corrupted or
//! left over from another checkpoint is found before anything is restored from it.

/// The first bytes of a part.
const MAGIC: &[u8; 8] = b"MBSPCKPT";
/// The format's version, in parts and manifests.
pub(crate) const VERSION: u32 = 1;
/// The manifest's first line.
const MANIFEST_HEAD: &str = "mbsp checkpoint";

use std::borrow::Cow;
use std::io::Write;

/// One registered slot of a process at the checkpoint, in push order: its contents borrowed
/// from the registered memory while a process writes its own part (no copy), owned when read
/// back or handed to the background writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Area<'a> {
    pub(crate) slot: u32,
    /// Registered as "nothing here" (a null registration).
    pub(crate) null: bool,
    /// The element type's name (`raw bytes` for registrations by address).
    pub(crate) ty: String,
    pub(crate) bytes: Cow<'a, [u8]>,
}

/// A message of a process's queue at the checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Msg {
    pub(crate) from: u32,
    pub(crate) tag: Vec<u8>,
    pub(crate) payload: Vec<u8>,
}

/// What one process saved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Part<'a> {
    pub(crate) pid: u32,
    pub(crate) p: u32,
    /// The superstep the program was in right after the checkpoint's sync.
    pub(crate) superstep: u64,
    /// The tag size in force for messages sent from the checkpoint on.
    pub(crate) tagsize: u64,
    /// The tag size of the messages in the queue (that of the superstep they were sent in,
    /// which a `set_tagsize` in it did not change).
    pub(crate) queue_tagsize: u64,
    /// The state's type name and its postcard bytes.
    pub(crate) state_type: String,
    pub(crate) state: Vec<u8>,
    pub(crate) areas: Vec<Area<'a>>,
    pub(crate) queue: Vec<Msg>,
}

/// A writer that counts and checksums what goes through it.
struct Summed<W> {
    w: W,
    crc: crc32fast::Hasher,
    len: u64,
}

impl<W: Write> Summed<W> {
    fn all(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.crc.update(b);
        self.len += b.len() as u64;
        self.w.write_all(b)
    }

    fn u32(&mut self, v: u32) -> std::io::Result<()> {
        self.all(&v.to_le_bytes())
    }

    fn u64(&mut self, v: u64) -> std::io::Result<()> {
        self.all(&v.to_le_bytes())
    }

    fn bytes(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.u64(b.len() as u64)?;
        self.all(b)
    }
}

impl Part<'_> {
    /// Write the part's file contents to `w`, its CRC-32 last; returns the length written and
    /// the CRC-32 of the whole (the manifest's entry for the part).
    pub(crate) fn encode_to(&self, w: impl Write) -> std::io::Result<(u64, u32)> {
        let mut s = Summed {
            w,
            crc: crc32fast::Hasher::new(),
            len: 0,
        };
        s.all(MAGIC)?;
        s.u32(VERSION)?;
        s.u32(self.pid)?;
        s.u32(self.p)?;
        s.u64(self.superstep)?;
        s.u64(self.tagsize)?;
        s.u64(self.queue_tagsize)?;
        s.bytes(self.state_type.as_bytes())?;
        s.bytes(&self.state)?;
        s.u64(self.areas.len() as u64)?;
        for a in &self.areas {
            s.u32(a.slot)?;
            s.all(&[u8::from(a.null)])?;
            s.bytes(a.ty.as_bytes())?;
            s.bytes(&a.bytes)?;
        }
        s.u64(self.queue.len() as u64)?;
        for m in &self.queue {
            s.u32(m.from)?;
            s.bytes(&m.tag)?;
            s.bytes(&m.payload)?;
        }
        let body_crc = s.crc.clone().finalize();
        s.u32(body_crc)?;
        s.w.flush()?;
        Ok((s.len, s.crc.finalize()))
    }

    /// The part's file contents (tests).
    #[cfg(test)]
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_to(&mut out).expect("writing to memory");
        out
    }

    /// This part with its areas copied (for the background writer), into buffers of `spare`
    /// where one is large enough (the smallest such), else new ones.
    pub(crate) fn into_owned(self, spare: &mut Vec<Vec<u8>>) -> Part<'static> {
        let mut copy = |b: &[u8]| {
            let fits = spare
                .iter()
                .enumerate()
                .filter(|(_, v)| v.capacity() >= b.len())
                .min_by_key(|(_, v)| v.capacity())
                .map(|(i, _)| i);
            let mut v = fits.map_or_else(Vec::new, |i| spare.swap_remove(i));
            v.clear();
            v.extend_from_slice(b);
            v
        };
        Part {
            areas: self
                .areas
                .into_iter()
                .map(|a| Area {
                    bytes: Cow::Owned(copy(&a.bytes)),
                    ..a
                })
                .collect(),
            ..self
        }
    }

    /// The buffers of this part's areas, for [`into_owned`](Self::into_owned) to reuse.
    pub(crate) fn into_buffers(self) -> impl Iterator<Item = Vec<u8>> {
        self.areas.into_iter().map(|a| a.bytes.into_owned())
    }
}

impl Part<'static> {
    /// Read a part's file contents, checking its CRC-32 and every length against what is
    /// left; the error says what is wrong.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Part<'static>, String> {
        if bytes.len() < MAGIC.len() + 8 || &bytes[..MAGIC.len()] != MAGIC {
            return Err(format!(
                "not a part of an mbsp checkpoint ({} bytes, no header)",
                bytes.len()
            ));
        }
        let (body, tail) = bytes.split_at(bytes.len() - 4);
        let want = u32::from_le_bytes(tail.try_into().expect("4 bytes"));
        let got = crc32fast::hash(body);
        if want != got {
            return Err(format!(
                "checksum mismatch (CRC-32 {got:08x}, the file says {want:08x}): the file is \
                 truncated or corrupted"
            ));
        }
        let mut r = Reader {
            b: &body[MAGIC.len()..],
        };
        let version = r.u32()?;
        if version != VERSION {
            return Err(format!(
                "format version {version}; this mbsp reads version {VERSION}"
            ));
        }
        let mut part = Part {
            pid: r.u32()?,
            p: r.u32()?,
            superstep: r.u64()?,
            tagsize: r.u64()?,
            queue_tagsize: r.u64()?,
            state_type: r.string()?,
            state: r.bytes()?.to_vec(),
            areas: Vec::new(),
            queue: Vec::new(),
        };
        for _ in 0..r.count(13)? {
            part.areas.push(Area {
                slot: r.u32()?,
                null: r.byte()? != 0,
                ty: r.string()?,
                bytes: Cow::Owned(r.bytes()?.to_vec()),
            });
        }
        for _ in 0..r.count(20)? {
            part.queue.push(Msg {
                from: r.u32()?,
                tag: r.bytes()?.to_vec(),
                payload: r.bytes()?.to_vec(),
            });
        }
        if !r.b.is_empty() {
            return Err(format!("{} bytes after the end of the part", r.b.len()));
        }
        Ok(part)
    }
}

/// Reads the fields of a part, each checked against the bytes left.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.b.len() {
            return Err(format!(
                "a field of {n} bytes where {} are left: the part is malformed",
                self.b.len()
            ));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| format!("a length of {n} bytes"))?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| "a name that is not UTF-8".into())
    }

    /// A count of items each at least `min` bytes long (so a corrupt count cannot make the
    /// reader reserve more than the file holds).
    fn count(&mut self, min: usize) -> Result<usize, String> {
        let n = self.u64()?;
        match usize::try_from(n) {
            Ok(n) if n <= self.b.len() / min => Ok(n),
            _ => Err(format!(
                "a count of {n} items in {} bytes: the part is malformed",
                self.b.len()
            )),
        }
    }
}

/// What every part of one checkpoint shares.
#[derive(Clone)]
pub(crate) struct Meta {
    pub(crate) seq: u64,
    pub(crate) p: usize,
    pub(crate) superstep: u64,
    pub(crate) state_type: String,
    /// Registrations per process (the same on every process).
    pub(crate) areas: usize,
}

/// What a process reports of its part: its length and CRC-32, or why it was not written.
pub(crate) type Report = Result<(u64, u32), String>;

/// A part handed to the writer thread of background checkpoints.
pub(crate) struct Job {
    pub(crate) meta: Meta,
    pub(crate) pid: usize,
    pub(crate) part: Part<'static>,
}

/// What the manifest of a complete checkpoint says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) program: String,
    pub(crate) p: usize,
    pub(crate) superstep: u64,
    pub(crate) state_type: String,
    /// Registrations per process.
    pub(crate) areas: usize,
    /// Per pid: the part's length in bytes and its CRC-32.
    pub(crate) parts: Vec<(u64, u32)>,
}

impl Manifest {
    pub(crate) fn encode(&self) -> String {
        let mut s = format!(
            "{MANIFEST_HEAD} {VERSION}\nprogram {}\np {}\nsuperstep {}\nstate {}\nareas {}\n",
            self.program, self.p, self.superstep, self.state_type, self.areas
        );
        for (pid, (len, crc)) in self.parts.iter().enumerate() {
            s += &format!("part {pid} {len} {crc:08x}\n");
        }
        // Last, the CRC-32 of all the lines before it: a damaged manifest is found as one.
        let crc = crc32fast::hash(s.as_bytes());
        s += &format!("crc {crc:08x}\n");
        s
    }

    pub(crate) fn decode(text: &str) -> Result<Manifest, String> {
        let body = text
            .trim_end_matches('\n')
            .rsplit_once('\n')
            .map_or("", |(body, _)| body);
        let last = text
            .trim_end_matches('\n')
            .rsplit('\n')
            .next()
            .unwrap_or("");
        let want = last
            .strip_prefix("crc ")
            .and_then(|c| u32::from_str_radix(c, 16).ok());
        let got = crc32fast::hash(format!("{body}\n").as_bytes());
        if want != Some(got) {
            return Err(format!(
                "checksum mismatch (the last line is {last:?}; the CRC-32 of the others is \
                 {got:08x}): the manifest is truncated or corrupted"
            ));
        }
        let mut lines = text.lines();
        let head = lines.next().unwrap_or("");
        if head != format!("{MANIFEST_HEAD} {VERSION}") {
            return Err(format!(
                "first line {head:?}, not {:?}",
                format!("{MANIFEST_HEAD} {VERSION}")
            ));
        }
        let mut field = |name: &str| -> Result<String, String> {
            let line = lines.next().unwrap_or("");
            line.strip_prefix(name)
                .and_then(|v| v.strip_prefix(' '))
                .map(str::to_string)
                .ok_or_else(|| format!("expected a line \"{name} ...\", found {line:?}"))
        };
        let number = |v: String, name: &str| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("{name} {v:?} is not a number"))
        };
        let program = field("program")?;
        let p = number(field("p")?, "p")? as usize;
        let superstep = number(field("superstep")?, "superstep")?;
        let state_type = field("state")?;
        let areas = number(field("areas")?, "areas")? as usize;
        let mut parts = Vec::new();
        for pid in 0..p {
            let line = field("part")?;
            let words: Vec<&str> = line.split(' ').collect();
            let parsed = match words[..] {
                [who, len, crc] if who == pid.to_string() => {
                    len.parse().ok().zip(u32::from_str_radix(crc, 16).ok())
                }
                _ => None,
            };
            parts.push(parsed.ok_or_else(|| format!("a malformed line \"part {line}\""))?);
        }
        Ok(Manifest {
            program,
            p,
            superstep,
            state_type,
            areas,
            parts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part() -> Part<'static> {
        Part {
            pid: 1,
            p: 3,
            superstep: 42,
            tagsize: 4,
            queue_tagsize: 2,
            state_type: "my::State".into(),
            state: vec![1, 2, 3],
            areas: vec![
                Area {
                    slot: 0,
                    null: false,
                    ty: "f64".into(),
                    bytes: vec![7; 16].into(),
                },
                Area {
                    slot: 1,
                    null: true,
                    ty: "raw bytes".into(),
                    bytes: vec![].into(),
                },
            ],
            queue: vec![Msg {
                from: 2,
                tag: vec![9; 2],
                payload: vec![5; 10],
            }],
        }
    }

    #[test]
    fn a_part_reads_back_as_written() {
        let p = part();
        let mut bytes = Vec::new();
        let (len, crc) = p.encode_to(&mut bytes).unwrap();
        assert_eq!((len, crc), (bytes.len() as u64, crc32fast::hash(&bytes)));
        assert_eq!(Part::decode(&bytes).unwrap(), p);
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_found() {
        let bytes = part().encode();
        for n in 0..bytes.len() {
            assert!(Part::decode(&bytes[..n]).is_err(), "truncated to {n}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(Part::decode(&b).is_err(), "byte {i} flipped");
        }
        let e = Part::decode(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(e.contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn a_manifest_reads_back_and_names_what_is_wrong() {
        let m = Manifest {
            program: "heat".into(),
            p: 2,
            superstep: 7,
            state_type: "u64".into(),
            areas: 3,
            parts: vec![(100, 0xdead_beef), (90, 1)],
        };
        assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
        // A changed line is caught by the checksum; with a right checksum, by the parser.
        let text = m.encode().replace("part 1 90", "part 1 x");
        let e = Manifest::decode(&text).unwrap_err();
        assert!(e.starts_with("checksum mismatch"), "{e}");
        let body: String = text
            .lines()
            .filter(|l| !l.starts_with("crc "))
            .map(|l| format!("{l}\n"))
            .collect();
        let text = format!("{body}crc {:08x}\n", crc32fast::hash(body.as_bytes()));
        let e = Manifest::decode(&text).unwrap_err();
        assert_eq!(e, "a malformed line \"part 1 x 00000001\"");
        let e = Manifest::decode("").unwrap_err();
        assert!(e.starts_with("checksum mismatch"), "{e}");
        let cut: String = m
            .encode()
            .lines()
            .take(7)
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(Manifest::decode(&cut).is_err());
    }
}
