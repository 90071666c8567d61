//! Processes as coroutines ([`Run::coroutines`](crate::Run::coroutines)): several processes
//! of a run on one OS thread, which switches between them in user space whenever one waits.
//!
//! Where processes outnumber cores, a superstep costs what its context switches cost: with a
//! thread per process every wait that finds its partner off the core is a `sched_yield` or a
//! futex sleep, each a kernel switch of a microsecond or more. Here a core's processes are
//! coroutines of one thread (each with a stack of its own), taken in turns: a process runs
//! until it waits, and a wait does not spin, yield to the kernel or sleep, but hands the thread
//! to the next coroutine ([`switch`]), which costs what a function call with its registers
//! saved does.
//!
//! ```text
//! thread of a core:  run_all([p0, p2, p4, ...])
//!   resume p0 ── p0 runs until a wait finds its condition false: switch() ──┐
//!   resume p2 ── p2 runs ... switch() ────────────────────────────────────┤ turns, in pid
//!   resume p4 ── ...                                                      │ order, until
//!   resume p0 ── p0 checks its condition again ...                        │ all returned
//! ```
//!
//! Every wait of the runtime goes through `wait.rs`, which asks [`active`] before it would
//! yield or sleep; nothing else in the runtime blocks a thread on another process (checkpoints,
//! which wait on a condition variable, are refused in such runs). Code of the user's that blocks
//! the thread until another process acts (a channel between processes, a lock held across a
//! sync) would hold up every process of the thread: the documentation of `Run::coroutines`
//! says so.

use std::cell::Cell;

/// The yielder of the coroutine the calling thread runs now (null outside one), as the
/// coroutine set it: each sets it when it starts and again whenever its turn comes back.
#[cfg(not(loom))]
type YielderPtr = *const corosensei::Yielder<(), ()>;
#[cfg(loom)]
type YielderPtr = *const ();

thread_local! {
    static CURRENT: Cell<YielderPtr> = const { Cell::new(std::ptr::null()) };
}

/// Whether the calling code runs in a process coroutine: then its waits [`switch`] instead of
/// yielding the thread or sleeping.
#[inline]
pub(crate) fn active() -> bool {
    CURRENT.with(|c| !c.get().is_null())
}

/// Hand the thread to the next coroutine of its turn; returns when this one's turn comes back.
/// Call only when [`active`].
#[cfg(not(loom))]
pub(crate) fn switch() {
    let me = CURRENT.with(Cell::get);
    debug_assert!(!me.is_null(), "switch outside a process coroutine");
    // SAFETY: `me` is the yielder of the coroutine running now (`run_all` sets it to null
    // whenever control is back in the scheduler), which lives as long as the coroutine.
    unsafe { (*me).suspend(()) };
    // The coroutines that ran meanwhile set their own.
    CURRENT.with(|c| c.set(me));
}

/// Under loom nothing runs as a coroutine.
#[cfg(loom)]
pub(crate) fn switch() {}

/// Run `bodies` as coroutines on the calling thread, each on a stack of `stack` bytes, in
/// turns (a body's turn ends when it waits) until all have returned. A body must not unwind
/// (catch its panics). Fails, before running anything, if a stack cannot be made. The stacks
/// are kept for the thread's next coroutines ([`Stacks`]).
#[cfg(not(loom))]
pub(crate) fn run_all<'a>(
    bodies: Vec<Box<dyn FnOnce() + 'a>>,
    stack: usize,
) -> std::io::Result<()> {
    use corosensei::{Coroutine, CoroutineResult, Yielder};

    let mut turns = Vec::with_capacity(bodies.len());
    for body in bodies {
        let stack = Stacks::take(stack)?;
        let run = move |y: &Yielder<(), ()>, ()| {
            CURRENT.with(|c| c.set(y));
            body();
        };
        // SAFETY: what `body` borrows outlives this call ('a), and every coroutine is driven
        // to completion below, or dropped (unwound) before this call returns.
        turns.push(Some(unsafe { Coroutine::with_stack_unchecked(stack, run) }));
    }
    // A nested `run_all` (a run with coroutines nested in a process coroutine) gives the outer
    // coroutine its yielder back when it returns.
    let outer = CURRENT.with(|c| c.replace(std::ptr::null()));
    let (mut live, mut rounds) = (turns.len(), 0u32);
    while live > 0 {
        for turn in &mut turns {
            let Some(co) = turn else { continue };
            let done = matches!(co.resume(()), CoroutineResult::Return(()));
            CURRENT.with(|c| c.set(std::ptr::null()));
            if done {
                if let Some(co) = turn.take() {
                    Stacks::give_back(co.into_stack(), stack);
                }
                live -= 1;
            }
        }
        rounds = rounds.wrapping_add(1);
        if rounds % IDLE_ROUNDS == 0 {
            // Every coroutine of this thread may be waiting for a process of another thread:
            // now and then let whatever else wants this core run.
            std::thread::yield_now();
        }
    }
    CURRENT.with(|c| c.set(outer));
    Ok(())
}

