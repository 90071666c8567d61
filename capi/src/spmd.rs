//! Runs, supersteps and enquiries: bsp_init, bsp_begin, bsp_end, bsp_nprocs, bsp_pid, bsp_time,
//! bsp_sync, and the message part of bsp_abort (formatted by bsp.h).

use crate::affinity;
use crate::ranks;
use crate::state::{
    FRAMES, Frame, PENDING_DATA, PENDING_INIT, current, die, fatal, pop, push, with_ctx,
};
use mbsp_rt::{Ctx, Run, Spmd};
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

type MainFn = unsafe extern "C" fn(c_int, *mut *mut c_char) -> c_int;

/// The C++ trampoline of bsp.h: calls the SPMD function (or `main`) and catches the exception
/// that the C++ `bsp_end` throws; returns 1 if the entry point was left through `bsp_end`.
pub(crate) type Trampoline =
    unsafe extern "C" fn(Option<extern "C" fn()>, Option<MainFn>, c_int, *mut *mut c_char) -> c_int;

unsafe extern "C" {
    fn mbsp_c_call(
        spmd: Option<extern "C" fn()>,
        main_fn: Option<MainFn>,
        trampoline: Option<Trampoline>,
    ) -> c_int;
    fn mbsp_c_leave();
    fn mbsp_c_weak_main() -> *mut c_void;
}

/// The deepest nesting of runs accepted (a top-level run is level 1): far more than any
/// machine hierarchy has, so reaching it means runaway recursion.
const MAX_DEPTH: usize = 64;

/// A top-level run over MPI ranks was started (there is one per program).
static RANKS_USED: AtomicBool = AtomicBool::new(false);

/// The data of `mbsp_init_data`, handed to the run's threads.
#[derive(Clone, Copy)]
struct SpmdData(*mut c_void);

// SAFETY: the library never dereferences the pointer; it only hands it back to the program's
// SPMD function on each process, which shares the program's address space (bsp.hpp's program
// object is read by all processes of its run, as MulticoreBSP's is).
unsafe impl Send for SpmdData {}
// SAFETY: as above.
unsafe impl Sync for SpmdData {}

impl SpmdData {
    /// The pointer (a method, so that a closure captures the whole `Send` wrapper).
    fn ptr(self) -> *mut c_void {
        self.0
    }
}

/// What the threads of a run execute.
#[derive(Clone, Copy)]
enum Entry {
    Spmd(extern "C" fn()),
    Main(MainFn),
}

/// Record the SPMD function that `bsp_begin` will start on the new processes.
///
/// # Safety
/// `spmd` must be a valid function; `argc`/`argv` are kept for portability and not used.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_init(
    spmd: Option<extern "C" fn()>,
    _argc: c_int,
    _argv: *mut *mut c_char,
) {
    init("bsp_init", spmd, std::ptr::null_mut());
}

/// `bsp_init` whose run hands `data` to every process's SPMD function (`mbsp_spmd_data`):
/// bsp.hpp's `BSP_program::begin` passes its program object, so that the processes of each
/// run (nested runs included) find their own.
///
/// # Safety
/// As `bsp_init`; `data` is only handed back, never read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mbsp_init_data(spmd: Option<extern "C" fn()>, data: *mut c_void) {
    init("mbsp_init_data", spmd, data);
}

/// In an SPMD function started by a run of `mbsp_init_data` (before or after its
/// `bsp_begin`): that call's `data`. Null after a plain `bsp_init`, or outside an SPMD
/// function.
#[unsafe(no_mangle)]
pub extern "C" fn mbsp_spmd_data() -> *mut c_void {
    let pending = PENDING_DATA.get();
    if !pending.is_null() {
        // Process 0 before its bsp_begin (which takes the data into the run's frame).
        return pending;
    }
    FRAMES.with(|f| {
        f.borrow()
            .last()
            .map_or(std::ptr::null_mut(), |top| top.data)
    })
}

/// Record the SPMD function (and bsp.hpp's data) for the next `bsp_begin` of this thread.
fn init(op: &str, spmd: Option<extern "C" fn()>, data: *mut c_void) {
    if spmd.is_none() {
        die(&format!("mbsp: {op}: the SPMD function is NULL"));
    }
    PENDING_INIT.set(spmd);
    PENDING_DATA.set(data);
    // Over MPI ranks (BSPlib's convention there), every rank but 0 goes from a top-level
    // bsp_init straight into the SPMD function: main's sequential part, which typically
    // reads the parameters, is rank 0's alone, and the others take P from rank 0 at
    // bsp_begin. The rank ends at the SPMD function's bsp_end (see `end_section`).
    if current().is_none() && mbsp_rt::ranks::bsplib_world().is_some_and(|w| w.rank() != 0) {
        rank_runs_spmd(spmd);
    }
}

