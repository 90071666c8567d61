//! The high-performance multiply: `hpsend` for the fan-in, and a fan-out that either puts `x`
//! from its owners (two lazy supersteps) or reads it with `direct_get` (one full superstep, the
//! default: on a machine with a core per process it is the faster of the two, see
//! docs/benchmarks.md).
//!
//! [`Fanout::Puts`], process `s`:
//! 1. fan-out: for each process that reads its `x`, one put of the entries it reads (packed
//!    when they are not one run), straight into the reader's local `x` buffer; then a lazy sync
//!    declaring one put per owner it reads from (the plan knows them);
//! 2. local multiply;
//! 3. fan-in: one `hpsend` per owner of partial sums, straight from the send buffer (its first
//!    word names the sender, so no tag is needed and the caller's tag size is left alone); then
//!    a lazy sync declaring one message per process that sums rows it owns;
//! 4. `hpmove` every partial-sum message and add it into `y` in place.
//!
//! [`Fanout::DirectGet`], process `s`:
//! 1. fan-out: `direct_get` of each run of needed `x` entries straight from its owner's
//!    registered `x` into the private local buffer (the owners' `x` were written before the
//!    last sync, so they are stable: checked by the plan's guard, see `guard.rs`);
//! 2. and 3. as above, then a full sync (an immediate primitive rules out a lazy one: its
//!    owner must not leave the superstep while it is read);
//! 4. as above.
//!
//! Cost: `max_s 2 nz(s) + (h_fanout + h_fanin) g + 2 l_lazy` with puts, where a lazy sync's
//! `l_lazy` is the arrival of the process's own records (a process waits for the processes it
//! reads from, then for those that send it partial sums, never for the others);
//! `max_s 2 nz(s) + h_fanout g_direct + q_fanout (g_direct_msg - g_direct) + h_fanin g + l`
//! with direct gets (`q` the gets, one per run of `x` entries), one superstep whose
//! barrier waits for every process. Compared with [`Spmv`](super::Spmv), neither queues a
//! `get` (executed in a sync) nor has a receive buffer: partial sums are added straight from
//! the messages.

use super::{Fetch, LocalSpmv, SpmvPlan, guard::HpGuard};
use mbsp::{Ctx, Reg};

/// How [`HpSpmv`] brings the `x` entries a process reads from their owners.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fanout {
    /// Every owner puts the entries each reader needs (one put per owner and reader), and
    /// every process declares the puts it receives: two lazy supersteps per multiply, in which
    /// a process waits only for the processes it exchanges data with. `x` may be written right
    /// before the multiply.
    Puts,
    /// Every reader copies the entries it needs straight out of their owners' `x` with
    /// `direct_get`: one superstep per multiply ending with a full sync, and `x` must have been
    /// written before a sync (checked: see [`HpSpmv::x_mut`]). The default.
    #[default]
    DirectGet,
}

/// One process's high-performance multiply, made once per run ([`HpSpmv::new`]).
///
/// With [`Fanout::DirectGet`] (the default of [`new`](Self::new)) its `x` is read by other processes during their multiplies, so it
/// may only be written in a superstep in which nobody multiplies: write it
/// ([`x_mut`](Self::x_mut)), then sync (or call anything that syncs, e.g. an all-reduce), then
/// multiply. A write and a multiply in the same superstep are caught on one side or the other
/// and end the run with an error that names both processes, never a silent race. With
/// [`Fanout::Puts`] the owners put `x` at the start of the
/// multiply, so `x` may be written at any time outside a multiply; the example's sync is then
/// needed by nothing.
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
    fanout: Fanout,
    /// [`Fanout::Puts`]: the puts of this process's `x`, one per reader.
    x_outs: Vec<XOut>,
    /// The `(start, len)` runs of owned `x` each put sends, `x_outs[k].runs` of them.
    x_runs: Vec<(u32, u32)>,
    /// Packed entries of the puts whose entries are not one run.
    pack: Vec<f64>,
    /// [`Fanout::Puts`]: the puts this process receives per multiply (one per owner it reads).
    x_ins: usize,
}

