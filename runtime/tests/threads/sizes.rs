//! Hostile sizes: tag sizes, payloads, areas, offsets and process counts beyond the documented
//! limits are misuse errors naming the primitive and the value; sizes within the limits that
//! the machine cannot allocate end the run with an error of kind `System`. Never an allocator
//! abort, a capacity panic or a wrapped size.
#![cfg(target_os = "linux")]

use crate::common;
use common::{expect_err, within};
use mbsp::ErrorKind::{Misuse, System};
use mbsp::{MAX_MESSAGE, MAX_TAGSIZE, run};

/// An area of `len` bytes of address space that reads as zeros and costs no memory until
/// touched (the tests never touch it: the operations fail before copying).
struct Reserved {
    ptr: *mut u8,
    len: usize,
}

unsafe extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
    fn munmap(addr: *mut u8, len: usize) -> i32;
}

impl Reserved {
    fn new(len: usize) -> Reserved {
        const PROT_READ_WRITE: i32 = 1 | 2;
        const MAP_PRIVATE_ANONYMOUS_NORESERVE: i32 = 0x02 | 0x20 | 0x4000;
        // SAFETY: a fresh anonymous mapping; checked below.
        let ptr = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                PROT_READ_WRITE,
                MAP_PRIVATE_ANONYMOUS_NORESERVE,
                -1,
                0,
            )
        };
        assert!(ptr as isize != -1, "mmap of {len} bytes failed");
        Reserved { ptr, len }
    }

    /// The start (a method, so that closures capture the `Sync` mapping, not the pointer).
    fn at(&self) -> *mut u8 {
        self.ptr
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is readable for `len` bytes while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { munmap(self.ptr, self.len) };
    }
}

// SAFETY: the mapping is plain memory; the tests only hand out shared views of it.
unsafe impl Sync for Reserved {}

/// 1 TiB: more than this machine's memory (checked), within every limit.
const TIB: usize = 1 << 40;

/// Whether the allocation-failure paths can be reached here without touching memory: an
/// allocation of 1 TiB must fail (Linux's heuristic or strict overcommit) and be more than
/// the machine's memory. If not, the test is reported as skipped (`common::skip_here`) with
/// the reason, and checks nothing: with `vm.overcommit_memory = 1` such an allocation
/// succeeds and its first use would run the machine out of memory.
fn more_than_memory() -> bool {
    let why = if std::env::var_os("MBSP_TEST_MEMCHECK").is_some() {
        Some("valgrind (scripts/memcheck) cannot map 1 TiB of address space".to_string())
    } else if std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
        .is_ok_and(|mode| mode.trim() == "1")
    {
        Some("vm.overcommit_memory = 1: allocation failures cannot be provoked safely".into())
    } else {
        let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kib: usize = info
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(usize::MAX);
        (kib.saturating_mul(1024) >= TIB / 2)
            .then(|| format!("{kib} KiB of memory: 1 TiB is not more than twice as much"))
    };
    match why {
        Some(why) => {
            common::skip_here(&why);
            false
        }
        None => true,
    }
}

#[test]
fn tag_sizes_beyond_the_limit_are_refused() {
    within(60, || {
        for t in [MAX_TAGSIZE + 1, 1 << 40, usize::MAX - 7, usize::MAX] {
            let r = run(2, |ctx| ctx.set_tagsize(t).map(drop));
            expect_err(
                r,
                Misuse,
                "set_tagsize",
                None,
                Some(0),
                &[&format!(
                    "a tag size of {t} bytes exceeds the largest, {MAX_TAGSIZE} bytes"
                )],
            );
        }
        // The largest tag size works.
        let tags = run(2, |ctx| {
            ctx.set_tagsize(MAX_TAGSIZE)?;
            ctx.sync()?;
            let tag = vec![ctx.pid() as u8 + 1; MAX_TAGSIZE];
            ctx.send(1 - ctx.pid(), &tag, b"x")?;
            ctx.sync()?;
            let (len, tag) = ctx.get_tag()?.expect("a message");
            Ok((len, tag.len(), tag[MAX_TAGSIZE - 1]))
        })
        .unwrap();
        assert_eq!(tags, vec![(1, MAX_TAGSIZE, 2), (1, MAX_TAGSIZE, 1)]);
    });
}