/// A rank other than 0 runs the SPMD function given to the top-level `bsp_init`, which must
/// start the run with `bsp_begin` and end it with `bsp_end` (where the rank exits); returning
/// from it is a misuse that ends the program.
fn rank_runs_spmd(spmd: Option<extern "C" fn()>) -> ! {
    // SAFETY: the program's SPMD function, called through the C shim as for a thread of a
    // run (no C++ trampoline is needed: this rank starts its run itself, so its bsp_end ends
    // the rank by exiting, never by throwing or jumping out).
    unsafe { mbsp_c_call(spmd, None, None) };
    match current() {
        Some(ptr) => {
            // SAFETY: the frame pushed by the function's bsp_begin is alive (popped only by
            // its bsp_end, which would have ended the rank).
            let ctx = unsafe { &*ptr };
            fatal(
                Some(ctx),
                ctx.misuse_error("spmd", "the SPMD function returned without calling bsp_end"),
            )
        }
        None => die(
            "mbsp: bsp_init: over MPI ranks, a rank other than 0 runs the SPMD function given to \
             the top-level bsp_init (BSPlib's convention), and that function returned without \
             calling bsp_begin",
        ),
    }
}

/// MulticoreBSP's name of `bsp_init`.
///
/// # Safety
/// As `bsp_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_init(
    spmd: Option<extern "C" fn()>,
    argc: c_int,
    argv: *mut *mut c_char,
) {
    // SAFETY: forwarded.
    unsafe { bsp_init(spmd, argc, argv) }
}

/// End the program with a misuse of `bsp_begin`: reported by the calling process if it is in a
/// run, else as a plain line.
fn begin_misuse(parent: Option<*mut Ctx>, message: String) -> ! {
    match parent {
        Some(ptr) => {
            // SAFETY: the innermost frame's context is alive; only this thread uses it.
            let ctx = unsafe { &*ptr };
            fatal(Some(ctx), ctx.misuse_error("run", message))
        }
        None => die(&format!("mbsp: bsp_begin: {message}")),
    }
}

/// The entry of `bsp_begin` / `mcbsp_begin` behind bsp.h: `p` processes (signed, so that a
/// negative BSPlib `int` is reported), `main_fn` the program's `main` (passed by the C macro,
/// for SPMD sections that are `main` itself; null: looked up as a weak symbol), `trampoline`
/// the C++ trampoline of bsp.h when called from C++ (null from C).
///
/// Its phases: a process started by a run only *joins* it; otherwise the call is *checked*
/// (nesting), the run's *process count* and *entry point* are settled, the run is
/// *configured* (threads, affinity) and *started* (nested, over MPI ranks, or on threads), and
/// the calling process *owns* it until its `bsp_end`.
///
/// # Safety
/// `main_fn` must be null or the program's `main`; `trampoline` null or bsp.h's trampoline.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mbsp_begin_with(
    p: i64,
    main_fn: *mut c_void,
    trampoline: Option<Trampoline>,
) {
    if join_started_run() {
        return;
    }
    let parent = current();
    check_nesting(parent);
    let p = process_count(parent, p);
    // SAFETY: the caller's promise on `main_fn`.
    let (entry, data) = unsafe { take_entry(main_fn) };
    let (run, p) = configure_run(parent, p);
    let body = move |ctx: &mut Ctx| run_process(ctx, entry, data, trampoline);
    // SAFETY: `parent` is this thread's innermost frame's context (from `current`).
    let started = unsafe { start_run(parent, run, p, body) };
    own_run(parent, started, data);
}

/// Phase *join*: a process started by a run calls `bsp_begin` first in its SPMD function;
/// it only joins the run (`true`).
fn join_started_run() -> bool {
    FRAMES.with(|f| match f.borrow_mut().last_mut() {
        Some(top) if top.awaiting_begin => {
            top.awaiting_begin = false;
            true
        }
        _ => false,
    })
}