/// One put of the [`Fanout::Puts`] fan-out: `runs` runs of owned `x` (from `first_run` on in
/// `x_runs`), into process `to`'s local `x` buffer from `dst` on.
struct XOut {
    to: u32,
    dst: u32,
    first_run: u32,
    runs: u32,
}

/// The puts of the [`Fanout::Puts`] fan-out into the process whose fetches are `fetches`: one
/// per maximal group of consecutive fetches from one owner into consecutive positions (the plan
/// puts each owner's entries together, so in practice one per owner). Calls
/// `each(owner, fetches of the group)`; the number of calls is what the reader declares.
fn put_groups(fetches: &[Fetch], mut each: impl FnMut(u32, &[Fetch])) {
    let mut start = 0;
    for k in 1..=fetches.len() {
        let ends = k == fetches.len() || {
            let (a, b) = (&fetches[k - 1], &fetches[k]);
            a.from != b.from || a.dst + a.len != b.dst
        };
        if ends {
            each(fetches[start].from, &fetches[start..k]);
            start = k;
        }
    }
}

impl<'p> HpSpmv<'p> {
    /// Registers this process's `x` (one superstep), for the [`Fanout::Puts`] fan-out. Every
    /// process of the run calls it with the same plan; a plan serves one run at a time (a
    /// clone of it serves another).
    pub fn new(ctx: &mut Ctx, plan: &'p SpmvPlan) -> mbsp::Result<Self> {
        Self::with_fanout(ctx, plan, Fanout::DirectGet)
    }

