//! The rank engine's side of the seam (`engine/mod.rs`): the [`Engine`] functions, each
//! reaching this process's connection ([`Net`]) in its context.

use super::net::Net;
use super::protocol::BIG_PUT;
use crate::ctx::Ctx;
use crate::engine::Engine;
use crate::engine::state::ProcEngine;
use crate::error::{Error, Result};
use bytemuck::Pod;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

/// The rank engine (module documentation); its state is the process's [`Net`].
pub(crate) struct Ranks;

impl Engine for Ranks {
    fn sync(ctx: &mut Ctx, ending: bool) -> Result<()> {
        with_net(ctx, |net, ctx| ctx.rank_sync(net, ending))
    }

    fn stop(ctx: &mut Ctx) -> Option<Error> {
        with_net(ctx, |net, ctx| ctx.rank_fail(net))
    }

    /// A large put to another rank travels apart from the streams (module documentation).
    fn put(ctx: &Ctx, pid: usize, dst: *mut u8, src: &[u8]) -> Option<Result<()>> {
        if pid == ctx.pid || src.len() < BIG_PUT {
            return None;
        }
        Some(
            match net(ctx).big_put(pid, dst, src, ctx.step, ctx.prev_lazy) {
                Some(()) => Ok(()),
                None => Err(ctx.no_room_for_put(pid, src.len())),
            },
        )
    }

    /// A buffer cannot leave this address space: its bytes are copied (with its element type,
    /// for the receiver's check) and the buffer goes back to this process's pool.
    fn send(_: &Ctx, _: usize, _: &[u8], _: &[u8]) -> bool {
        false
    }

    fn to_outbox(_: &Ctx, _: usize) {}

    fn send_owned<T: Pod>(ctx: &Ctx, pid: usize, tag: &[u8], payload: Vec<T>) -> Option<()> {
        let sent = ctx.with_outbox(pid, |ob| ob.copy_owned(tag, &payload));
        ctx.recycle(payload);
        sent
    }

    unsafe fn hpput(ctx: &Ctx, pid: usize, src: *const u8, dst: *mut u8, len: usize) -> Result<()> {
        if pid == ctx.pid {
            // SAFETY: as for the thread engine: our own registered memory (checked), which
            // nobody else touches in this superstep (the caller's promise).
            unsafe { crate::stream::copy_may_overlap(src, dst, len) };
            return Ok(());
        }
        // SAFETY: forwarded to the caller.
        unsafe { ctx.rank_hpput(net(ctx), pid, src, dst, len) }
    }

    unsafe fn get_now(
        ctx: &Ctx,
        op: &'static str,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        if pid == ctx.pid {
            // SAFETY: as in `hpput`, for a source nobody writes in this superstep.
            unsafe { crate::stream::copy_may_overlap(src, dst, len) };
            return Ok(());
        }
        // SAFETY: forwarded to the caller.
        unsafe { ctx.rank_get_now(net(ctx), op, pid, src, dst, len) }
    }

    /// A failed process's last exchange takes its error to every rank (unless an exchange
    /// already ended the run); then the connection is closed. The run's error is the one every
    /// rank got in that exchange.
    fn leave(ctx: &mut Ctx, failure: Option<&Error>) -> Option<Error> {
        let agreed = failure.and_then(|_| Self::stop(ctx));
        if let Some(net) = take_net(ctx) {
            net.close();
        }
        failure.and(agreed.or_else(|| ctx.run.tree.error()))
    }

    fn all_gather(ctx: &mut Ctx, mine: &[u64]) -> Option<Vec<Vec<u64>>> {
        Some(with_net(ctx, |net, _| {
            super::wire::all_gather_words(&net.comm, mine)
        }))
    }
}

/// This process's connection.
///
/// # Panics
/// While a call of [`with_net`] has it out, which no caller of this function overlaps.
fn net(ctx: &Ctx) -> &Net {
    match &ctx.engine {
        ProcEngine::Ranks(Some(net)) => net,
        _ => unreachable!("a rank's connection, outside the calls that take it out"),
    }
}

/// Take this process's connection out of its context for good (it leaves the run).
fn take_net(ctx: &mut Ctx) -> Option<Box<Net>> {
    match &mut ctx.engine {
        ProcEngine::Ranks(net) => net.take(),
        _ => None,
    }
}

/// Call `f` with this process's connection taken out of the context (so that it gets the
/// context mutably too), and put it back when `f` returns or unwinds: a panic inside the rank
/// engine leaves the connection in place, so that the failure exchange can still take the
/// failure to the other ranks ([`Engine::leave`]).
fn with_net<R>(ctx: &mut Ctx, f: impl FnOnce(&mut Net, &mut Ctx) -> R) -> R {
    let Some(mut net) = take_net(ctx) else {
        unreachable!("a rank's connection, taken out twice or after the rank left");
    };
    let r = catch_unwind(AssertUnwindSafe(|| f(&mut net, ctx)));
    ctx.engine = ProcEngine::Ranks(Some(net));
    r.unwrap_or_else(|panic| resume_unwind(panic))
}