/// Phase *check*: a nested `bsp_begin` needs its own `bsp_init`, and nesting is bounded.
fn check_nesting(parent: Option<*mut Ctx>) {
    // SAFETY: the innermost frame's context is alive.
    let level = parent.map_or(0, |ptr| unsafe { (*ptr).path().len() }) + 1;
    if parent.is_some() && PENDING_INIT.get().is_none() {
        begin_misuse(
            parent,
            "called again in the SPMD section it started or joined (each SPMD section has one \
             bsp_begin; a nested run needs bsp_init(spmd, argc, argv) right before its \
             bsp_begin)"
                .into(),
        );
    }
    if level > MAX_DEPTH {
        begin_misuse(
            parent,
            format!(
                "nested runs are limited to {MAX_DEPTH} levels, and this bsp_begin would start \
                 level {level} (a nested run that starts itself without end?)"
            ),
        );
    }
}

/// Phase *process count*: the `p` the run is asked for, at least 1.
///
/// Over MPI ranks, the process count of a top-level run is rank 0's (BSPlib's convention: the
/// other ranks came from bsp_init without running main's sequential part, where P is usually
/// read). The runs over ranks are one per program: the ranks other than 0 end at its bsp_end.
fn process_count(parent: Option<*mut Ctx>, p: i64) -> i64 {
    let p = match (parent, mbsp_rt::ranks::bsplib_world()) {
        (None, Some(_)) => {
            if RANKS_USED.swap(true, Ordering::Relaxed) {
                begin_misuse(
                    None,
                    "over MPI ranks a program has one top-level SPMD section: the ranks other \
                     than 0 ended at the first one's bsp_end (BSPlib's convention); start a \
                     further section inside one (nested), or run on threads (MBSP_MPI=0)"
                        .into(),
                );
            }
            ranks::root_procs(p)
        }
        _ => p,
    };
    if p < 1 {
        begin_misuse(
            parent,
            format!("a run needs at least 1 process, but P = {p} was requested"),
        );
    }
    p
}

/// Phase *entry point*: what the processes run (the function of the last `bsp_init`, else
/// `main`), and the data of `mbsp_init_data` they are handed; both are taken, so that the
/// next `bsp_begin` needs its own `bsp_init`.
///
/// # Safety
/// `main_fn` must be null or the program's `main`.
unsafe fn take_entry(main_fn: *mut c_void) -> (Entry, SpmdData) {
    let main_ptr = if main_fn.is_null() {
        // SAFETY: reads the address of a weak symbol.
        unsafe { mbsp_c_weak_main() }
    } else {
        main_fn
    };
    let data = SpmdData(PENDING_DATA.replace(std::ptr::null_mut()));
    let entry = match PENDING_INIT.take() {
        Some(f) => Entry::Spmd(f),
        None if !main_ptr.is_null() => {
            // SAFETY: the caller (or the linker) gives the address of `main`.
            Entry::Main(unsafe { std::mem::transmute::<*mut c_void, MainFn>(main_ptr) })
        }
        None => die(
            "mbsp: bsp_begin: no SPMD function: call bsp_init(spmd, argc, argv) before bsp_begin, \
             or (C++, shared library) link with -rdynamic so that main is visible",
        ),
    };
    (entry, data)
}

/// Phase *configure*: the run of `p` processes (at most the maximum number of threads), placed
/// by the C affinity settings when it is a top-level run; returns it with its process count.
fn configure_run(parent: Option<*mut Ctx>, p: i64) -> (Run, usize) {
    let p = usize::try_from(p).unwrap_or(usize::MAX);
    let p = affinity::max_threads().map_or(p, |m| p.min(m));
    let mut run = Run::new(p);
    if parent.is_none() {
        if let Some((policy, bind)) = affinity::for_run(p) {
            run = run.policy(policy).bind(bind);
        }
    }
    (run, p)
}

/// What each process of the run executes: it pushes its frame, runs the program's entry point
/// (through the C shim, under the C++ trampoline when there is one) and checks that the entry
/// point left through `bsp_end`, with no nested run of its own still running.
fn run_process(
    ctx: &mut Ctx,
    entry: Entry,
    data: SpmdData,
    trampoline: Option<Trampoline>,
) -> mbsp_rt::Result<()> {
    push(Frame {
        ctx,
        owner: None,
        awaiting_begin: true,
        ended: false,
        cxx: trampoline.is_some(),
        data: data.ptr(),
        ckpt: Default::default(),
    });
    // SAFETY: C entry points of the program; the trampolines catch bsp_end's exit.
    unsafe {
        match entry {
            Entry::Spmd(f) => mbsp_c_call(Some(f), None, trampoline),
            Entry::Main(m) => mbsp_c_call(None, Some(m), trampoline),
        };
    }
    let frame = pop().expect("own frame");
    if frame.owner.is_some() {
        return Err(ctx.misuse_error(
            "spmd",
            "the SPMD function returned while a nested run it started was still running \
             (missing bsp_end of the nested run)",
        ));
    }
    if !frame.ended {
        return Err(ctx.misuse_error("spmd", "the SPMD function returned without calling bsp_end"));
    }
    Ok(())
}

