//! The high-performance multiply: one superstep, no buffering of `x`.
//!
//! Superstep of a multiply, process `s`:
//! 1. fan-out: `direct_get` of each run of needed `x` entries straight from its owner's
//!    registered `x` into the private local buffer (the owners' `x` were written before the
//!    last sync, so they are stable: checked by the plan's guard, see `guard.rs`);
//! 2. local multiply;
//! 3. fan-in: one `hpsend` per owner of partial sums, straight from the send buffer (its first
//!    word names the sender, so no tag is needed and the caller's tag size is left alone);
//! 4. sync; then `hpmove` every partial-sum message and add it into `y` in place.
//!
//! Cost: `max_s 2 nz(s) + (h_fanout + h_fanin) g + l`, one superstep. Compared with
//! [`Spmv`](super::Spmv), the fan-out copies once (a `get` is queued and executed in the sync)
//! and the barrier of the fan-out is gone.

use super::{LocalSpmv, SpmvPlan, guard::HpGuard};
use mbsp::{Ctx, Reg};

/// One process's high-performance multiply, made once per run ([`HpSpmv::new`]).
///
/// Its `x` is read by other processes during their multiplies, so it may only be written in a
/// superstep in which nobody multiplies: write it ([`x_mut`](Self::x_mut)), then sync (or call
/// anything that syncs, e.g. an all-reduce), then multiply. A write and a multiply in the same
/// superstep are caught on one side or the other and end the run with an error that names
/// both processes, never a silent race.
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, spmv::{HpSpmv, SpmvPlan}, partition::{partition, Options}};
/// // y = A x with A = [[2, 1], [0, 3]], x = (1, 1), multiplied 10 times.
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (0, 1, 1.0), (1, 1, 3.0)]).unwrap();
/// let plan = SpmvPlan::new(&a, &partition(&a, 2, &Options::default()).unwrap().dist).unwrap();
/// let parts = mbsp::run(2, |ctx| {
///     let mut spmv = HpSpmv::new(ctx, &plan)?;
///     spmv.x_mut(ctx)?.fill(1.0);
///     ctx.sync()?; // x is published
///     let mut y = vec![0.0; spmv.local().y_owned.len()];
///     for _ in 0..10 {
///         spmv.multiply(ctx, &mut y)?; // one superstep each
///     }
///     Ok(y)
/// }).unwrap();
/// assert_eq!(plan.collect_y(&parts).unwrap(), vec![3.0, 3.0]);
/// ```
pub struct HpSpmv<'p> {
    local: &'p LocalSpmv,
    guard: &'p HpGuard,
    /// The local `x` buffer: this process's `x` (read by others in place), then the fetched
    /// entries.
    x: Reg<f64>,
    send: Vec<f64>,
    slot_of: Vec<u32>,
    tag: Vec<u8>,
}

impl<'p> HpSpmv<'p> {
    /// Registers this process's `x` (one superstep). Every process of the run calls it with
    /// the same plan; a plan serves one run at a time (a clone of it serves another).
    pub fn new(ctx: &mut Ctx, plan: &'p SpmvPlan) -> mbsp::Result<Self> {
        let pid = ctx.pid();
        plan.check_run(ctx, "spmv hp")?;
        let local = &plan.procs[pid];
        if !plan.guard.claim(pid) {
            return Err(ctx.misuse_error(
                "spmv hp",
                format!(
                    "part {pid} of this plan is in use by another HpSpmv (one per plan and \
                     process at a time; clone the plan for concurrent runs)"
                ),
            ));
        }
        let x = match ctx.push_reg(vec![0.0; local.x_buffer_len()]) {
            Ok(x) => x,
            Err(e) => {
                plan.guard.release(pid);
                return Err(e);
            }
        };
        // From here on the claim is released on drop.
        let me = HpSpmv {
            local,
            guard: &plan.guard,
            x,
            send: local.send_buffer(),
            slot_of: local.slot_of(plan.p()),
            tag: Vec::new(),
        };
        ctx.sync()?;
        Ok(me)
    }

