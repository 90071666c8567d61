//! The end of a superstep, as every engine has it: the public `sync` and `end`, which hand the
//! superstep to the run's engine (`engine/`), and what the engines share: the registration and
//! tag-size agreement (every process checks every process's requests against pid 0's and
//! reaches the same verdict), and the bookkeeping that closes a superstep.

use crate::barrier::{FLAG_REGS, FLAG_TAGS};
use crate::ctx::{Coll, Ctx};
use crate::engine::threads::Threads;
use crate::engine::{Engine, Link};
use crate::error::{Error, ErrorKind, Result};
use crate::registry::{RegOp, WILD, describe};
use crate::shim::Ordering;

impl Ctx {
    /// End the superstep: wait for all processes, then carry out all communication requested
    /// in it. Afterwards, puts and gets have landed, messages sent to this process are in its
    /// queue, and registration and tag-size changes are in effect.
    ///
    /// A superstep in which no process communicated or changed registrations costs one barrier.
    ///
    /// If the run has failed (here or in any process), `sync` returns the error, and so does
    /// every later primitive of this process; a failed sync returns only once every process of
    /// the run has stopped touching shared memory (has seen the failure, or ended).
    ///
    /// ```
    /// let steps = mbsp::run(2, |ctx| {
    ///     for _ in 0..10 {
    ///         ctx.sync()?;
    ///     }
    ///     Ok(ctx.superstep())
    /// }).unwrap();
    /// assert_eq!(steps, vec![10, 10]);
    /// ```
    pub fn sync(&mut self) -> Result<()> {
        if self.end_outcome.is_some() {
            return Err(self.after_end("sync"));
        }
        if self.prof.is_some() {
            return self.profiled_sync(false);
        }
        self.engine_sync(false)
    }

    /// The engine's sync: the thread engine's by a static call.
    #[inline(always)]
    fn engine_sync(&mut self, ending: bool) -> Result<()> {
        match self.link {
            Link::Threads => Threads.sync(self, ending),
            Link::Remote(_) => self
                .with_remote(|e, ctx| e.sync(ctx, ending))
                .expect("a remote engine"),
        }
    }

    /// [`engine_sync`](Self::engine_sync) timed for the profile.
    #[cold]
    #[inline(never)]
    fn profiled_sync(&mut self, ending: bool) -> Result<()> {
        if let Some(r) = &self.prof {
            r.borrow_mut().sync_begins();
        }
        let result = self.engine_sync(ending);
        if let Some(r) = &self.prof {
            r.borrow_mut().sync_ends();
        }
        result
    }

    /// End this process's part of the run now: the final synchronisation, which otherwise
    /// happens when the SPMD function returns. Like a sync, it completes the last superstep
    /// (its puts, gets and messages are delivered), and every process must reach it (a process
    /// that syncs instead is a misuse, as when an SPMD function returns early). When it
    /// returns, every process of the run has reached its end and no process touches this
    /// process's memory any more: what it registered may go.
    ///
    /// Afterwards every primitive is a misuse except the local views of registered memory
    /// ([`Ctx::local`], [`Ctx::local_mut`]); calling `end` again returns its first outcome, and
    /// returning from the SPMD function does not synchronise again. Rust code usually just
    /// returns; this is for callers whose processes leave by other means (the C ABI's
    /// `bsp_end`, which leaves the SPMD function by `longjmp` after ending here, so that
    /// memory the function registered on its stack outlives every access to it).
    ///
    /// ```
    /// let last = mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as u64 + 1; 4])?;
    ///     let y = ctx.push_reg(vec![0u64; 4])?;
    ///     ctx.sync()?;
    ///     ctx.get(1 - ctx.pid(), &x, .., &y, 0)?;
    ///     ctx.end()?; // the get lands here; everyone has ended
    ///     Ok(ctx.local(&y)?[3])
    /// }).unwrap();
    /// assert_eq!(last, vec![2, 1]);
    /// ```
    pub fn end(&mut self) -> Result<()> {
        if let Some(outcome) = &self.end_outcome {
            return outcome.clone();
        }
        let outcome = self.final_sync();
        self.end_outcome = Some(outcome.clone());
        outcome
    }

    /// The final sync (see [`Ctx::end`]).
    fn final_sync(&mut self) -> Result<()> {
        if self.prof.is_some() {
            return self.profiled_sync(true);
        }
        self.engine_sync(true)
    }

