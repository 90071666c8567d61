//! Input files that lie or are not text at all: a header that promises a huge matrix costs
//! nothing until its entries are there, an endless line costs a bounded amount of memory and
//! is a clear error, and a message never quotes raw control bytes.
//!
//! The memory is measured by counting what this test binary allocates (its own global
//! allocator). The counters see every thread, so each test holds [`TURN`] for its whole body,
//! not only while it measures: a test allocating outside a measurement (an 8 MiB input, say)
//! must not land in another test's peak.

use mbsp_algorithms::sparse::mondriaan;
use mbsp_algorithms::sparse::mtx::{self, MtxErrorKind, ReadOptions};
use mbsp_algorithms::text::MAX_LINE;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The system allocator, counting the bytes allocated now and the most at any time.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; the counters are only
// statistics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            NOW.fetch_sub(layout.size(), Ordering::Relaxed);
            let now = NOW.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// One test at a time (see the module docs).
static TURN: Mutex<()> = Mutex::new(());

/// Takes this test's turn; hold the guard for the whole test.
fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` and returns its result with the most bytes allocated at once while it ran, above
/// what was allocated when it started. The caller holds its [`turn`].
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

const MIB: usize = 1 << 20;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mbsp-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every character of a message is printable (no control characters at all).
fn assert_printable(msg: &str) {
    assert!(
        !msg.chars().any(char::is_control),
        "raw control character in {msg:?}"
    );
}

#[test]
fn a_header_promising_a_huge_matrix_allocates_nothing_for_it() {
    let _turn = turn();
    let (a, peak) = peak_of(|| {
        let text = "%%MatrixMarket matrix coordinate real general\n4000000000 4000000000 2\n\
                    1 1 1.5\n4000000000 4000000000 2.5\n";
        mtx::read(text.as_bytes(), "huge.mtx", &ReadOptions::default())
    });
    let a = a.unwrap();
    assert_eq!((a.rows, a.cols, a.nnz()), (4_000_000_000, 4_000_000_000, 2));
    assert!(peak < 16 * MIB, "peak {peak} bytes");

    let (e, peak) = peak_of(|| {
        let text = "%%MatrixMarket matrix coordinate real general\n10 10 1000000000000\n1 1 1.0\n";
        mtx::read(text.as_bytes(), "lying.mtx", &ReadOptions::default())
    });
    let e = e.unwrap_err();
    assert!(
        matches!(
            e.kind(),
            MtxErrorKind::TooFewEntries {
                declared: 1_000_000_000_000,
                found: 1
            }
        ),
        "{e}"
    );
    assert!(peak < 16 * MIB, "peak {peak} bytes");
}

#[test]
fn mondriaan_files_promising_huge_counts_allocate_nothing_for_them() {
    let _turn = turn();
    let dir = scratch("mondriaan-counts");
    let prefix = dir.join("m");
    std::fs::write(
        dir.join("m-P4294967295"),
        "%%MatrixMarket distributed-matrix coordinate real general\n\
         4000000000 4000000000 1000000000000 4294967295\n0\n",
    )
    .unwrap();
    let (e, peak) = peak_of(|| mondriaan::read(&prefix, 4_294_967_295));
    let e = e.unwrap_err().to_string();
    assert!(e.contains("part start 2 of 4294967296"), "{e}");
    // What the reader reserves ahead is capped (4 Mi part starts of 8 bytes).
    assert!(peak < 64 * MIB, "peak {peak} bytes");
    let v = dir.join("v");
    std::fs::write(&v, "4000000000 2\n1 1\n").unwrap();
    let (e, peak) = peak_of(|| mondriaan::read_vector(&v));
    let e = e.unwrap_err().to_string();
    assert!(e.contains("entry 2 of 4000000000"), "{e}");
    assert!(peak < 64 * MIB, "peak {peak} bytes");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `len` zero bytes, as a reader (nothing of that size is ever in memory).
fn zeros(len: u64) -> impl Read {
    std::io::repeat(0).take(len)
}

#[test]
fn an_endless_first_line_is_refused_after_a_bounded_read() {
    let _turn = turn();
    // The `/dev/zero` case: 256 MiB of zero bytes and no line end.
    let (e, peak) = peak_of(|| {
        mtx::read(
            BufReader::new(zeros(256 << 20)),
            "zeros",
            &ReadOptions::default(),
        )
    });
    let e = e.unwrap_err();
    let msg = e.to_string();
    assert_eq!(e.line(), Some(1));
    assert!(msg.contains("not a Matrix Market file"), "{msg}");
    assert!(msg.contains(r"\u{0}\u{0}"), "{msg}");
    assert_printable(&msg);
    assert!(peak < 8 * MAX_LINE, "peak {peak} bytes");

    // A banner that goes on and on.
    let banner = b"%%MatrixMarket matrix coordinate real general".as_slice();
    let (e, peak) = peak_of(|| {
        let input = banner.chain(zeros(64 << 20));
        mtx::read(BufReader::new(input), "long.mtx", &ReadOptions::default())
    });
    let e = e.unwrap_err();
    assert!(
        matches!(
            e.kind(),
            MtxErrorKind::LineTooLong {
                limit: MAX_LINE,
                ..
            }
        ),
        "{e}"
    );
    assert!(peak < 8 * MAX_LINE, "peak {peak} bytes");
}

#[test]
fn an_endless_line_among_the_entries_is_refused_after_a_bounded_read() {
    let _turn = turn();
    let head = b"%%MatrixMarket matrix coordinate real general\n% c\n3 3 3\n1 1 1\n2 2 2\n";
    for (what, tail) in [
        // No line end at all after the second entry.
        ("endless", 64u64 << 20),
        // A line just over the limit, then a line end and more.
        ("just over", MAX_LINE as u64 + 1),
    ] {
        let (e, peak) = peak_of(|| {
            let input = head
                .as_slice()
                .chain(zeros(tail))
                .chain(b"\n3 3 3\n".as_slice());
            mtx::read(BufReader::new(input), "body.mtx", &ReadOptions::default())
        });
        let e = e.unwrap_err();
        assert!(
            matches!(e.kind(), MtxErrorKind::LineTooLong { .. }),
            "{what}: {e}"
        );
        assert_eq!(e.line(), Some(6), "{what}: {e}");
        assert_printable(&e.to_string());
        // The blocks in flight are 1 MiB each, a few per thread.
        let bound = (2 * rayon::current_num_threads() + 8) * 2 * MAX_LINE;
        assert!(peak < bound, "{what}: peak {peak} bytes");
    }
    // A line of exactly MAX_LINE bytes is still read (a comment here).
    let mut long_comment = b"%".to_vec();
    long_comment.resize(MAX_LINE, b'x');
    let input = [&head[..], &long_comment, b"\n3 3 3\n"].concat();
    let a = mtx::read(input.as_slice(), "ok.mtx", &ReadOptions::default()).unwrap();
    assert_eq!(a.nnz(), 3);
}

#[test]
fn the_size_line_and_a_mondriaan_line_are_bounded_too() {
    let _turn = turn();
    let input = b"%%MatrixMarket matrix coordinate real general\n"
        .as_slice()
        .chain(zeros(8 << 20));
    let e = mtx::read(BufReader::new(input), "size.mtx", &ReadOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), MtxErrorKind::LineTooLong { .. }), "{e}");
    assert_eq!(e.line(), Some(2));

    let dir = scratch("mondriaan-line");
    let v = dir.join("v");
    let mut text = b"3 2\n1 1\n".to_vec();
    text.resize(text.len() + 3 * MAX_LINE, b'7');
    std::fs::write(&v, &text).unwrap();
    let (e, peak) = peak_of(|| mondriaan::read_vector(&v));
    let e = e.unwrap_err().to_string();
    assert!(
        e.contains(":3: the line is longer than 1048576 bytes"),
        "{e}"
    );
    assert!(peak < 8 * MAX_LINE, "peak {peak} bytes");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn messages_quote_input_with_control_characters_escaped() {
    let _turn = turn();
    let cases: [(&[u8], &str); 5] = [
        (b"hello\x01\x1b[31mred\n", r"hello\u{1}\u{1b}[31mred"),
        (
            b"%%MatrixMarket matrix coordinate re\x1bal general\n1 1 1\n1 1 1\n",
            r"re\u{1b}al",
        ),
        (
            b"%%MatrixMarket matrix coordinate real general\n2 2\x07 1\n1 1 1\n",
            r"2 2\u{7} 1",
        ),
        (
            b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\x00\xff\n",
            r"1\u{0}\xff",
        ),
        (
            b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1\x9b 1 1\n",
            r"1\x9b",
        ),
    ];
    for (input, quoted) in cases {
        let e = mtx::read(input, "ctrl.mtx", &ReadOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(quoted), "{msg}");
        assert_printable(&msg);
    }

    let dir = scratch("mondriaan-ctrl");
    let write = |name: &str, text: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let m = write(
        "m",
        b"%%MatrixMarket distributed-matrix coordinate re\x1b[2Jal general\n1 1 1 1\n0\n1\n1 1 1\n",
    );
    let e = mondriaan::read_matrix(&m).unwrap_err().to_string();
    assert!(e.contains(r"re\u{1b}[2jal"), "{e}");
    assert_printable(&e);
    let v = write("v", b"2 1\n1 1\n2\x07 1\n");
    let e = mondriaan::read_vector(&v).unwrap_err().to_string();
    assert!(e.contains(r"2\u{7}"), "{e}");
    assert_printable(&e);
    let _ = std::fs::remove_dir_all(&dir);
}
