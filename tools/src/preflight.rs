//! Resource preflight: before a command allocates much or works for long, the memory its
//! request needs is estimated from the request (processes, matrix dimensions and nonzeros from
//! the Matrix Market header, FFT length, samples) and compared with the memory the process can
//! get; a request that cannot fit is refused with one line naming the numbers and the limit,
//! instead of an abort in the allocator (exit 134) or a capacity panic (101) minutes later.
//!
//! The estimates are lower bounds of what the commands allocate (each term says what it
//! counts), so a refusal is certain to be right; a request just under the limit may still run
//! out of memory. The limit ([`available`]) is the smallest of:
//!
//! * `MemAvailable` (plus `SwapFree`) in `/proc/meminfo` (`MemTotal` on kernels without it);
//! * the address-space limit `RLIMIT_AS` (`ulimit -v`, from `/proc/self/limits`) less the
//!   address space in use (`VmSize` in `/proc/self/status`);
//! * the memory cgroup's limit less its usage (`memory.max`/`memory.current` of cgroup v2,
//!   `memory.limit_in_bytes`/`memory.usage_in_bytes` of v1).
//!
//! All arithmetic is in `u128`: no request, however large, can overflow it (2^64 elements of
//! 2^64 bytes still fit).

use crate::error::{Error, Result};
use mbsp_algorithms::sparse::CooMatrix;
use std::path::Path;

/// Memory the process can get, and where that figure comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Available {
    /// Bytes.
    pub bytes: u128,
    /// Where the figure comes from, for the message.
    pub source: String,
}

/// A `kB` figure of `/proc/meminfo` or `/proc/self/status`, in bytes.
fn kb_field(text: &str, key: &str) -> Option<u128> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        let kb: u128 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        Some(kb * 1024)
    })
}

/// The memory left by `/proc/meminfo`.
fn meminfo(text: &str) -> Option<Available> {
    let swap = kb_field(text, "SwapFree").unwrap_or(0);
    let (bytes, what) = match kb_field(text, "MemAvailable") {
        Some(b) => (b, "MemAvailable"),
        None => (kb_field(text, "MemTotal")?, "MemTotal"),
    };
    let source = if swap > 0 {
        format!("{what} + SwapFree in /proc/meminfo")
    } else {
        format!("{what} in /proc/meminfo")
    };
    Some(Available {
        bytes: bytes + swap,
        source,
    })
}

/// The soft `RLIMIT_AS` of `/proc/self/limits` (`None`: unlimited), in bytes.
fn address_limit(limits: &str) -> Option<u128> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft = line["Max address space".len()..]
        .split_whitespace()
        .next()?;
    soft.parse().ok() // "unlimited" does not parse
}

/// The address space left under `RLIMIT_AS`, if one is set.
fn rlimit_as(limits: &str, status: &str) -> Option<Available> {
    let limit = address_limit(limits)?;
    let used = kb_field(status, "VmSize").unwrap_or(0);
    Some(Available {
        bytes: limit.saturating_sub(used),
        source: format!(
            "RLIMIT_AS (ulimit -v) of {}, {} of it in use",
            size(limit),
            size(used)
        ),
    })
}

/// A cgroup limit file's value (`None` for "max" or a value so large it means no limit).
fn cgroup_value(text: &str) -> Option<u128> {
    let v: u128 = text.trim().parse().ok()?;
    (v < 1 << 62).then_some(v)
}

/// The memory left in this process's memory cgroup, if it has a limit.
fn cgroup(proc_cgroup: &str, read: impl Fn(&Path) -> Option<String>) -> Option<Available> {
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let path = path.trim_start_matches('/');
        let (root, limit_file, usage_file, name) = match controllers {
            "" => (
                "/sys/fs/cgroup",
                "memory.max",
                "memory.current",
                "memory.max",
            ),
            c if c.split(',').any(|c| c == "memory") => (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "memory.limit_in_bytes",
            ),
            _ => continue,
        };
        // Inside a container the path may be the host's while the container's own cgroup is
        // mounted at the root: try both.
        for dir in [Path::new(root).join(path), Path::new(root).to_path_buf()] {
            let Some(limit) = read(&dir.join(limit_file)).and_then(|t| cgroup_value(&t)) else {
                continue;
            };
            let used = read(&dir.join(usage_file))
                .and_then(|t| t.trim().parse::<u128>().ok())
                .unwrap_or(0);
            return Some(Available {
                bytes: limit.saturating_sub(used),
                source: format!(
                    "the memory cgroup's {name} of {}, {} of it in use",
                    size(limit),
                    size(used)
                ),
            });
        }
    }
    None
}

