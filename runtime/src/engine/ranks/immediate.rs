//! The immediate primitives over ranks: `hpput` as an `MPI_Put` (completed at the next sync),
//! `hpget` and `direct_get` as an `MPI_Get` completed at once.

use super::net::Net;
use super::protocol::BIG_PUT;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::flags::FLAG_COMM;
use mpi::ffi;

impl Ctx {
    /// `hpput` to another rank: an `MPI_Put` into its window, completed at the next sync.
    ///
    /// # Safety
    /// `src` valid for `len` bytes until the next sync; `dst` inside `pid`'s registered area
    /// (checked against the mirror).
    pub(super) unsafe fn rank_hpput(
        &self,
        net: &Net,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        if len >= BIG_PUT {
            // As a large buffered put (copied now, so that whatever lands in the source later
            // in this superstep or its sync cannot reach the destination): MPICH's dynamic
            // windows move large blocks several times slower (`mbsp-bench mpi`).
            // SAFETY: the caller keeps `src` valid for `len` bytes during this call.
            let data = unsafe { std::slice::from_raw_parts(src, len) };
            if net
                .big_put(pid, dst, data, self.step, self.prev_lazy)
                .is_none()
            {
                return Err(self.no_room_for_put(pid, len));
            }
            self.flag(FLAG_COMM);
            return Ok(());
        }
        self.rank_settled("hpput", net, pid)?;
        // SAFETY: forwarded to the caller; the target area is attached in `pid`'s window.
        unsafe { net.one_sided(true, pid, src as *mut u8, dst as usize, len) };
        net.hp_pending.set(true);
        Ok(())
    }

    /// `hpget`/`direct_get` from another rank: an `MPI_Get` from its window, completed now.
    ///
    /// # Safety
    /// `dst` valid for `len` bytes; `src` inside `pid`'s registered area (checked against the
    /// mirror).
    pub(super) unsafe fn rank_get_now(
        &self,
        net: &Net,
        op: &'static str,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        self.rank_settled(op, net, pid)?;
        // SAFETY: forwarded to the caller; the source area is attached in `pid`'s window.
        unsafe { net.one_sided(false, pid, dst, src as usize, len) };
        // SAFETY: a valid window, locked for all targets.
        unsafe { ffi::MPI_Win_flush(pid as i32, net.win) };
        Ok(())
    }

    /// Wait until rank `pid` has completed as many syncs as we have (as the thread runtime's
    /// `Ctx::wait_settled`): the stopped error if the run fails here or there meanwhile.
    pub(super) fn rank_settled(&self, op: &'static str, net: &Net, pid: usize) -> Result<()> {
        net.wait_settled(pid, self.step, self.run.policy, || {
            self.run.tree.is_aborted()
        })
        .map_err(|_| self.stopped(op))
    }
}