#[test]
fn payloads_beyond_the_largest_message_are_refused() {
    within(60, || {
        // 2^17 + 1 views of 1 GiB of untouched zeros: 2^47 + 2^30 bytes.
        let gib = vec![0u8; 1 << 30];
        let parts: Vec<&[u8]> = vec![&gib[..]; (1 << 17) + 1];
        let total = (1usize << 47) + (1 << 30);
        let r = run(2, |ctx| ctx.send_parts(1 - ctx.pid(), &[], &parts));
        expect_err(
            r,
            Misuse,
            "send",
            None,
            Some(0),
            &[&format!(
                "a payload of {total} bytes exceeds the largest message, {MAX_MESSAGE} bytes"
            )],
        );
    });
}

#[test]
fn a_message_that_cannot_be_allocated_is_an_error() {
    if !more_than_memory() {
        return;
    }
    within(60, || {
        let area = Reserved::new(TIB);
        let r = run(2, |ctx| ctx.send(1 - ctx.pid(), &[], area.bytes()));
        expect_err(
            r,
            System,
            "send",
            None,
            Some(0),
            &[&format!(
                "could not allocate room for a message of {TIB} payload bytes (and a 0-byte tag)"
            )],
        );
        let r = run(2, |ctx| {
            ctx.set_tagsize(4)?;
            ctx.sync()?;
            // SAFETY: refused at the call: the payload is never read.
            unsafe { ctx.hpsend(1 - ctx.pid(), &[1, 2, 3, 4], area.bytes()) }
        });
        expect_err(
            r,
            System,
            "hpsend",
            None,
            Some(1),
            &["could not allocate room for a message", "a 4-byte tag"],
        );
        // One message of 1024 parts of 1 GiB (untouched zeros).
        let gib = vec![0u8; 1 << 30];
        let parts: Vec<&[u8]> = vec![&gib[..]; 1024];
        let r = run(1, |ctx| ctx.send_parts(0, &[], &parts));
        expect_err(r, System, "send", Some(0), Some(0), &["could not allocate"]);
    });
}

#[test]
fn puts_and_gets_that_cannot_be_buffered_are_errors() {
    if !more_than_memory() {
        return;
    }
    within(60, || {
        let (src, dst) = (Reserved::new(TIB), Reserved::new(TIB));
        let r = run(2, |ctx| {
            // SAFETY: the mapping outlives the run; nothing is written to it (the put fails).
            unsafe { ctx.push_reg_raw(dst.at(), TIB)? };
            ctx.sync()?;
            ctx.put_raw(1 - ctx.pid(), src.bytes(), dst.at(), 0)?;
            ctx.sync()
        });
        expect_err(
            r,
            System,
            "put",
            None,
            Some(1),
            &[&format!(
                "could not allocate room for a copy of {TIB} bytes in this superstep's outbox"
            )],
        );
        let r = run(2, |ctx| {
            // SAFETY: as above; the get fails at the call, before anything is read or written.
            unsafe {
                ctx.push_reg_raw(dst.at(), TIB)?;
                ctx.sync()?;
                ctx.get_raw(1 - ctx.pid(), dst.at(), 0, src.at(), TIB)?;
            }
            ctx.sync()
        });
        expect_err(
            r,
            System,
            "get",
            None,
            Some(1),
            &[&format!(
                "could not allocate room to buffer {TIB} more bytes of this superstep's gets"
            )],
        );
    });
}