/// The memory this process can get now: the smallest of the limits in the module
/// documentation (`None` where none can be read, e.g. not on Linux).
pub fn available() -> Option<Available> {
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let status = read(Path::new("/proc/self/status")).unwrap_or_default();
    [
        read(Path::new("/proc/meminfo")).and_then(|t| meminfo(&t)),
        read(Path::new("/proc/self/limits")).and_then(|t| rlimit_as(&t, &status)),
        read(Path::new("/proc/self/cgroup")).and_then(|t| cgroup(&t, read)),
    ]
    .into_iter()
    .flatten()
    .min_by_key(|a| a.bytes)
}

/// Bytes for a message: `88.0 TB`, `512 kB`, `17 bytes` (decimal units).
///
/// ```
/// use mbsp_tools::preflight::size;
/// assert_eq!(size(17), "17 bytes");
/// assert_eq!(size(1500), "1.5 kB");
/// assert_eq!(size(16 << 40), "17.6 TB");
/// ```
pub fn size(bytes: u128) -> String {
    const UNITS: [&str; 10] = ["kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB", "RB", "QB"];
    if bytes < 1000 {
        return format!("{bytes} bytes");
    }
    let mut v = bytes as f64 / 1000.0;
    let mut unit = 0;
    while v >= 999.95 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if v < 99.95 {
        format!("{v:.1} {}", UNITS[unit])
    } else {
        format!("{v:.0} {}", UNITS[unit])
    }
}

/// An estimate of the memory a request needs: terms, each a count times bytes per item, with
/// what they count.
///
/// ```
/// use mbsp_tools::preflight::{Available, Need};
/// let avail = Available { bytes: 1 << 30, source: "a test".into() };
/// let mut need = Need::new();
/// need.add(1 << 20, 16, "a million complex numbers");
/// assert!(need.check_against(&avail).is_ok());
/// need.add(1 << 30, 8, "a billion words");
/// let e = need.check_against(&avail).unwrap_err();
/// assert!(e.to_string().contains("8.6 GB for a billion words (8 bytes each)"), "{e}");
/// ```
#[derive(Clone, Debug, Default)]
pub struct Need {
    terms: Vec<(u128, String)>,
}

impl Need {
    /// No memory yet.
    pub fn new() -> Need {
        Need::default()
    }

    /// Adds `count` items of `each` bytes, described as `what` (e.g. "-p 1000000 parts").
    pub fn add(&mut self, count: u128, each: u128, what: impl Into<String>) {
        let what = what.into();
        let bytes = count.saturating_mul(each);
        self.terms
            .push((bytes, format!("{what} ({each} bytes each)")));
    }

    /// The total in bytes.
    pub fn bytes(&self) -> u128 {
        self.terms.iter().fold(0, |t, (b, _)| t.saturating_add(*b))
    }

    /// Ok if the estimate fits in `avail`; else the one-line refusal: the total, its largest
    /// terms, the limit and where it comes from.
    pub fn check_against(&self, avail: &Available) -> Result<()> {
        let total = self.bytes();
        if total <= avail.bytes {
            return Ok(());
        }
        let mut terms: Vec<&(u128, String)> = self.terms.iter().filter(|t| t.0 > 0).collect();
        terms.sort_by_key(|t| std::cmp::Reverse(t.0));
        // The terms that make up most of it: those of at least a hundredth of the total.
        let shown: Vec<String> = terms
            .iter()
            .filter(|t| t.0.saturating_mul(100) >= total)
            .map(|(b, what)| format!("{} for {what}", size(*b)))
            .collect();
        Err(Error::usage(format!(
            "needs at least {} of memory ({}), more than the {} available ({})",
            size(total),
            shown.join(", "),
            size(avail.bytes),
            avail.source
        )))
    }

    /// Ok if the estimate fits in the memory available now ([`available`]; nothing is refused
    /// where that cannot be read).
    pub fn check(&self) -> Result<()> {
        match available() {
            Some(a) => self.check_against(&a),
            None => Ok(()),
        }
    }
}

