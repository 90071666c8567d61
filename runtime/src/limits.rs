//! The largest sizes the runtime accepts: tag size, message payload, process count.
//!
//! Every size a caller hands to the runtime is checked against these limits (with arithmetic
//! that cannot overflow) before anything is allocated or copied; a size beyond them is a misuse
//! error naming the primitive and the value. A size within them that the machine cannot
//! allocate room for is an error too (kind [`System`](crate::ErrorKind::System)), never an
//! allocator abort.

use crate::error::{Error, ErrorKind, Result};

/// The largest tag size, in bytes: 2^20 (1 MiB). A tag is a header copied with every message
/// (and kept beside every message in the receiver's queue), so it is meant to be small — an
/// index, a few numbers; larger data belongs in the payload.
///
/// ```
/// let e = mbsp::run(1, |ctx| ctx.set_tagsize(mbsp::MAX_TAGSIZE + 1).map(drop)).unwrap_err();
/// assert_eq!(e.op(), "set_tagsize");
/// assert!(e.message().contains("1048577 bytes"), "{e}");
/// ```
pub const MAX_TAGSIZE: usize = 1 << 20;

/// The largest message payload, in bytes: 2^47 (128 TiB, the user address space of x86-64 with
/// 4-level page tables), on 64-bit machines. [`Ctx::send`](crate::Ctx::send) and the other
/// sends refuse a larger payload; one within the limit that cannot be allocated ends the run
/// with an error of kind [`System`](crate::ErrorKind::System).
pub const MAX_MESSAGE: usize = if usize::BITS >= 64 {
    1 << 47
} else {
    isize::MAX as usize / 2
};

/// Memory each process of a run needs, apart from what it allocates itself: its thread (the
/// stack pages it touches, the kernel's side), its context and its share of the barrier
/// (measured: about 35 KiB of user memory per process at p = 1000, plus the kernel's).
const PROCESS_BYTES: u128 = 64 << 10;

/// Memory each process needs per process of its run: two outbox slots (one per superstep
/// parity) and a barrier-ride entry for every destination (measured: about 16 bytes).
const PER_PEER_BYTES: u128 = 24;

/// The most processes one run can have on this machine, and what sets the limit: the kernel's
/// thread limits (`kernel.threads-max`, `kernel.pid_max`, `vm.max_map_count` / 2 — each thread
/// stack takes two memory maps — and the `RLIMIT_NPROC` of this process), and memory: each
/// process needs about 64 KiB plus 24 bytes per process of the run (the run state is quadratic
/// in p), which must fit in the machine's physical memory. `None` where none of these can be
/// read (then nothing is refused up front; a thread that cannot be started still ends the run
/// with an error).
///
/// A run asking for more processes is refused with a misuse error naming both numbers, before
/// anything is allocated (nested runs too). These are ceilings: a run below them may still find
/// the machine too busy (then a thread that cannot be started ends the run with an error).
///
/// ```
/// if let Some((max, why)) = mbsp::max_procs() {
///     assert!(max >= 1 && !why.is_empty());
///     let e = mbsp::run(max + 1, |_| Ok(())).unwrap_err();
///     assert!(e.message().contains(&format!("at most {max}")), "{e}");
/// }
/// ```
pub fn max_procs() -> Option<(usize, String)> {
    limit().clone()
}

/// [`max_procs`], worked out once and borrowed (every run start checks it).
fn limit() -> &'static Option<(usize, String)> {
    static LIMIT: std::sync::OnceLock<Option<(usize, String)>> = std::sync::OnceLock::new();
    LIMIT.get_or_init(compute_max_procs)
}

fn compute_max_procs() -> Option<(usize, String)> {
    let mut limits: Vec<(usize, String)> = Vec::new();
    let sys = |file: &str| {
        std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
    };
    if let Some(n) = sys("/proc/sys/kernel/threads-max") {
        limits.push((n, format!("kernel.threads-max is {n}")));
    }
    if let Some(n) = sys("/proc/sys/kernel/pid_max") {
        limits.push((n, format!("kernel.pid_max is {n}")));
    }
    if let Some(n) = sys("/proc/sys/vm/max_map_count") {
        limits.push((
            n / 2,
            format!("vm.max_map_count is {n}, and each thread takes 2 memory maps"),
        ));
    }
    if let Some(n) = rlimit_nproc() {
        limits.push((n, format!("RLIMIT_NPROC (ulimit -u) is {n}")));
    }
    if let Some(mem) = physical_memory() {
        let n = procs_in(mem);
        limits.push((
            n,
            format!(
                "each process needs about 64 KiB + 24 bytes per process of the run, in {:.1} GiB \
                 of memory",
                mem as f64 / (1u64 << 30) as f64
            ),
        ));
    }
    limits
        .into_iter()
        .min_by_key(|l| l.0)
        .map(|(n, why)| (n.max(1), why))
}

/// The largest p with p × (PROCESS_BYTES + PER_PEER_BYTES × p) <= `mem`.
fn procs_in(mem: u128) -> usize {
    let need = |p: u128| p * (PROCESS_BYTES + PER_PEER_BYTES * p);
    // Binary search over [0, 2^32): need(2^32) exceeds any memory.
    let (mut lo, mut hi) = (0u128, 1u128 << 32);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if need(mid) <= mem { lo = mid } else { hi = mid }
    }
    usize::try_from(lo).unwrap_or(usize::MAX)
}

/// The soft `RLIMIT_NPROC` of this process ("Max processes" in /proc/self/limits), if limited.
fn rlimit_nproc() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max processes"))?;
    line["Max processes".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The machine's physical memory in bytes (MemTotal of /proc/meminfo).
fn physical_memory() -> Option<u128> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u128 = line["MemTotal:".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// Refuse a run of `p` processes beyond [`max_procs`]: the message of the error.
pub(crate) fn check_procs(p: usize) -> std::result::Result<(), String> {
    match limit() {
        Some((max, why)) if p > *max => Err(format!(
            "p = {p} processes cannot run on this machine: at most {max} can ({why})"
        )),
        _ => Ok(()),
    }
}

/// [`check_procs`] for a top-level run: the error is a misuse of `run`.
pub(crate) fn check_top_procs(p: usize) -> Result<()> {
    check_procs(p).map_err(|m| Error::outside(ErrorKind::Misuse, "run", m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_bound_is_the_largest_fitting_p() {
        let need = |p: u128| p * (PROCESS_BYTES + PER_PEER_BYTES * p);
        for mem in [0u128, 1 << 20, 8 << 30, 24 << 30, 1 << 50] {
            let p = procs_in(mem) as u128;
            assert!(need(p) <= mem && need(p + 1) > mem, "{mem}: {p}");
        }
    }
}