    /// This process's part of the plan.
    pub fn local(&self) -> &'p LocalSpmv {
        self.local
    }

    /// This process's owned entries of `x` (in the order of `x_owned`), to write. A sync must
    /// follow before any process multiplies; an error if a process that reads this `x` is
    /// multiplying in this superstep.
    pub fn x_mut<'a>(&'a mut self, ctx: &'a Ctx) -> mbsp::Result<&'a mut [f64]> {
        let l = self.local;
        if let Err(t) = self.guard.begin_write(l.pid, ctx.superstep(), &l.readers) {
            return Err(ctx.misuse_error(
                "spmv hp x_mut",
                format!(
                    "process {t} reads the x of process {} in superstep {} (it is multiplying); \
                     write x before the sync that precedes the multiply",
                    l.pid,
                    ctx.superstep()
                ),
            ));
        }
        let own = l.x_owned.len();
        Ok(&mut ctx.local_mut(&mut self.x)?[..own])
    }

    /// This process's owned entries of `x` (in the order of `x_owned`), to read: what the last
    /// multiply used, unchanged by it. Reading needs no sync (others only read it too).
    ///
    /// ```
    /// # use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::{HpSpmv, SpmvPlan}};
    /// # let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (1, 1, 3.0)]).unwrap();
    /// # let d = Distribution { p: 2, nz_part: vec![0, 1], x_owner: vec![0, 1], y_owner: vec![0, 1] };
    /// # let plan = SpmvPlan::new(&a, &d).unwrap();
    /// mbsp::run(2, |ctx| {
    ///     let mut spmv = HpSpmv::new(ctx, &plan)?;
    ///     spmv.x_mut(ctx)?.fill(1.5);
    ///     ctx.sync()?;
    ///     let mut y = vec![0.0; spmv.local().y_owned.len()];
    ///     spmv.multiply(ctx, &mut y)?;
    ///     assert_eq!(spmv.x(ctx)?, &[1.5]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn x<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [f64]> {
        let own = self.local.x_owned.len();
        Ok(&ctx.local(&self.x)?[..own])
    }

    /// `y = A x` in one superstep: `y` receives this process's owned entries (in the order of
    /// `y_owned`). Every process must call it; it needs the message queue for itself in its
    /// superstep (messages sent by the caller in the same superstep make it fail), and leaves
    /// the queue empty of its own messages.
    pub fn multiply(&mut self, ctx: &mut Ctx, y: &mut [f64]) -> mbsp::Result<()> {
        const OP: &str = "spmv hp multiply";
        let l = self.local;
        l.check_y(ctx, OP, y)?;
        if let Err(s) = self.guard.begin_read(l.pid, ctx.superstep(), &l.sources) {
            return Err(ctx.misuse_error(
                OP,
                format!(
                    "process {s} wrote its x in superstep {} and process {} reads it in the \
                     same superstep; a sync must separate writing x from the multiply",
                    ctx.superstep(),
                    l.pid
                ),
            ));
        }
        let own = l.x_owned.len();
        // Only the tail is written here: the head is this process's `x`, which others may be
        // reading right now.
        let id = self.x.id();
        let fetched = &mut ctx.local_mut(&mut self.x)?[own..];
        for f in &l.fetches {
            let (dst, len) = (f.dst as usize - own, f.len as usize);
            // SAFETY: the source is `f.from`'s `x`, which no communication writes (the
            // registration is private to its HpSpmv and only read) and which its owner does not
            // write in this superstep: the guard's stamps, checked above, make an owner that
            // tries fail before it gets the slice (see guard.rs).
            unsafe {
                ctx.direct_get(
                    f.from as usize,
                    id,
                    f.src as usize,
                    &mut fetched[dst..dst + len],
                )?
            };
        }
        l.multiply_local(ctx.local(&self.x)?, y, &mut self.send);
        let tagsize = ctx.tagsize();
        if self.tag.len() != tagsize {
            self.tag = vec![0; tagsize];
        }
        for o in &l.outs {
            let (start, len) = (o.start as usize - 1, o.len as usize + 1);
            let payload: &[u8] = bytemuck::cast_slice(&self.send[start..start + len]);
            // SAFETY: `self.send` is neither changed nor freed before the sync below: it is
            // only written by `multiply_local`, and `self` stays borrowed until we return.
            unsafe { ctx.hpsend(o.to as usize, &self.tag, payload)? };
        }
        ctx.sync()?;
        for _ in 0..l.recv_from.len() {
            let Some(m) = ctx.hpmove()? else {
                return Err(ctx.misuse_error(
                    OP,
                    format!(
                        "process {} expected {} partial-sum messages and the queue ran dry",
                        l.pid,
                        l.recv_from.len()
                    ),
                ));
            };
            if !m.payload.len().is_multiple_of(8)
                || !(m.payload.as_ptr() as usize).is_multiple_of(8)
            {
                return Err(ctx.misuse_error(OP, "a foreign message in the queue"));
            }
            l.add_message(&self.slot_of, m.payload_as::<f64>(), y)
                .map_err(|e| {
                    ctx.misuse_error(
                        OP,
                        format!("{e} (messages sent in the multiply's superstep by the caller?)"),
                    )
                })?;
        }
        Ok(())
    }
}

impl Drop for HpSpmv<'_> {
    fn drop(&mut self) {
        self.guard.release(self.local.pid);
    }
}