/// Memory of a process of a run beyond what its algorithm holds, at least: its thread (a
/// kernel stack of 16 KiB, the pages of its own stack it touches) and the runtime's buffers.
/// Measured on this project's runtime at several times this per process; a lower bound.
pub const PER_PROCESS: u128 = 64 << 10;

/// Bytes of a complex `f64` number.
pub const COMPLEX: u128 = 16;

/// What the Matrix Market header of a file says, and the most entries the file can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixSize {
    /// Rows.
    pub rows: u128,
    /// Columns.
    pub cols: u128,
    /// Stored entries: what the size line declares, or fewer if the file is too short to hold
    /// that many (a lying header is the reader's error to report, not a memory problem).
    pub entries: u128,
    /// Nonzeros after the symmetric expansion, at least.
    pub nnz: u128,
}

impl MatrixSize {
    /// Reads the header of `file` (cheap: two lines); its errors are the reader's own. `None`
    /// for a file that is not a regular file (a pipe such as `<(zcat m.mtx.gz)` cannot be read
    /// twice; its matrix is checked once read, with [`MatrixSize::of_matrix`]).
    pub fn of(file: &Path) -> Result<Option<MatrixSize>> {
        use mbsp_algorithms::sparse::mtx::{self, Field, Symmetry};
        let meta = std::fs::metadata(file)
            .map_err(|e| Error::io(file.display().to_string()).with_source(e))?;
        if !meta.is_file() {
            return Ok(None);
        }
        let h = mtx::read_header(file).map_err(|e| Error::io("").with_source(e))?;
        // The shortest entry line: "1 1\n" for a pattern, "1 1 1\n" with a value, two values
        // for complex. A compressed file holds at most ~1032 bytes of text per byte (the
        // most deflate can do).
        let shortest: u128 = match h.field {
            Field::Pattern => 4,
            Field::Complex => 8,
            _ => 6,
        };
        let len = meta.len() as u128;
        // Compressed as the reader decides it: by the name, or by the gzip magic bytes.
        let gz = file
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
            || starts_with_gzip(file);
        let text = if gz { len.saturating_mul(1032) } else { len };
        let entries = (h.entries as u128).min(text / shortest);
        let (rows, cols) = (h.rows as u128, h.cols as u128);
        // A symmetric file stores one triangle: each entry off the diagonal is mirrored, and
        // at most min(rows, cols) entries are on it.
        let nnz = if h.symmetry == Symmetry::General {
            entries
        } else {
            entries + entries.saturating_sub(rows.min(cols))
        };
        Ok(Some(MatrixSize {
            rows,
            cols,
            entries,
            nnz,
        }))
    }

    /// The size of a matrix already read (nothing more to read).
    pub fn of_matrix(a: &mbsp_algorithms::sparse::CooMatrix) -> MatrixSize {
        MatrixSize {
            rows: a.rows as u128,
            cols: a.cols as u128,
            entries: 0,
            nnz: a.nnz() as u128,
        }
    }

    /// Reading the matrix: the entries as stored, then the assembled matrix (16 bytes each).
    pub fn add_reading(&self, need: &mut Need) {
        need.add(
            self.entries,
            16,
            format!("{} entries as read", self.entries),
        );
        need.add(self.nnz, 16, format!("{} nonzeros assembled", self.nnz));
    }

    /// Partitioning the matrix into `p` parts, on top of the matrix (see [`add_matrix`]):
    /// the partitioner's lists per nonzero (at least the nonzeros of a split and their sides),
    /// its books per row and column (the owners, and at least as much again for the counting
    /// sorts' offsets), and its counts per part (what each part sends and receives in each
    /// phase: four 8-byte counts).
    ///
    /// [`add_matrix`]: MatrixSize::add_matrix
    pub fn add_partitioning(&self, p: usize, need: &mut Need) {
        need.add(self.nnz, 16, format!("partitioning {} nonzeros", self.nnz));
        need.add(
            self.rows + self.cols,
            8,
            format!("the {} rows and {} columns", self.rows, self.cols),
        );
        need.add(p as u128, 32, format!("-p {p} parts"));
    }

    /// The matrix itself (coordinates, 16 bytes per nonzero).
    pub fn add_matrix(&self, need: &mut Need) {
        need.add(self.nnz, 16, format!("the matrix's {} nonzeros", self.nnz));
    }
}