    /// [`new`](Self::new) with the fan-out chosen; every process of the run must choose the
    /// same (else the counts of the lazy syncs do not match, an error of the run).
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::{Fanout, HpSpmv, SpmvPlan}};
    /// // A = [[1, 2], [3, 4]], rows and columns split over 2 processes: each reads the other's x.
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (0, 1, 2.0), (1, 0, 3.0), (1, 1, 4.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![0, 0, 1, 1], x_owner: vec![0, 1], y_owner: vec![0, 1] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// for fanout in [Fanout::Puts, Fanout::DirectGet] {
    ///     let parts = mbsp::run(2, |ctx| {
    ///         let mut spmv = HpSpmv::with_fanout(ctx, &plan, fanout)?;
    ///         spmv.x_mut(ctx)?.fill(1.0 + ctx.pid() as f64); // x = (1, 2)
    ///         ctx.sync()?; // needed by DirectGet only
    ///         let mut y = vec![0.0; spmv.local().y_owned.len()];
    ///         spmv.multiply(ctx, &mut y)?;
    ///         Ok(y)
    ///     }).unwrap();
    ///     assert_eq!(plan.collect_y(&parts).unwrap(), vec![5.0, 11.0]);
    /// }
    /// ```
    pub fn with_fanout(ctx: &mut Ctx, plan: &'p SpmvPlan, fanout: Fanout) -> mbsp::Result<Self> {
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
        let mut me = HpSpmv {
            local,
            guard: &plan.guard,
            x,
            send: local.send_buffer(),
            slot_of: local.slot_of(plan.p()),
            tag: Vec::new(),
            fanout,
            x_outs: Vec::new(),
            x_runs: Vec::new(),
            pack: Vec::new(),
            x_ins: 0,
        };
        if fanout == Fanout::Puts {
            me.plan_puts(plan);
        }
        ctx.sync()?;
        Ok(me)
    }

    /// The puts of this process's `x` to its readers (from their fetches, in reader order),
    /// and the count of puts it receives.
    fn plan_puts(&mut self, plan: &SpmvPlan) {
        let local = self.local;
        let me = local.pid as u32;
        let mut packed = 0;
        for &q in &local.readers {
            put_groups(&plan.procs[q as usize].fetches, |from, group| {
                if from != me {
                    return;
                }
                let len: u32 = group.iter().map(|f| f.len).sum();
                self.x_outs.push(XOut {
                    to: q,
                    dst: group[0].dst,
                    first_run: self.x_runs.len() as u32,
                    runs: group.len() as u32,
                });
                self.x_runs.extend(group.iter().map(|f| (f.src, f.len)));
                if group.len() > 1 {
                    packed = packed.max(len as usize);
                }
            });
        }
        self.pack = vec![0.0; packed];
        put_groups(&local.fetches, |_, _| self.x_ins += 1);
    }

    /// This process's part of the plan.
    pub fn local(&self) -> &'p LocalSpmv {
        self.local
    }

    /// The fan-out this multiply uses.
    pub fn fanout(&self) -> Fanout {
        self.fanout
    }

    /// This process's owned entries of `x` (in the order of `x_owned`), to write. With
    /// [`Fanout::DirectGet`] a sync must follow before any process multiplies: an error if a
    /// process that reads this `x` is multiplying in this superstep. With [`Fanout::Puts`] the
    /// next multiply puts what was written.
    pub fn x_mut<'a>(&'a mut self, ctx: &'a Ctx) -> mbsp::Result<&'a mut [f64]> {
        let l = self.local;
        if self.fanout == Fanout::Puts {
            let own = l.x_owned.len();
            return Ok(&mut ctx.local_mut(&mut self.x)?[..own]);
        }
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

    /// Deregisters `x` (effective at the next sync) and gives the plan back for another
    /// multiply of this run; every process calls it (see [`Spmv::free`](super::Spmv::free)).
    pub fn free(self, ctx: &mut Ctx) -> mbsp::Result<()> {
        ctx.pop_reg(&self.x)
    }

    /// `y = A x` in two lazy supersteps ([`Fanout::Puts`]) or one full one
    /// ([`Fanout::DirectGet`]): `y` receives this process's owned entries (in the order of
    /// `y_owned`). Every process must call it; its supersteps carry nothing of the caller's
    /// (puts, messages or gets issued before the call make a count differ from the declared one
    /// with puts, and messages make the fan-in fail with direct gets), and it leaves the queue
    /// empty of its own messages.
    pub fn multiply(&mut self, ctx: &mut Ctx, y: &mut [f64]) -> mbsp::Result<()> {
        const OP: &str = "spmv hp multiply";
        let l = self.local;
        l.check_y(ctx, OP, y)?;
        if self.fanout == Fanout::Puts {
            self.put_x(ctx)?;
        } else {
            self.get_x(ctx)?;
        }
        l.multiply_local(ctx.local(&self.x)?, y, &mut self.send);
        // SAFETY: `self.send` is neither changed nor freed before the sync below: it is only
        // written by `multiply_local`, and `self` stays borrowed until we return.
        unsafe { l.send_partial_sums(ctx, &mut self.tag, &self.send)? };
        if self.fanout == Fanout::Puts {
            // One message from every process that sums rows this one owns.
            ctx.declare_incoming(l.recv_from.len())?;
        }
        ctx.sync()?;
        l.receive_partial_sums(ctx, "spmv hp multiply", &self.slot_of, |q, v| y[q] += v)
    }

    /// The [`Fanout::Puts`] fan-out: one put per reader, then a lazy sync that waits for the
    /// puts of the owners this process reads from.
    fn put_x(&mut self, ctx: &mut Ctx) -> mbsp::Result<()> {
        let x = ctx.local(&self.x)?;
        for o in &self.x_outs {
            let runs = &self.x_runs[o.first_run as usize..(o.first_run + o.runs) as usize];
            let src: &[f64] = if let [(start, len)] = *runs {
                &x[start as usize..(start + len) as usize]
            } else {
                let mut at = 0;
                for &(start, len) in runs {
                    let (start, len) = (start as usize, len as usize);
                    self.pack[at..at + len].copy_from_slice(&x[start..start + len]);
                    at += len;
                }
                &self.pack[..at]
            };
            ctx.put(o.to as usize, src, &self.x, o.dst as usize)?;
        }
        ctx.declare_incoming(self.x_ins)?;
        ctx.sync()
    }

    /// The [`Fanout::DirectGet`] fan-out, after checking that no owner writes its `x` in this
    /// superstep.
    fn get_x(&mut self, ctx: &mut Ctx) -> mbsp::Result<()> {
        const OP: &str = "spmv hp multiply";
        let l = self.local;
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
        Ok(())
    }
}

impl Drop for HpSpmv<'_> {
    fn drop(&mut self) {
        self.guard.release(self.local.pid);
    }
}