#[test]
fn areas_that_cannot_exist_are_refused() {
    within(60, || {
        // Addresses as numbers (raw pointers are not Sync, the SPMD function must be).
        let mut buf = [0u8; 16];
        let at = buf.as_mut_ptr() as usize;
        for len in [usize::MAX, usize::MAX - 7, isize::MAX as usize + 1] {
            let r = run(1, |ctx| {
                // SAFETY: refused before the area is recorded.
                unsafe { ctx.push_reg_raw(at as *mut u8, len) }
            });
            expect_err(
                r,
                Misuse,
                "push_reg",
                Some(0),
                Some(0),
                &[
                    &format!("the area ({len} bytes at"),
                    "larger than any object",
                ],
            );
        }
        // Within isize::MAX bytes, but wrapping around the end of the address space.
        let high = usize::MAX - 100;
        let r = run(1, |ctx| {
            // SAFETY: refused before the area is recorded.
            unsafe { ctx.push_reg_raw(high as *mut u8, 1000) }
        });
        expect_err(r, Misuse, "push_reg", None, None, &["ending inside"]);
        let r = run(2, |ctx| {
            // SAFETY: the buffer outlives the run and no reference to it is held.
            unsafe { ctx.push_reg_raw(at as *mut u8, 16)? };
            ctx.sync()?;
            // SAFETY: refused before anything is written.
            unsafe { ctx.get_raw(1 - ctx.pid(), at as *const u8, 0, high as *mut u8, 1000)? };
            ctx.sync()
        });
        expect_err(
            r,
            Misuse,
            "get",
            None,
            Some(1),
            &["the destination (1000 bytes at", "larger than any object"],
        );
    });
}

#[test]
fn offsets_that_overflow_are_refused() {
    within(60, || {
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u64; 4])?;
            ctx.sync()?;
            ctx.put(1 - ctx.pid(), &[1u64], &x, usize::MAX / 4)?;
            ctx.sync()
        });
        expect_err(r, Misuse, "put", None, Some(1), &["overflows"]);
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            ctx.put_bytes(1 - ctx.pid(), &[1, 2], &x, usize::MAX)?;
            ctx.sync()
        });
        expect_err(
            r,
            Misuse,
            "put",
            None,
            Some(1),
            &[&format!(
                "offset {} + 2 bytes exceeds the 4 bytes",
                usize::MAX
            )],
        );
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            ctx.get_bytes(1 - ctx.pid(), &x, 0..2, &x, usize::MAX - 1)?;
            ctx.sync()
        });
        expect_err(
            r,
            Misuse,
            "get",
            None,
            Some(1),
            &["destination offset 18446744073709551614 + 2 bytes exceeds the 4 bytes"],
        );
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u32; 4])?;
            ctx.sync()?;
            ctx.get(1 - ctx.pid(), &x, usize::MAX - 1..=usize::MAX, &x, 0)?;
            ctx.sync()
        });
        expect_err(r, Misuse, "get", None, Some(1), &["overflows"]);
    });
}

#[test]
fn process_counts_beyond_the_machine_are_refused() {
    within(60, || {
        let Some((max, why)) = mbsp::max_procs() else {
            common::skip_here("no process limit is known on this machine");
            return;
        };
        for p in [1_000_000_000, usize::MAX, max + 1] {
            let r = run(p, |_| Ok(()));
            let e = expect_err(
                r,
                Misuse,
                "run",
                None,
                None,
                &[
                    &format!("p = {p} processes cannot run on this machine: at most {max} can"),
                    &why,
                ],
            );
            assert!(e.path().is_empty(), "{e}");
            let e = mbsp::Run::new(p).begin(|_| Ok(())).unwrap_err();
            assert!(e.to_string().contains(&format!("at most {max}")), "{e}");
        }
        // Nested: the process that asks is named.
        let r = run(2, |ctx| {
            if ctx.pid() == 1 {
                ctx.run(1_000_000_000, |_| Ok(()))?;
            }
            ctx.sync()
        });
        expect_err(
            r,
            Misuse,
            "run",
            Some(1),
            Some(0),
            &["p = 1000000000 processes cannot run on this machine"],
        );
    });
}