/// Whether `file` starts with the gzip magic bytes.
fn starts_with_gzip(file: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 2];
    std::fs::File::open(file).is_ok_and(|mut f| f.read_exact(&mut magic).is_ok())
        && magic == [0x1f, 0x8b]
}

/// The larger of two estimates (phases that do not overlap).
pub fn larger(a: Need, b: Need) -> Need {
    if a.bytes() >= b.bytes() { a } else { b }
}

/// Refuses partitioning the matrix of `file` into `p` parts if it cannot fit in memory, from
/// the matrix's header and `p`, before anything is read: the reading (entries as stored and
/// assembled), or the partitioning (the matrix, the partitioner's books per nonzero, row,
/// column and part), whichever needs more. A file that is not a regular file (a pipe) is
/// checked once read ([`partition_matrix`]).
pub fn partition_file(file: &Path, p: usize) -> Result<()> {
    let Some(size) = MatrixSize::of(file)? else {
        return Ok(());
    };
    let mut read = Need::new();
    size.add_reading(&mut read);
    larger(read, partitioning(&size, p)).check()
}

/// Refuses partitioning the matrix `a`, already read, into `p` parts if it cannot fit in memory
/// (a pipe's matrix, whose header could not be read ahead).
///
/// ```
/// let a = mbsp_algorithms::sparse::CooMatrix::new(2, 2, vec![(0, 0, 1.0), (1, 1, 2.0)])?;
/// mbsp_tools::preflight::partition_matrix(&a, 2)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn partition_matrix(a: &CooMatrix, p: usize) -> Result<()> {
    partitioning(&MatrixSize::of_matrix(a), p).check()
}

/// The memory of partitioning a matrix of `size` into `p` parts.
fn partitioning(size: &MatrixSize, p: usize) -> Need {
    let mut part = Need::new();
    size.add_matrix(&mut part);
    size.add_partitioning(p, &mut part);
    part
}

/// Refuses multiplying by the matrix of `file` with `p` processes if it cannot fit in memory,
/// from the matrix's header and `p`, before anything is read: the reading, the partitioning,
/// or the multiplies (see [`spmv_matrix`]), whichever needs most. A file that is not a regular
/// file (a pipe) is checked once read.
pub fn spmv_file(file: &Path, p: usize) -> Result<()> {
    let Some(size) = MatrixSize::of(file)? else {
        return Ok(());
    };
    let mut read = Need::new();
    size.add_reading(&mut read);
    larger(read, spmv_after_reading(&size, p)).check()
}

/// Refuses multiplying by the matrix `a`, already read, with `p` processes if it cannot fit in
/// memory (a pipe's matrix, whose header could not be read ahead): partitioning it for `p`
/// processes, or the multiplies (the matrix, the plan's local matrices, sequential CSR, the
/// vectors of the check, the `p` processes of the run), whichever needs more.
///
/// ```
/// let a = mbsp_algorithms::sparse::CooMatrix::new(2, 2, vec![(0, 0, 1.0), (1, 1, 2.0)])?;
/// mbsp_tools::preflight::spmv_matrix(&a, 2)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn spmv_matrix(a: &CooMatrix, p: usize) -> Result<()> {
    spmv_after_reading(&MatrixSize::of_matrix(a), p).check()
}

/// The memory of an SpMV after reading a matrix of `size` ([`spmv_matrix`]).
fn spmv_after_reading(size: &MatrixSize, p: usize) -> Need {
    let part = partitioning(size, p);
    let mut run = Need::new();
    size.add_matrix(&mut run);
    // The plan's local matrices and CSR: a column index and a value per nonzero each.
    run.add(
        size.nnz,
        24,
        format!("the local matrices and CSR of {} nonzeros", size.nnz),
    );
    // CSR's row offsets, y of the check, the sequential y, the scale of each row; x.
    run.add(
        size.rows,
        32,
        format!("{} rows of CSR and of the check", size.rows),
    );
    run.add(size.cols, 8, format!("x of {} columns", size.cols));
    run.add(p as u128, PER_PROCESS, format!("-p {p} processes"));
    larger(part, run)
}