/// Phase *start*: the run begins nested in the parent's run, over MPI ranks (a top-level run
/// when the program runs over ranks), or on threads. Over MPI ranks, a rank beyond the `p`
/// processes takes no part: it leaves the program at once (as in BSPlib over MPI), after the
/// collective start it must join.
///
/// # Safety
/// `parent`, if any, is the calling thread's innermost frame's context.
unsafe fn start_run(
    parent: Option<*mut Ctx>,
    run: Run,
    p: usize,
    body: impl Fn(&mut Ctx) -> mbsp_rt::Result<()> + Send + Sync + 'static,
) -> mbsp_rt::Result<Spmd<'static>> {
    let world = parent
        .is_none()
        .then(mbsp_rt::ranks::bsplib_world)
        .flatten();
    let idle = world.is_some_and(|w| w.rank() >= p);
    let started = match parent {
        // SAFETY: the parent's context outlives the nested run (frames are a stack: the nested
        // run's frame is popped, and the run ended, before the parent's), and the parent thread
        // uses only the innermost frame's context, so the exclusive borrow is respected.
        Some(ptr) => run.begin_nested(unsafe { &mut *ptr }, body),
        None => match world {
            Some(w) => w.begin(run),
            None => run.begin(body),
        },
    };
    if idle {
        std::process::exit(0);
    }
    started
}

/// Phase *own*: process 0 keeps the started run in a frame of its own until its `bsp_end`; a
/// run that could not start ends the program.
fn own_run(parent: Option<*mut Ctx>, started: mbsp_rt::Result<Spmd<'static>>, data: SpmdData) {
    match started {
        Ok(s) => {
            let mut owner = Box::new(s);
            let ctx: *mut Ctx = owner.ctx();
            push(Frame {
                ctx,
                owner: Some(owner),
                awaiting_begin: false,
                ended: false,
                cxx: false,
                data: data.ptr(),
                ckpt: Default::default(),
            });
        }
        // SAFETY: the innermost frame's context is alive.
        Err(e) => fatal(parent.map(|p| unsafe { &*p }), e),
    }
}

/// Start (or, in a process started by a run, join) an SPMD section of `p` processes. C code
/// gets the macro of bsp.h instead, which also passes `main`; C++ code the inline function of
/// bsp.h, which also passes its trampoline.
///
/// # Safety
/// See `mbsp_begin_with`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_begin(p: c_uint) {
    // SAFETY: forwarded.
    unsafe { mbsp_begin_with(i64::from(p), std::ptr::null_mut(), None) }
}

/// MulticoreBSP's name of `bsp_begin`.
///
/// # Safety
/// See `mbsp_begin_with`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_begin(p: c_uint) {
    // SAFETY: forwarded.
    unsafe { mbsp_begin_with(i64::from(p), std::ptr::null_mut(), None) }
}

/// End the SPMD section: a synchronisation of every process of the run. Process 0 waits for
/// the others and continues; the other processes leave their SPMD function here (through
/// `longjmp`: this is the C `bsp_end`), once every process has reached its `bsp_end` and the
/// last superstep's communication has been delivered, so that nothing they registered on
/// their stack is read after they leave.
#[unsafe(no_mangle)]
pub extern "C" fn bsp_end() {
    if end_section() != Ended::Continue {
        // SAFETY: jumps back to this thread's trampoline; this frame holds nothing to drop.
        unsafe { mbsp_c_leave() }
    }
}

/// MulticoreBSP's name of `bsp_end`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_end() {
    bsp_end()
}

/// The C++ `bsp_end` of bsp.h: ends the SPMD section and returns 1 if the calling process must
/// now leave its SPMD function by throwing bsp.h's exception (its entry point runs under the
/// C++ trampoline), 0 if it continues (process 0). A process that must leave but runs without
/// the trampoline (its run was started from C) leaves through `longjmp`, as from C.
#[unsafe(no_mangle)]
pub extern "C" fn mbsp_end_cxx() -> c_int {
    match end_section() {
        Ended::Continue => 0,
        Ended::LeaveCxx => 1,
        Ended::LeaveC => {
            // SAFETY: as in `bsp_end`.
            unsafe { mbsp_c_leave() };
            1
        }
    }
}

