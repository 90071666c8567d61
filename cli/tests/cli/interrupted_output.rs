//! Nothing half-written, ever: `mbsp partition --out DIR/` interrupted by SIGINT, SIGTERM or
//! SIGHUP at many moments (while reading, partitioning, writing, renaming, after), or writing
//! onto a full disk (a tiny tmpfs), leaves Mondriaan's three files either all as they were or
//! all new and whole, and no temporary file; the message says which. The real binary is run
//! and signalled from outside, as a user would.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What the old output files hold before each run.
const OLD: &[u8] = b"old\n";

/// Writes a random sparse matrix with about `nnz` entries near the diagonal of an `n x n`
/// matrix (deterministic).
fn write_matrix(path: &Path, n: u64, nnz: u64) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(
        w,
        "%%MatrixMarket matrix coordinate real general\n{n} {n} {nnz}"
    )
    .unwrap();
    let mut r = mbsp::rng::SplitMix64::new(1);
    let mut next = || r.next_u64();
    for _ in 0..nnz {
        let i = next() % n;
        let j = (i + next() % 101 + n - 50) % n;
        writeln!(w, "{} {} {}", i + 1, j + 1, (next() % 1000) as f64 / 7.0).unwrap();
    }
    w.flush().unwrap();
}

/// Mondriaan's three files for `prefix` and `p`.
fn set_of(prefix: &Path, p: usize) -> [PathBuf; 3] {
    ["P", "u", "v"].map(|s| {
        let mut name = prefix.as_os_str().to_owned();
        name.push(format!("-{s}{p}"));
        PathBuf::from(name)
    })
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `mbsp partition FILE -p P --out DIR/`, stderr piped.
fn start(file: &Path, p: usize, out: &Path) -> Child {
    let mut out_dir = out.as_os_str().to_owned();
    out_dir.push("/");
    Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .arg("partition")
        .arg(file)
        .args(["-p", &p.to_string(), "--out"])
        .arg(out_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mbsp")
}

/// Waits for `child` (a hang detector: 300 s, far above the seconds a run takes) and returns
/// its exit status and the lines of its stderr not yet taken from `lines`.
fn finish(mut child: Child, lines: mpsc::Receiver<String>) -> (Option<i32>, Vec<String>) {
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            panic!("mbsp did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (status.code(), lines.into_iter().collect())
}

/// Forwards the lines of `child`'s stderr to a channel.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Sends `signal` to `child` (which may have ended just before: that is one of the moments
/// tested, so a failure to deliver is no error).
fn kill(child: &Child, signal: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status();
}

/// When to send the signal in one run.
#[derive(Clone, Copy, Debug)]
enum Moment {
    /// This long after the start.
    AfterStart(Duration),
    /// This long after the "writing" progress line.
    AfterWriting(Duration),
    /// As soon as a temporary file shows up in the output directory (mid-write).
    OnTemporary,
}

/// One interrupted run: sends `signal` at `moment`, then checks that the three files are all
/// old or all equal to `want` (and which the message says), and that no temporary is left.
fn interrupted_run(
    file: &Path,
    p: usize,
    dir: &Path,
    want: &[Vec<u8>; 3],
    signal: &str,
    moment: Moment,
) -> bool {
    let files = set_of(&dir.join(file.file_name().unwrap()), p);
    for f in &files {
        std::fs::write(f, OLD).unwrap();
    }
    let mut child = start(file, p, dir);
    let rx = stderr_lines(&mut child);
    let mut seen = Vec::new();
    let t = Instant::now();
    match moment {
        Moment::AfterStart(d) => std::thread::sleep(d),
        Moment::AfterWriting(d) => {
            // Until the line comes (or the run ends without it).
            while let Ok(line) = rx.recv_timeout(Duration::from_secs(300)) {
                let writing = line.contains("writing");
                seen.push(line);
                if writing {
                    break;
                }
            }
            std::thread::sleep(d);
        }
        Moment::OnTemporary => {
            while names(dir).iter().all(|n| !n.starts_with('.'))
                && child.try_wait().unwrap().is_none()
                && t.elapsed() < Duration::from_secs(300)
            {
                std::thread::yield_now();
            }
        }
    }
    kill(&child, signal);
    let (code, rest) = finish(child, rx);
    seen.extend(rest);
    let err = seen.join("\n");
    let case = format!("-p {p}, {signal} at {moment:?}: status {code:?}, stderr:\n{err}");

    // No temporary file, nothing else either.
    let expected: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names(dir), expected, "{case}");
    let contents: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let old = contents.iter().all(|c| c == OLD);
    let new = contents.iter().zip(want).all(|(c, w)| c == w);
    assert!(old || new, "a mixed or partial set: {case}");
    match code {
        Some(0) => assert!(new, "{case}"),
        Some(130) => {
            let last = seen.last().map(String::as_str).unwrap_or_default();
            assert!(last.starts_with("mbsp: interrupted"), "{case}");
            // The message says whether the files had been written before the interrupt.
            assert_eq!(last.contains("written whole before"), new, "{case}");
            if old {
                assert!(last.ends_with("no output file was changed"), "{case}");
            }
        }
        _ => panic!("unexpected exit: {case}"),
    }
    code == Some(130) && old
}

#[test]
fn signals_at_many_moments_leave_the_set_all_old_or_all_new() {
    let dir = common::scratch("interrupted_output", "signals");
    let input_dir = dir.join("in");
    let out = dir.join("out");
    std::fs::create_dir_all(&input_dir).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    // Writing dominates at p = 1 (no partitioning): many moments fall inside it. At p = 4 the
    // set is the case, on a smaller matrix.
    let large = input_dir.join("large.mtx");
    write_matrix(&large, 100_000, 600_000);
    let small = input_dir.join("small.mtx");
    write_matrix(&small, 20_000, 60_000);

    for (file, p, moments) in [
        (
            &large,
            1,
            vec![
                Moment::AfterStart(Duration::from_millis(50)),
                Moment::OnTemporary,
                Moment::OnTemporary,
                Moment::AfterWriting(Duration::ZERO),
                Moment::AfterWriting(Duration::from_millis(1)),
                Moment::AfterWriting(Duration::from_millis(3)),
                Moment::AfterWriting(Duration::from_millis(10)),
                Moment::AfterWriting(Duration::from_millis(30)),
                Moment::AfterWriting(Duration::from_millis(100)),
                Moment::AfterWriting(Duration::from_millis(300)),
                Moment::AfterWriting(Duration::from_millis(1000)),
            ],
        ),
        (
            &small,
            4,
            vec![
                Moment::AfterStart(Duration::from_millis(200)),
                Moment::OnTemporary,
                Moment::AfterWriting(Duration::from_millis(2)),
                Moment::AfterWriting(Duration::from_millis(20)),
            ],
        ),
    ] {
        // The new files, from an uninterrupted run (the output is deterministic).
        let mut child = start(file, p, &out);
        let rx = stderr_lines(&mut child);
        let (code, err) = finish(child, rx);
        assert_eq!(code, Some(0), "{err:?}");
        let files = set_of(&out.join(file.file_name().unwrap()), p);
        let want = files.clone().map(|f| std::fs::read(f).unwrap());
        assert!(want.iter().all(|w| w.len() > OLD.len()));

        let mut cut_short = 0;
        for (k, &moment) in moments.iter().enumerate() {
            let signal = ["INT", "TERM", "HUP"][k % 3];
            cut_short += usize::from(interrupted_run(file, p, &out, &want, signal, moment));
        }
        // Not a timing assertion: the runs check their files whatever the moment; this only
        // says whether any interrupt landed before the set was complete (it is printed).
        eprintln!(
            "-p {p}: {cut_short} of {} runs interrupted before the files were written",
            moments.len()
        );
        for f in &files {
            std::fs::remove_file(f).unwrap();
        }
    }
}

/// A tmpfs of `bytes` mounted at `dir`, unmounted when dropped; `None` (and a message) where
/// mounting is not permitted.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, bytes: u64) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs(dir.to_path_buf())),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs here ({}): the full-disk case is not tested",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount ({e}): the full-disk case is not tested");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Runs `mbsp` with `args`, expecting status 3 (an output file) and one line naming a full disk that says no
/// file was changed.
fn fails_for_space(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
    let last = err.trim().lines().last().unwrap_or_default().to_string();
    assert!(last.contains("No space left on device"), "{err}");
    assert!(last.ends_with("no file was changed"), "{err}");
    last
}

#[test]
fn a_full_disk_leaves_the_old_files_and_no_temporary() {
    let dir = common::scratch("interrupted_output", "full_disk");
    let matrix = dir.join("m.mtx");
    write_matrix(&matrix, 50_000, 200_000);
    // The sizes of the new files, from a run on the ordinary disk.
    let reference = dir.join("reference");
    std::fs::create_dir_all(&reference).unwrap();
    let mut child = start(&matrix, 2, &reference);
    let rx = stderr_lines(&mut child);
    let (code, err) = finish(child, rx);
    assert_eq!(code, Some(0), "{err:?}");
    let sizes = set_of(&reference.join("m.mtx"), 2).map(|f| std::fs::metadata(f).unwrap().len());

    const PAGE: u64 = 4096;
    for (case, bytes) in [
        // Too small for the matrix file.
        ("tiny", 16 * PAGE),
        // The matrix file fits, the first vector file does not: the set is still all or nothing.
        ("matrix fits", sizes[0] + sizes[1] / 2 + 8 * PAGE),
    ] {
        let mnt = dir.join(format!("tmpfs-{}", case.replace(' ', "-")));
        let Some(_fs) = Tmpfs::mount(&mnt, bytes) else {
            return;
        };
        let files = set_of(&mnt.join("m.mtx"), 2);
        for f in &files {
            std::fs::write(f, OLD).unwrap();
        }
        let mut out_dir = mnt.as_os_str().to_owned();
        out_dir.push("/");
        let last = fails_for_space(&[
            "partition".as_ref(),
            matrix.as_os_str(),
            "-p".as_ref(),
            "2".as_ref(),
            "--out".as_ref(),
            &out_dir,
        ]);
        let failed = if case == "tiny" { "-P2" } else { "-u2" };
        assert!(
            last.contains(&format!("m.mtx{failed}: No space")),
            "{case}: {last}"
        );
        for f in &files {
            assert_eq!(std::fs::read(f).unwrap(), OLD, "{case}: {}", f.display());
        }
        assert_eq!(names(&mnt), ["m.mtx-P2", "m.mtx-u2", "m.mtx-v2"], "{case}");
    }
}