    pub(crate) fn finish_sync(&mut self) {
        let st = self.st.get_mut();
        if !st.graveyard.is_empty() {
            st.graveyard.clear();
        }
        self.flags.set(0);
        // A declared sync that took the barrier (`RunShared::pair_barrier`) was a full one.
        self.prev_lazy = self.lazy.get().is_some() && !self.run.pair_barrier;
        self.lazy.set(None);
        self.immediate.set(false);
        self.step += 1;
        // The destinations of two supersteps ago: a lazy sync has used them (its
        // acknowledgements), and this superstep writes its own.
        self.written.get_mut()[(self.step & 1) as usize].clear();
        self.me().done.store(self.step, Ordering::Release);
    }

    pub(crate) fn flush_hpsends(&mut self) {
        if self.st.get_mut().hpsends.is_empty() {
            return;
        }
        let mut hps = std::mem::take(&mut self.st.get_mut().hpsends);
        for h in hps.drain(..) {
            // SAFETY: the hpsend caller promised the payload stays valid until this sync; its
            // record was reserved in this superstep's outbox for `h.pid` when it was called.
            self.with_outbox(h.pid, |ob| unsafe { ob.fill(h.at, h.payload, h.len) });
        }
        self.st.get_mut().hpsends = hps;
    }

    pub(crate) fn own_coll(&mut self) -> Coll {
        let st = self.st.get_mut();
        Coll {
            stamp: self.step + 1,
            regs: st.reg_ops.iter().map(RegOp::signature).collect(),
            wild: st
                .reg_ops
                .iter()
                .filter_map(|o| match o {
                    RegOp::PopNull { cands } => Some(cands.clone()),
                    _ => None,
                })
                .collect(),
            tagsize: st.new_tagsize,
        }
    }

    /// Check that every process's registration and tag-size requests (`colls`, by pid) agree,
    /// then apply this process's registration changes to its own table; returns the changes
    /// applied, in order: (push?, slot, generation). Every process checks all of them, so all
    /// reach the same verdict, and none communicates after a mismatch.
    pub(crate) fn collective_with(
        &mut self,
        colls: &[Coll],
        g: u32,
    ) -> Result<Vec<(bool, u32, u32)>> {
        let resolved = match self.agree(colls, g) {
            Ok(r) => r,
            Err((pid, msg)) => {
                let mut path = self.run.parent_path.clone();
                path.push(pid);
                return Err(Error::new(
                    ErrorKind::Misuse,
                    "sync",
                    path,
                    Some(self.step),
                    msg,
                ));
            }
        };
        self.named_cache.set(None);
        let st = self.st.get_mut();
        let (ops, graveyard, slots) = (&mut st.reg_ops, &mut st.graveyard, &mut st.slots);
        let mut resolved = resolved.into_iter();
        let mut applied = Vec::new();
        // SAFETY: our own table, between barrier 1 and barrier 2 (REGS forces barrier 2).
        unsafe {
            self.run.proc(self.pid).table_mut(|table| {
                for op in ops.drain(..) {
                    let op = match op {
                        RegOp::PopNull { .. } => RegOp::Pop {
                            slot: resolved.next().expect("a resolved NULL pop"),
                        },
                        op => op,
                    };
                    match op {
                        RegOp::Pop { slot } => {
                            slots.release(slot);
                            applied.push((false, slot, 0));
                        }
                        RegOp::Push {
                            slot, generation, ..
                        } => applied.push((true, slot, generation)),
                        RegOp::PopNull { .. } => {}
                    }
                    table.apply(op, graveyard);
                }
            })
        };
        if let Some(t) = st.new_tagsize.take() {
            self.tagsize.set(t);
        }
        Ok(applied)
    }

