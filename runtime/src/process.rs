//! One process's life in a run: its thread bound and its context made ([`enter`]), the SPMD
//! function run and the final sync ([`process`]), its outcome recorded and the thread's binding
//! given back ([`leave`]).

use crate::ctx::{Ctx, RunRef, RunShared};
use crate::engine::state::ProcEngine;
use crate::error::{Error, ErrorKind, Result};
use crate::place::Layout;
use mbsp_topology::Binding;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// Record that process `pid`'s thread could not be started (the run is aborted); processes
/// `pid..` never start, and count as stopped.
pub(crate) fn spawn_failed(shared: &RunShared, pid: usize, e: std::io::Error) {
    for q in pid..shared.p {
        shared.proc(q).mark_stopped(*shared.id);
    }
    shared.tree.fail(&Error::new(
        ErrorKind::System,
        "run",
        shared.parent_path.clone(),
        None,
        format!(
            "could not start the thread for pid {pid} of {}: {e}",
            shared.p
        ),
    ));
}

/// Run `f` as process `pid` of run number `id` (`RunShared::id`, passed by the starter so
/// that no process reads the state's copy), then the final sync; any failure aborts the
/// hierarchy.
pub(crate) fn process<R, F>(shared: &Arc<RunShared>, id: u64, pid: usize, f: &F) -> Result<R>
where
    F: Fn(&mut Ctx) -> Result<R> + Sync + ?Sized,
{
    // `enter` and `leave` in their parts, the context made where it stays: it is large, and
    // each move of it copies the lot.
    let (binding, saved) = bind(shared, pid);
    let (result, layout) = {
        // SAFETY: the context is dropped at the end of this block, before this call returns,
        // and `shared` outlives the call.
        let mut ctx = unsafe { context(shared, id, pid, binding) };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let r = f(&mut ctx)?;
            ctx.end()?;
            Ok(r)
        }));
        let result = conclude(&mut ctx, outcome);
        (result, saved.as_ref().map(|_| ctx.run.layout.clone()))
        // The context is dropped here, where it lies: `drop(ctx)` would first copy it (it is
        // large) to a place of its own.
    };
    restore(saved, layout);
    result
}

thread_local! {
    /// The OS CPUs mbsp last bound this thread to (`None` when unknown), so that a thread
    /// placed on the same PUs run after run is not bound again (a binding system call costs
    /// microseconds, tens of microseconds when it moves the thread).
    pub(crate) static BOUND: std::cell::RefCell<Option<Vec<u32>>> = const { std::cell::RefCell::new(None) };
}

/// Bind the calling thread for process `pid` and make its context. Returns the thread's
/// binding before the run when it has to be restored at the end ([`leave`]): process 0 of a
/// top-level run is the caller's thread, and process 0 of a nested run is its parent's.
///
/// Process 0, when the binding its thread comes with is wider than its placement, must not
/// share a core with its bound siblings: a thread left on the parent's PUs was seen kept on a
/// sibling's core by the scheduler for whole runs (two processes on one core, half speed). If
/// the thread runs on a CPU of its placement that no sibling is placed on, it is left as it is:
/// the scheduler does not move a running thread off a core nobody else wants, and the
/// thread's binding stays its parent's. Else it is narrowed to its placement, and when the
/// nested run ends it gets its parent's binding back, at every level of nesting: a rank's
/// thread, say, that ran a nested run on its share's first core computes on its whole share
/// again. A binding system call costs about as much as the rest of a nested run's start, and a
/// widened thread stays where it was narrowed to: a program whose nested runs follow one
/// another binds at the first one only. Nothing is bound when the placements are equal.
///
/// The caller's thread, process 0 of a top-level run, follows the same rule unless the
/// placement is manual (then it is bound to the CPUs the program named), and gets the caller's
/// binding back at the end if anything narrowed it. A top-level run whose caller stays makes
/// no binding call on its thread. The price is paid by runs nested in such a process 0 that
/// stack several processes on its core: its thread keeps the caller's wider binding, so each
/// of them narrows it and gives that binding back (two calls a nested run).
///
/// # Safety
/// `shared` must outlive the context ([`RunRef::lent`]).
pub(crate) unsafe fn enter(
    shared: &Arc<RunShared>,
    id: u64,
    pid: usize,
) -> (Ctx, Option<Vec<u32>>) {
    let (binding, saved) = bind(shared, pid);
    // SAFETY: the caller's promise.
    (unsafe { context(shared, id, pid, binding) }, saved)
}