/// Refuses a BSP FFT of `n` points over `p` processes, timed `reps` times, that cannot fit in
/// memory: the data, the sequential reference and its working copy, each process's part and
/// its result (together two more arrays), the result gathered: at least 5 arrays of `n`
/// complex numbers; the `reps` times of each process; the `p` processes of the run.
///
/// ```
/// mbsp_tools::preflight::fft(1 << 10, 2, 5)?;
/// let e = mbsp_tools::preflight::fft(1 << 60, 2, 5).unwrap_err();
/// assert!(e.to_string().starts_with("needs at least 92.2 EB of memory"), "{e}");
/// # Ok::<(), mbsp_tools::Error>(())
/// ```
pub fn fft(n: usize, p: usize, reps: usize) -> Result<()> {
    let mut need = Need::new();
    need.add(
        5 * n as u128,
        COMPLEX,
        format!("--n {n}: 5 arrays of {n} complex numbers"),
    );
    need.add(
        (reps as u128).saturating_mul(p as u128),
        8,
        format!("--reps {reps} times on each of {p} processes"),
    );
    need.add(p as u128, PER_PROCESS, format!("{p} processes"));
    need.check()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_sizes() {
        assert_eq!(size(17), "17 bytes");
        assert_eq!(size(1500), "1.5 kB");
        assert_eq!(size(16 << 40), "17.6 TB");
        assert_eq!(size(999_999), "1.0 MB");
        assert_eq!(size(u128::MAX), "340282367 QB");
    }

    #[test]
    fn the_limits_are_read_from_proc() {
        let meminfo_text = "MemTotal:       24684092 kB\nMemFree:  1 kB\nMemAvailable:   23957556 kB\n\
                            SwapFree:              0 kB\n";
        let m = meminfo(meminfo_text).unwrap();
        assert_eq!(m.bytes, 23957556 * 1024);
        assert_eq!(m.source, "MemAvailable in /proc/meminfo");
        let m = meminfo("MemTotal: 100 kB\nSwapFree: 10 kB\n").unwrap();
        assert_eq!(
            (m.bytes, m.source.as_str()),
            (110 * 1024, "MemTotal + SwapFree in /proc/meminfo")
        );

        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max address space         4096000000           unlimited            bytes     \n";
        let status = "Name:\tmbsp\nVmSize:\t  100000 kB\n";
        let r = rlimit_as(limits, status).unwrap();
        assert_eq!(r.bytes, 4096000000 - 100000 * 1024);
        assert!(
            r.source.starts_with("RLIMIT_AS (ulimit -v) of 4.1 GB"),
            "{}",
            r.source
        );
        let unlimited =
            "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(rlimit_as(unlimited, status), None);

        let files = |p: &Path| match p.to_str()? {
            "/sys/fs/cgroup/user/job/memory.max" => Some("2000000000\n".to_string()),
            "/sys/fs/cgroup/user/job/memory.current" => Some("500000000\n".to_string()),
            "/sys/fs/cgroup/memory/memory.limit_in_bytes" => {
                Some("9223372036854771712\n".to_string())
            }
            _ => None,
        };
        let c = cgroup("0::/user/job\n", files).unwrap();
        assert_eq!(c.bytes, 1_500_000_000);
        assert!(c.source.contains("memory.max of 2.0 GB"), "{}", c.source);
        // cgroup v1 without a limit (the value is the "no limit" sentinel).
        assert_eq!(cgroup("4:memory:/some/path\n0::/\n", files), None);
    }

    #[test]
    fn a_need_beyond_the_limit_is_one_line_naming_both() {
        let avail = Available {
            bytes: 8 << 30,
            source: "MemAvailable in /proc/meminfo".into(),
        };
        let mut need = Need::new();
        need.add(
            1 << 40,
            5 * COMPLEX,
            "5 arrays of 1099511627776 complex numbers",
        );
        need.add(2, 8, "the samples");
        let e = need.check_against(&avail).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Usage);
        assert_eq!(
            e.to_string(),
            "needs at least 88.0 TB of memory (88.0 TB for 5 arrays of 1099511627776 complex \
             numbers (80 bytes each)), more than the 8.6 GB available (MemAvailable in \
             /proc/meminfo)"
        );
        let mut small = Need::new();
        small.add(1000, 16, "a thousand");
        assert!(small.check_against(&avail).is_ok());
        // No overflow, however large.
        let mut huge = Need::new();
        huge.add(u128::MAX, 16, "everything");
        huge.add(u128::MAX, 16, "everything again");
        assert_eq!(huge.bytes(), u128::MAX);
        assert!(huge.check_against(&avail).is_err());
    }
}