/// The stacks of a thread's finished coroutines, kept for its next ones: making a stack maps
/// memory and freeing one unmaps it, and an unmapping in a process of several threads makes
/// the kernel flush the other CPUs' TLBs (an interrupt to each, dear on a virtual machine):
/// tens of microseconds per process and run. At most [`KEPT_STACKS`] per thread, all of one
/// size (a run asking for another size drops them); the pages a process touched stay mapped
/// until the thread ends.
#[cfg(not(loom))]
struct Stacks;

#[cfg(not(loom))]
thread_local! {
    static STACKS: std::cell::RefCell<(usize, Vec<corosensei::stack::DefaultStack>)> =
        const { std::cell::RefCell::new((0, Vec::new())) };
}

#[cfg(not(loom))]
impl Stacks {
    /// A stack of `size` bytes: a kept one, or a new one.
    fn take(size: usize) -> std::io::Result<corosensei::stack::DefaultStack> {
        let kept = STACKS
            .try_with(|s| {
                let mut s = s.borrow_mut();
                if s.0 == size { s.1.pop() } else { None }
            })
            .ok()
            .flatten();
        match kept {
            Some(stack) => Ok(stack),
            None => corosensei::stack::DefaultStack::new(size),
        }
    }

    /// Keep `stack` (made for `size` bytes) for this thread's next coroutines.
    fn give_back(stack: corosensei::stack::DefaultStack, size: usize) {
        let _ = STACKS.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.0 != size {
                *s = (size, Vec::new());
            }
            if s.1.len() < KEPT_STACKS {
                s.1.push(stack);
            }
        });
    }
}

/// The most stacks a thread keeps ([`Stacks`]).
#[cfg(not(loom))]
const KEPT_STACKS: usize = 1024;

/// Under loom the bodies run one after the other (loom models no coroutines; nothing under
/// loom starts a run with them).
#[cfg(loom)]
pub(crate) fn run_all<'a>(bodies: Vec<Box<dyn FnOnce() + 'a>>, _: usize) -> std::io::Result<()> {
    for b in bodies {
        b();
    }
    Ok(())
}

/// Rounds of turns between two yields of the thread to the kernel.
#[cfg(not(loom))]
const IDLE_ROUNDS: u32 = 64;

/// The stack of a process coroutine when the run sets none: Rust's default for spawned
/// threads (the memory is reserved, not committed, until used).
pub(crate) const DEFAULT_STACK: usize = 2 << 20;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Bodies take turns at every switch, in order, and one that returns leaves the others.
    #[test]
    fn bodies_take_turns_at_each_switch() {
        let log = RefCell::new(Vec::new());
        let body = |name: char, switches: usize| {
            let log = &log;
            Box::new(move || {
                for i in 0..=switches {
                    assert!(active());
                    log.borrow_mut().push(format!("{name}{i}"));
                    if i < switches {
                        switch();
                    }
                }
            }) as Box<dyn FnOnce() + '_>
        };
        run_all(
            vec![body('a', 2), body('b', 0), body('c', 1)],
            DEFAULT_STACK,
        )
        .unwrap();
        assert!(!active());
        assert_eq!(log.into_inner().join(" "), "a0 b0 c0 a1 c1 a2");
    }

    /// The stacks of finished coroutines serve the thread's next ones (of the same size).
    #[test]
    fn stacks_are_kept_for_the_next_coroutines() {
        let kept = || STACKS.with(|s| (s.borrow().0, s.borrow().1.len()));
        let bodies = |n: usize| {
            (0..n)
                .map(|_| Box::new(switch) as Box<dyn FnOnce()>)
                .collect()
        };
        run_all(bodies(3), DEFAULT_STACK).unwrap();
        assert_eq!(kept(), (DEFAULT_STACK, 3));
        run_all(bodies(2), DEFAULT_STACK).unwrap();
        assert_eq!(kept(), (DEFAULT_STACK, 3), "two taken, two given back");
        run_all(bodies(1), 1 << 20).unwrap();
        assert_eq!(kept(), (1 << 20, 1), "another size replaces them");
    }

    /// A run of coroutines inside a coroutine gives the outer one its turn-taking back.
    #[test]
    fn nested_turns_restore_the_outer_coroutine() {
        let log = RefCell::new(Vec::new());
        let outer = || {
            let log = &log;
            Box::new(move || {
                let inner = |n: u32| {
                    Box::new(move || {
                        log.borrow_mut().push(n);
                        switch();
                        log.borrow_mut().push(n + 10);
                    }) as Box<dyn FnOnce() + '_>
                };
                run_all(vec![inner(1), inner(2)], DEFAULT_STACK).unwrap();
                assert!(active());
                switch();
                log.borrow_mut().push(99);
            }) as Box<dyn FnOnce() + '_>
        };
        run_all(vec![outer()], DEFAULT_STACK).unwrap();
        assert_eq!(log.into_inner(), vec![1, 2, 11, 12, 99]);
    }
}