/// The binding part of [`enter`]: the thread bound for process `pid`, and its binding before
/// when it is to be restored.
fn bind(shared: &RunShared, pid: usize) -> (Binding, Option<Vec<u32>>) {
    let layout = &shared.layout;
    let (binding, saved) = if !layout.bind {
        (layout.unbound(), None)
    } else if pid == 0 {
        let want = &layout.pus[pid];
        match &shared.inherited {
            // Bound where it should be (its placement is the parent's): nothing to do; else
            // stay or narrow (above), and give the parent's binding back at the end.
            Some(Binding::Applied(parent)) if layout.binder.applies() => {
                let differs = parent != want;
                if BOUND.with(|b| b.borrow().as_ref() == Some(want)) {
                    (applied(shared, pid, want), differs.then(|| parent.clone()))
                } else if differs && layout.process0_stays_at(layout.binder.current_cpu()) {
                    // Stays: its binding is its parent's, and nothing is to be restored.
                    (applied(shared, pid, parent), None)
                } else {
                    (
                        bind_remembered(layout, want),
                        differs.then(|| parent.clone()),
                    )
                }
            }
            Some(parent) => (parent.clone(), None),
            // The caller's thread: `before` comes back at the end if the thread is elsewhere
            // then (see `leave`).
            None => match layout.binder.thread_cpus() {
                // Bound where it should be, or staying (above): nothing to bind.
                Some(before)
                    if &before == want || layout.caller_stays_at(layout.binder.current_cpu()) =>
                {
                    BOUND.with(|c| *c.borrow_mut() = Some(before.clone()));
                    (Binding::Applied(before.clone()), Some(before))
                }
                before => (bind_remembered(layout, want), before),
            },
        }
    } else {
        let want = &layout.pus[pid];
        let cached = BOUND.with(|b| b.borrow().as_ref() == Some(want));
        if cached && layout.binder.applies() {
            (applied(shared, pid, want), None)
        } else {
            (bind_remembered(layout, want), None)
        }
    };
    (binding, saved)
}

/// The context part of [`enter`].
///
/// # Safety
/// As [`enter`].
#[inline(always)]
unsafe fn context(shared: &Arc<RunShared>, id: u64, pid: usize, binding: Binding) -> Ctx {
    // SAFETY: this thread runs process `pid`, entering the run.
    let engine = ProcEngine::Threads(unsafe { shared.engine.threads().proc_state(pid) });
    // SAFETY: the caller's promise.
    let run = unsafe { RunRef::lent(shared) };
    Ctx::new(run, id, pid, binding, engine)
}

/// `Binding::Applied(cpus)` for process `pid`, in the vector its last context's binding
/// left: a thread bound where it already was allocates nothing for its binding.
fn applied(shared: &RunShared, pid: usize, cpus: &[u32]) -> Binding {
    // SAFETY: this thread runs process `pid`, entering the run.
    let mut v = unsafe { shared.proc(pid).take_spare_cpus() };
    v.clear();
    v.extend_from_slice(cpus);
    Binding::Applied(v)
}

/// Bind the calling thread to the OS CPUs `cpus` and remember where (see [`BOUND`]).
fn bind_remembered(layout: &Layout, cpus: &[u32]) -> Binding {
    let b = layout.binder.bind_thread_cpus(cpus);
    let now = match &b {
        Binding::Applied(cpus) => Some(cpus.clone()),
        _ => None,
    };
    BOUND.with(|c| *c.borrow_mut() = now);
    b
}

/// Turn the outcome of a process into its result (a panic becomes an error), record a failure,
/// let the engine take it to the others and leave the run ([`Engine::leave`]), and give the
/// thread back its binding. A failed process returns the run's error as the engine agreed it
/// with the others, if it did (over ranks), else its own.
///
/// [`Engine::leave`]: crate::engine::Engine::leave
pub(crate) fn leave<R>(
    ctx: Ctx,
    saved: Option<Vec<u32>>,
    outcome: std::thread::Result<Result<R>>,
) -> Result<R> {
    let (result, layout) = conclude_and_drop(ctx, saved.is_some(), outcome);
    restore(saved, layout);
    result
}

/// The part of [`leave`] that needs the context, which is dropped where it lies when this
/// returns (`drop(ctx)` would first copy it: it is large). Returns the layout too when a
/// binding is to be restored: a reference count that the run's other threads also change is
/// touched no more than it must be.
fn conclude_and_drop<R>(
    mut ctx: Ctx,
    restoring: bool,
    outcome: std::thread::Result<Result<R>>,
) -> (Result<R>, Option<Arc<Layout>>) {
    let result = conclude(&mut ctx, outcome);
    (result, restoring.then(|| ctx.run.layout.clone()))
}

/// The result part of [`leave`], before the context is dropped.
#[inline(always)]
fn conclude<R>(ctx: &mut Ctx, outcome: std::thread::Result<Result<R>>) -> Result<R> {
    let result = outcome_of(ctx, outcome);
    if let Err(e) = &result {
        ctx.run.tree.fail(e);
    }
    let verdict = ctx.engine_leave(result.as_ref().err());
    result.map_err(|e| verdict.unwrap_or(e))
}

/// The binding part of [`leave`], after the context is dropped.
fn restore(saved: Option<Vec<u32>>, layout: Option<Arc<Layout>>) {
    if let (Some(cpus), Some(layout)) = (saved, layout) {
        // Bound at the start (or narrowed for a nested run, or by one nested in this run):
        // put it back.
        if BOUND.with(|c| c.borrow().as_ref() != Some(&cpus)) {
            layout.binder.restore_thread(&cpus);
            BOUND.with(|c| *c.borrow_mut() = Some(cpus));
        }
    }
}

/// A process's result, a panic made an error.
pub(crate) fn outcome_of<R>(ctx: &Ctx, outcome: std::thread::Result<Result<R>>) -> Result<R> {
    match outcome {
        Ok(r) => r,
        Err(payload) => {
            let message = panic_message(&*payload);
            // A primitive that panicked with an error of its own ([`raise`]) ends the run
            // with that error.
            //
            // [`raise`]: crate::error::raise
            Err(crate::error::raised(&message, true)
                .unwrap_or_else(|| ctx.error(ErrorKind::Panic, "spmd", message)))
        }
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".into()
    }
}
