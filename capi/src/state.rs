//! Per-thread state of the C interface: the stack of runs the thread takes part in.

use mbsp_rt::{Ctx, Error, ErrorKind, Spmd};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};

/// One run a thread takes part in.
pub(crate) struct Frame {
    /// The thread's context in that run (owned by the runtime or by `owner`).
    pub(crate) ctx: *mut Ctx,
    /// For the process that started the run (pid 0): the run itself.
    /// (`'static`: the parent context it borrows is kept alive by the frame stack.)
    pub(crate) owner: Option<Box<Spmd<'static>>>,
    /// A thread started for the run whose SPMD function has not called `bsp_begin` yet.
    pub(crate) awaiting_begin: bool,
    /// `bsp_end` was called (threads started for the run).
    pub(crate) ended: bool,
    /// The thread's SPMD function runs under the C++ trampoline of bsp.h (the run was started
    /// by C++ code), so a C++ `bsp_end` leaves it by throwing rather than by `longjmp`.
    pub(crate) cxx: bool,
    /// The pointer given to `mbsp_init_data` for the run (bsp.hpp's program object), for
    /// `mbsp_spmd_data`; null after a plain `bsp_init`.
    pub(crate) data: *mut std::ffi::c_void,
    /// The process's checkpointing in this run (`resiliency.rs`).
    pub(crate) ckpt: crate::resiliency::CState,
}

/// The runs a thread takes part in, innermost last.
pub(crate) struct Frames(Vec<Frame>);

impl std::ops::Deref for Frames {
    type Target = Vec<Frame>;
    fn deref(&self) -> &Vec<Frame> {
        &self.0
    }
}

impl std::ops::DerefMut for Frames {
    fn deref_mut(&mut self) -> &mut Vec<Frame> {
        &mut self.0
    }
}

impl Drop for Frames {
    /// The thread ends inside an SPMD section — its process called `exit` (or `pthread_exit`),
    /// or `main` returned — so it left the section without `bsp_end`: a misuse, reported for
    /// the innermost run like any other (one line, exit status 1), instead of the run being
    /// dropped under the other processes (which, over MPI ranks, would also let a rank that
    /// returned from its SPMD function run on).
    fn drop(&mut self) {
        let Some(top) = self.0.last() else {
            return;
        };
        // SAFETY: the frame's context is alive (owned by the frame, or by the runtime on this
        // thread's stack, which `exit` does not unwind); only this thread uses it.
        let ctx = unsafe { &*top.ctx };
        fatal(
            Some(ctx),
            ctx.misuse_error(
                "spmd",
                "left the SPMD section without calling bsp_end (it returned from the function \
                 that called bsp_begin, or called exit)",
            ),
        )
    }
}

thread_local! {
    pub(crate) static FRAMES: RefCell<Frames> = const { RefCell::new(Frames(Vec::new())) };
    /// The SPMD function given to the last `bsp_init` of this thread.
    pub(crate) static PENDING_INIT: Cell<Option<extern "C" fn()>> = const { Cell::new(None) };
    /// The data given with it (`mbsp_init_data`), null after a plain `bsp_init`.
    pub(crate) static PENDING_DATA: Cell<*mut std::ffi::c_void> =
        const { Cell::new(std::ptr::null_mut()) };
}

// The innermost frame's context (null outside runs), read by every primitive: kept in an
// initial-exec TLS variable of the C shim (Rust's thread-locals in a shared library cost a
// __tls_get_addr call, a visible share of the cost of a sync).
unsafe extern "C" {
    fn mbsp_c_current() -> *mut std::ffi::c_void;
    fn mbsp_c_set_current(ctx: *mut std::ffi::c_void);
}

struct Current;
impl Current {
    #[inline]
    fn set(&self, c: *mut Ctx) {
        // SAFETY: writes this thread's TLS slot.
        unsafe { mbsp_c_set_current(c.cast()) }
    }
    #[inline]
    fn get(&self) -> *mut Ctx {
        // SAFETY: reads this thread's TLS slot.
        unsafe { mbsp_c_current().cast() }
    }
}
static CURRENT: Current = Current;

/// Push a frame (the thread entered a run).
pub(crate) fn push(frame: Frame) {
    CURRENT.set(frame.ctx);
    FRAMES.with(|f| f.borrow_mut().push(frame));
}

/// Pop the innermost frame (the thread left a run).
pub(crate) fn pop() -> Option<Frame> {
    FRAMES.with(|f| {
        let mut f = f.borrow_mut();
        let top = f.pop();
        CURRENT.set(f.last().map_or(std::ptr::null_mut(), |fr| fr.ctx));
        top
    })
}

/// The calling thread's context in its innermost run, if any.
#[inline]
pub(crate) fn current() -> Option<*mut Ctx> {
    let c = CURRENT.get();
    (!c.is_null()).then_some(c)
}

/// Run `f` on the innermost context; any error ends the program (see [`fatal`]).
pub(crate) fn with_ctx<R>(op: &str, f: impl FnOnce(&mut Ctx) -> mbsp_rt::Result<R>) -> R {
    let Some(ptr) = current() else {
        die(&format!(
            "mbsp: {op}: called outside an SPMD section (between bsp_begin and bsp_end)"
        ));
    };
    // SAFETY: the frame's context lives as long as the frame, and only this thread uses it;
    // no other reference to it is alive during a primitive.
    let ctx = unsafe { &mut *ptr };
    match f(ctx) {
        Ok(v) => v,
        Err(e) => fatal(Some(ctx), e),
    }
}

/// The C name of a runtime operation, for messages.
pub(crate) fn c_op(op: &str) -> String {
    match op {
        "run" => "bsp_begin".into(),
        "end" => "bsp_end".into(),
        "spmd" => "spmd".into(),
        "move" => "bsp_move".into(),
        "region_end" => "mbsp_region_end".into(),
        o if o.starts_with("bsp_") || o.starts_with("mcbsp_") || o.starts_with("mbsp_") => o.into(),
        o => format!("bsp_{o}"),
    }
}

/// Print the error (the root cause if this one only reports that the run was aborted) as one
/// line on stderr and exit the program with status 1.
pub(crate) fn fatal(ctx: Option<&Ctx>, e: Error) -> ! {
    let e = match (e.kind(), ctx.and_then(Ctx::failure)) {
        (ErrorKind::Aborted, Some(root)) => root,
        _ => e,
    };
    let text = e.to_string();
    let rest = text.strip_prefix(e.op()).unwrap_or(&text);
    die(&format!("mbsp: {}{rest}", c_op(e.op())))
}

unsafe extern "C" {
    fn fflush(stream: *mut std::ffi::c_void) -> std::ffi::c_int;
    fn _exit(status: std::ffi::c_int) -> !;
}

/// Print `line` and exit with status 1; if another thread is already exiting, wait for it.
///
/// The program's C output streams are flushed, then the process ends with `_exit`: `exit`
/// would run this thread's thread-local destructors, which end the runs it takes part in and
/// wait for their other processes — which may be waiting here.
pub(crate) fn die(line: &str) -> ! {
    static DYING: AtomicBool = AtomicBool::new(false);
    if DYING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    eprintln!("{line}");
    // SAFETY: fflush(NULL) flushes all C streams.
    unsafe { fflush(std::ptr::null_mut()) };
    if mbsp_rt::ranks::bsplib_world().is_some() {
        // Over MPI ranks, the launcher ends the other ranks as soon as this one exits, and can
        // drop this line, still in its forwarding pipe, when it does: give it a moment to pass
        // the line on (generous, for a loaded machine).
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // SAFETY: _exit ends the process.
    unsafe { _exit(1) }
}
