//! Runs, supersteps and enquiries: bsp_init, bsp_begin, bsp_end, bsp_nprocs, bsp_pid, bsp_time,
//! bsp_sync, and the message part of bsp_abort (formatted by bsp.h).

use crate::affinity;
use crate::state::{FRAMES, Frame, PENDING_INIT, current, die, fatal, pop, push, with_ctx};
use mbsp_rt::{Ctx, Run, Spmd};
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

type MainFn = unsafe extern "C" fn(c_int, *mut *mut c_char) -> c_int;

unsafe extern "C" {
    fn mbsp_c_call(spmd: Option<extern "C" fn()>, main_fn: Option<MainFn>) -> c_int;
    fn mbsp_c_leave();
    fn mbsp_c_weak_main() -> *mut c_void;
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
    if spmd.is_none() {
        die("mbsp: bsp_init: the SPMD function is NULL");
    }
    PENDING_INIT.set(spmd);
}

/// `bsp_begin` with the address of the program's `main` (bsp.h passes it in C, for SPMD
/// sections that are `main` itself).
///
/// # Safety
/// `main_fn` must be null or the program's `main`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_begin(p: c_uint, main_fn: *mut c_void) {
    // A process started by a run calls bsp_begin first: it only joins.
    let joined = FRAMES.with(|f| match f.borrow_mut().last_mut() {
        Some(top) if top.awaiting_begin => {
            top.awaiting_begin = false;
            true
        }
        _ => false,
    });
    if joined {
        return;
    }
    let main_ptr = if main_fn.is_null() {
        // SAFETY: reads the address of a weak symbol.
        unsafe { mbsp_c_weak_main() }
    } else {
        main_fn
    };
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
    if p == 0 {
        die("mbsp: bsp_begin: a run needs at least 1 process, but P = 0 was requested");
    }
    let p = affinity::max_threads().map_or(p as usize, |m| (p as usize).min(m));
    let parent = current();
    let mut run = Run::new(p);
    if parent.is_none() {
        if let Some((policy, bind)) = affinity::for_run(p) {
            run = run.policy(policy).bind(bind);
        }
    }
    let spawned = move |ctx: &mut Ctx| -> mbsp_rt::Result<()> {
        push(Frame {
            ctx,
            owner: None,
            awaiting_begin: true,
            ended: false,
        });
        // SAFETY: C entry points of the program; the trampoline catches bsp_end's exit.
        unsafe {
            match entry {
                Entry::Spmd(f) => mbsp_c_call(Some(f), None),
                Entry::Main(m) => mbsp_c_call(None, Some(m)),
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
            return Err(
                ctx.misuse_error("spmd", "the SPMD function returned without calling bsp_end")
            );
        }
        Ok(())
    };
    let started: mbsp_rt::Result<Spmd> = match parent {
        // SAFETY: the parent's context outlives the nested run (frames are a stack: the nested
        // run's frame is popped, and the run ended, before the parent's), and the parent thread
        // uses only the innermost frame's context, so the exclusive borrow is respected.
        Some(ptr) => run.begin_nested(unsafe { &mut *ptr }, spawned),
        None => run.begin(spawned),
    };
    match started {
        Ok(s) => {
            let mut owner = Box::new(s);
            let ctx: *mut Ctx = owner.ctx();
            push(Frame {
                ctx,
                owner: Some(owner),
                awaiting_begin: false,
                ended: false,
            });
        }
        // SAFETY: as above.
        Err(e) => fatal(parent.map(|p| unsafe { &*p }), e),
    }
}

/// Start (or, in a process started by a run, join) an SPMD section of `p` processes. C code
/// gets the macro of bsp.h instead, which also passes `main`.
///
/// # Safety
/// See `mcbsp_begin`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_begin(p: c_uint) {
    // SAFETY: forwarded.
    unsafe { mcbsp_begin(p, std::ptr::null_mut()) }
}

/// End the SPMD section. Process 0 waits for the others and continues; the other processes
/// leave their SPMD function here.
#[unsafe(no_mangle)]
pub extern "C" fn bsp_end() {
    if end_section() {
        // SAFETY: jumps back to this thread's trampoline; this frame holds nothing to drop.
        unsafe { mbsp_c_leave() }
    }
}

/// Returns whether the calling thread must leave its SPMD function.
fn end_section() -> bool {
    let owner = FRAMES.with(|f| match f.borrow_mut().last_mut() {
        None => None,
        Some(top) if top.owner.is_some() => Some(true),
        Some(top) => {
            top.ended = true;
            Some(false)
        }
    });
    match owner {
        None => die("mbsp: bsp_end: called outside an SPMD section"),
        Some(true) => {
            let spmd: Box<Spmd<'static>> = pop().and_then(|fr| fr.owner).expect("owner frame");
            if let Err(e) = spmd.end() {
                // SAFETY: the remaining frame's context is alive.
                fatal(current().map(|p| unsafe { &*p }), e);
            }
            false
        }
        Some(false) => true,
    }
}

/// The number of processes of the current run; outside a run, the number of hardware threads
/// (or the maximum set by `mcbsp_set_maximum_threads` / `MBSP_MAX_THREADS`).
#[unsafe(no_mangle)]
pub extern "C" fn bsp_nprocs() -> c_uint {
    match current() {
        // SAFETY: the frame's context is alive.
        Some(ptr) => unsafe { (*ptr).nprocs() as c_uint },
        None => crate::affinity::mcbsp_get_maximum_threads() as c_uint,
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
    with_ctx("bsp_sync", |c| c.sync())
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