    /// Whether the requests of all processes agree: the registration calls of every process
    /// equal pid 0's (pushes of the same element type in the same slots, pops of the same
    /// slots; a NULL pop stands for the slot the others pop, which must be one of its null
    /// registrations) and so do the tag sizes. Returns the slots this process's NULL pops
    /// resolve to, or the first process that differs and the explanation.
    fn agree(&self, colls: &[Coll], g: u32) -> std::result::Result<Vec<u32>, (usize, String)> {
        let (step, p) = (self.step, self.run.p);
        if g & FLAG_TAGS != 0 {
            if let Some(pid) = (1..p).find(|&pid| colls[pid].tagsize != colls[0].tagsize) {
                let show = |t: Option<usize>| match t {
                    Some(t) => format!("asked for {t} bytes"),
                    None => "did not call set_tagsize".to_string(),
                };
                return Err((
                    pid,
                    format!(
                        "set_tagsize differs between processes in superstep {step}: pid 0 {}, \
                         pid {pid} {} (set_tagsize is collective)",
                        show(colls[0].tagsize),
                        show(colls[pid].tagsize)
                    ),
                ));
            }
        }
        if g & FLAG_REGS == 0 {
            return Ok(Vec::new());
        }
        let differ = |pid: usize| {
            (
                pid,
                format!(
                    "push_reg/pop_reg calls differ between processes in superstep {step}: pid 0 \
                     made {}, pid {pid} made {} (all processes must register and deregister in \
                     the same order, with the same element types)",
                    describe(&colls[0].regs),
                    describe(&colls[pid].regs)
                ),
            )
        };
        let root = &colls[0].regs;
        for (pid, c) in colls.iter().enumerate().skip(1) {
            let mine = &c.regs;
            let same_shape = mine.len() == root.len()
                && mine
                    .iter()
                    .zip(root)
                    .all(|(a, b)| a.push == b.push && (!a.push || a == b));
            if !same_shape {
                return Err(differ(pid));
            }
        }
        // Pops: every process pops the same slot; NULL pops take the others' slot.
        let mut resolved: Vec<Vec<u32>> = vec![Vec::new(); p];
        let mut popped: Vec<Vec<u32>> = vec![Vec::new(); p];
        let mut next_wild = vec![0usize; p];
        for i in (0..root.len()).filter(|&i| !root[i].push) {
            let named = (0..p).find_map(|pid| Some(colls[pid].regs[i].slot).filter(|&s| s != WILD));
            let agreed = match named {
                Some(s) => s,
                None => {
                    // Everyone pops NULL: the newest null registration all of them have and
                    // none of them pops already in this superstep (an earlier NULL pop of the
                    // same superstep had the same candidates).
                    let cands = |pid: usize| &colls[pid].wild[next_wild[pid]];
                    let free = |q: usize, s: &u32| cands(q).contains(s) && !popped[q].contains(s);
                    match cands(0)
                        .iter()
                        .copied()
                        .find(|s| (0..p).all(|q| free(q, s)))
                    {
                        Some(s) => s,
                        None => {
                            return Err((
                                0,
                                format!(
                                    "every process popped NULL in superstep {step}, but they \
                                     have no null registration in common"
                                ),
                            ));
                        }
                    }
                }
            };
            for pid in 0..p {
                if colls[pid].regs[i].slot == WILD {
                    let cands = &colls[pid].wild[next_wild[pid]];
                    next_wild[pid] += 1;
                    if !cands.contains(&agreed) {
                        return Err((
                            pid,
                            format!(
                                "pop_reg of NULL in superstep {step}: the other processes pop slot \
                                 {agreed}, where pid {pid} has no null registration (a NULL pop \
                                 stands for the registration the others pop)"
                            ),
                        ));
                    }
                    resolved[pid].push(agreed);
                } else if colls[pid].regs[i].slot != agreed {
                    return Err(differ(if pid == 0 { 1 } else { pid }));
                }
                if popped[pid].contains(&agreed) {
                    return Err((
                        pid,
                        format!(
                            "pid {pid} pops the registration in slot {agreed} twice in superstep \
                             {step}"
                        ),
                    ));
                }
                popped[pid].push(agreed);
            }
        }
        Ok(std::mem::take(&mut resolved[self.pid]))
    }

    /// After this process has seen the run fail: wait until no process of the run touches its
    /// memory any more (the engine's [`Engine::stop`]).
    #[cold]
    pub(crate) fn wait_all_stopped(&mut self) {
        match self.link {
            Link::Threads => {
                Threads.stop(self);
            }
            Link::Remote(_) => {
                self.with_remote(|e, ctx| e.stop(ctx));
            }
        }
    }

    /// Call `f` with this process's engine other than the thread engine, taken out of the
    /// context for the call (so that it gets the context mutably); `None` on the thread engine.
    pub(crate) fn with_remote<R>(
        &mut self,
        f: impl FnOnce(&mut dyn Engine<Ctx>, &mut Ctx) -> R,
    ) -> Option<R> {
        let Link::Remote(slot) = &mut self.link else {
            return None;
        };
        let mut engine = slot.take().expect("the remote engine is not in use");
        let r = f(&mut *engine, self);
        if let Link::Remote(slot) = &mut self.link {
            *slot = Some(engine);
        }
        Some(r)
    }
}
