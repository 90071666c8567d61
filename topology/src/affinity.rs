//! The calling thread's CPU affinity on Linux, set and read with one system call each.
//!
//! hwloc's thread binding makes the same system call, but around it allocates and converts
//! two bitmaps (hwloc's, then glibc's `cpu_set_t`), checks the set against its topology and
//! saves and restores `errno`: about 1 500 instructions a call, paid at every run's start and
//! end (a top-level run binds the caller's thread and restores it; a nested run narrows its
//! parent's thread and restores it). Here a `cpu_set_t` on the stack is filled and handed to
//! the kernel. Sets that do not fit one (CPU numbers from 1024 up) are left to hwloc: the
//! functions answer `None` and the caller falls back.

/// Bind the calling thread to the OS CPUs `cpus`: `None` when this path cannot (not Linux, or
/// a CPU number past a `cpu_set_t`), else the system call's result.
#[cfg(target_os = "linux")]
pub(crate) fn set_thread(cpus: &[u32]) -> Option<std::io::Result<()>> {
    // SAFETY: an all-zero cpu_set_t is the empty set (a plain array of words).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        let c = usize::try_from(c).ok()?;
        if c >= libc::CPU_SETSIZE as usize {
            return None;
        }
        // SAFETY: `c` is below CPU_SETSIZE, the number of bits in `set`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size given; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    Some(if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    })
}

/// The calling thread's OS CPUs: `None` when this path cannot read them (not Linux, or a
/// machine whose CPU numbers do not fit a `cpu_set_t`: the kernel refuses the size).
#[cfg(target_os = "linux")]
pub(crate) fn thread() -> Option<Vec<u32>> {
    // SAFETY: as in `set_thread`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a writable cpu_set_t of the size given; pid 0 is the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return None;
    }
    // The set's words, scanned for set bits: testing its 1024 bits one by one costs more than
    // the system call. glibc's cpu_set_t is an array of `unsigned long`, CPU c being bit
    // c % BITS of word c / BITS (what CPU_ISSET tests; checked against it in the tests).
    type Word = libc::c_ulong;
    const WORDS: usize = std::mem::size_of::<libc::cpu_set_t>() / std::mem::size_of::<Word>();
    // SAFETY: cpu_set_t is plain old data: an array of WORDS words.
    let words: [Word; WORDS] = unsafe { std::mem::transmute(set) };
    let mut cpus = Vec::new();
    for (i, &w) in words.iter().enumerate() {
        let mut w = w;
        while w != 0 {
            cpus.push(i as u32 * Word::BITS + w.trailing_zeros());
            w &= w - 1;
        }
    }
    Some(cpus)
}

/// The OS CPU the calling thread runs on at this moment (`None` if it cannot be read). glibc
/// answers from the thread's restartable-sequence area or the vDSO: a load, not a system
/// call.
#[cfg(target_os = "linux")]
pub(crate) fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn current_cpu() -> Option<u32> {
    None
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn set_thread(_cpus: &[u32]) -> Option<std::io::Result<()>> {
    None
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn thread() -> Option<Vec<u32>> {
    None
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// What is set is read back, by this path and by hwloc's, and CPU numbers past a
    /// `cpu_set_t` are left to hwloc.
    #[test]
    fn set_and_read_back() {
        let before = super::thread().expect("readable");
        assert!(!before.is_empty());
        // The words are read as CPU_ISSET reads them.
        // SAFETY: a zeroed cpu_set_t is empty; pid 0 is this thread; indices below CPU_SETSIZE.
        let isset: Vec<u32> = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .map(|c| c as u32)
                .collect()
        };
        assert_eq!(before, isset);
        let one = [before[0]];
        super::set_thread(&one).expect("handled").expect("bound");
        assert_eq!(super::thread().as_deref(), Some(&one[..]));
        // Bound to one CPU, the thread runs there (the kernel moves it before returning).
        assert_eq!(super::current_cpu(), Some(one[0]));
        let topo = hwlocality::Topology::new().expect("hwloc");
        let seen = topo
            .cpu_binding(hwlocality::cpu::binding::CpuBindingFlags::THREAD)
            .expect("hwloc reads it");
        assert_eq!(
            seen.iter_set()
                .map(|i| usize::from(i) as u32)
                .collect::<Vec<_>>(),
            one
        );
        super::set_thread(&before)
            .expect("handled")
            .expect("restored");
        assert_eq!(super::thread(), Some(before));
        assert!(super::set_thread(&[1 << 20]).is_none());
    }
}