/// What a process does after `bsp_end`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Process 0 of the run: continue after `bsp_end`.
    Continue,
    /// Leave the SPMD function through `longjmp`.
    LeaveC,
    /// Leave the SPMD function by throwing (the C++ trampoline catches it).
    LeaveCxx,
}

/// End the calling process's SPMD section; returns what the process does next.
fn end_section() -> Ended {
    let owner = FRAMES.with(|f| match f.borrow_mut().last_mut() {
        None => None,
        Some(top) if top.owner.is_some() => Some(Ended::Continue),
        Some(top) => {
            top.ended = true;
            Some(if top.cxx {
                Ended::LeaveCxx
            } else {
                Ended::LeaveC
            })
        }
    });
    match owner {
        None => die("mbsp: bsp_end: called outside an SPMD section"),
        Some(Ended::Continue) => {
            let spmd: Box<Spmd<'static>> = pop().and_then(|fr| fr.owner).expect("owner frame");
            if let Err(e) = spmd.end() {
                // SAFETY: the remaining frame's context is alive.
                fatal(current().map(|p| unsafe { &*p }), e);
            }
            // Over MPI ranks, only process 0 goes on after the top-level bsp_end (as in BSPlib
            // over MPI); the others end here, with status 0 (MPI is finalised at exit).
            if current().is_none() && mbsp_rt::ranks::bsplib_world().is_some_and(|w| w.rank() != 0)
            {
                std::process::exit(0);
            }
            Ended::Continue
        }
        Some(leave) => {
            // The end synchronisation, inside the SPMD function's frame: memory it registered
            // (often on its stack) stays alive until every process has ended and every get
            // of it has been served. The runtime's own end after the function is left is then
            // a no-op.
            with_ctx("bsp_end", |c| c.end());
            leave
        }
    }
}

/// The number of processes of the current run; outside a run, the number of hardware threads,
/// or over MPI ranks the number of ranks (at most the maximum set by
/// `mcbsp_set_maximum_threads` / `MBSP_MAX_THREADS`): what a top-level `bsp_begin` can start.
#[unsafe(no_mangle)]
pub extern "C" fn bsp_nprocs() -> c_uint {
    match current() {
        // SAFETY: the frame's context is alive.
        Some(ptr) => unsafe { (*ptr).nprocs() as c_uint },
        None => match mbsp_rt::ranks::bsplib_world() {
            Some(w) => affinity::max_threads().map_or(w.size(), |m| w.size().min(m)) as c_uint,
            None => affinity::mcbsp_get_maximum_threads() as c_uint,
        },
    }
}

/// The calling process's id in the current run.
#[unsafe(no_mangle)]
pub extern "C" fn bsp_pid() -> c_uint {
    with_ctx("bsp_pid", |c| Ok(c.pid() as c_uint))
}

/// Seconds since the calling process's run started.
#[unsafe(no_mangle)]
pub extern "C" fn bsp_time() -> f64 {
    with_ctx("bsp_time", |c| Ok(c.time()))
}

/// End the superstep.
#[unsafe(no_mangle)]
pub extern "C" fn bsp_sync() {
    let checkpointing = with_ctx("bsp_sync", |c| {
        if c.checkpointing() {
            return Ok(true);
        }
        c.sync().map(|()| false)
    });
    if checkpointing {
        crate::resiliency::bsp_sync_checkpointing();
    }
}

/// Declare that this process receives exactly `records` puts and messages in this superstep
/// (an mbsp extension, BSPk's `bspk_expect`): the next sync waits only for them. Every process
/// declares in the same superstep; see `Ctx::declare_incoming`.
#[unsafe(no_mangle)]
pub extern "C" fn bsp_expect(records: c_uint) {
    with_ctx("bsp_expect", |c| c.declare_incoming(records as usize))
}

/// Abort the program with `message` (bsp.h's `bsp_abort` formats it).
///
/// # Safety
/// `message` must be a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_abort_message(message: *const c_char) {
    let m = if message.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's promise.
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    };
    match current() {
        Some(ptr) => {
            // SAFETY: the frame's context is alive.
            let ctx = unsafe { &*ptr };
            let e = ctx.abort(m);
            fatal(Some(ctx), e)
        }
        None => die(&format!("mbsp: bsp_abort: aborted: {m}")),
    }
}
