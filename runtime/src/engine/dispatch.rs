//! The methods of [`Ctx`] that reach the run's engine: a static call on each engine, by the
//! kind of the engine part the context holds (module documentation of `engine`).

use super::Engine;
#[cfg(feature = "mpi")]
use super::ranks::engine::Ranks;
use super::state::Kind;
use super::threads::Threads;
use crate::ctx::Ctx;
use crate::error::{Error, Result};
use bytemuck::Pod;

/// Call `Engine::$f` of the engine of `$ctx`'s run (a static call on each engine).
macro_rules! dispatch {
    ($ctx:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $ctx.engine.kind() {
            Kind::Threads => <Threads as Engine>::$f($($arg),*),
            #[cfg(feature = "mpi")]
            Kind::Ranks => <Ranks as Engine>::$f($($arg),*),
        }
    };
}

impl Ctx {
    /// End the superstep through the run's engine ([`Engine::sync`]).
    #[inline(always)]
    pub(crate) fn engine_sync(&mut self, ending: bool) -> Result<()> {
        dispatch!(self, sync(self, ending))
    }

    /// After this process has seen the run fail: wait until no process of the run touches its
    /// memory any more ([`Engine::stop`]).
    #[cold]
    pub(crate) fn engine_stop(&mut self) -> Option<Error> {
        dispatch!(self, stop(self))
    }

    /// [`Engine::put`].
    #[inline(always)]
    pub(crate) fn engine_put(&self, pid: usize, dst: *mut u8, src: &[u8]) -> Option<Result<()>> {
        dispatch!(self, put(self, pid, dst, src))
    }

    /// [`Engine::send`].
    #[inline(always)]
    pub(crate) fn engine_send(&self, pid: usize, tag: &[u8], payload: &[u8]) -> bool {
        dispatch!(self, send(self, pid, tag, payload))
    }

    /// [`Engine::to_outbox`].
    #[inline]
    pub(crate) fn engine_to_outbox(&self, pid: usize) {
        dispatch!(self, to_outbox(self, pid))
    }

    /// [`Engine::send_owned`].
    #[inline]
    pub(crate) fn engine_send_owned<T: Pod>(
        &self,
        pid: usize,
        tag: &[u8],
        payload: Vec<T>,
    ) -> Option<()> {
        dispatch!(self, send_owned(self, pid, tag, payload))
    }

    /// [`Engine::hpput`].
    ///
    /// # Safety
    /// As [`Engine::hpput`].
    #[inline]
    pub(crate) unsafe fn engine_hpput(
        &self,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { dispatch!(self, hpput(self, pid, src, dst, len)) }
    }

    /// [`Engine::get_now`].
    ///
    /// # Safety
    /// As [`Engine::get_now`].
    #[inline]
    pub(crate) unsafe fn engine_get_now(
        &self,
        op: &'static str,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { dispatch!(self, get_now(self, op, pid, src, dst, len)) }
    }

    /// [`Engine::all_gather`].
    pub(crate) fn engine_all_gather(&mut self, mine: &[u64]) -> Option<Vec<Vec<u64>>> {
        dispatch!(self, all_gather(self, mine))
    }

    /// [`Engine::leave`].
    pub(crate) fn engine_leave(&mut self, failure: Option<&Error>) -> Option<Error> {
        dispatch!(self, leave(self, failure))
    }
}
