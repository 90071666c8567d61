//! What the engines' syncs share (`engine/`): closing a superstep, the registration and
//! tag-size agreement (every process checks every process's requests against pid 0's and
//! reaches the same verdict), the hpsend payloads copied at the sync, the refusals of a lazy
//! superstep, and the message queue emptied when a sync starts. Below the engines, which call
//! it; the public `sync` and `end` (`sync.rs`) call the engines.

use crate::ctx::Ctx;
use crate::error::{Error, ErrorKind, Result};
use crate::flags::{FLAG_GETS, FLAG_REGS, FLAG_TAGS};
use crate::registry::{RegOp, WILD, describe};
use crate::requests::Coll;

impl Ctx {
    /// Close the superstep: its requests are done, its counters move on (`lazy`: the sync
    /// that closes it waited only for declared records, so the next one acknowledges them),
    /// and the others learn that this process has completed it (`ProcShared::done`).
    pub(crate) fn finish_sync(&mut self, lazy: bool) {
        let st = self.st.get_mut();
        if !st.graveyard.is_empty() {
            st.graveyard.clear();
        }
        self.flags.set(0);
        self.prev_lazy = lazy;
        self.lazy.set(None);
        self.immediate.set(false);
        self.step += 1;
        self.slot = self.run.slot(self.step);
        // The destinations of the superstep that used this slot last: a sync has used them (a
        // lazy one waited for their acknowledgements), and this superstep writes its own.
        self.written.get_mut()[self.slot].clear();
        self.me().done.publish(self.base, self.step);
    }

    /// Copy the payloads of this superstep's hpsends into the records reserved for them.
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

    /// Write this process's collective requests of the superstep into `c`, to publish for the
    /// others, reusing its vectors (the thread engine publishes them in place, allocating
    /// nothing in a loop of registering supersteps).
    pub(crate) fn fill_coll(&self, c: &mut Coll) {
        let st = self.st.borrow();
        c.stamp = self.step + 1;
        c.regs.clear();
        c.regs.extend(st.reg_ops.iter().map(RegOp::signature));
        c.wild.clear();
        c.wild.extend(st.reg_ops.iter().filter_map(|o| match o {
            RegOp::PopNull { cands } => Some(cands.clone()),
            _ => None,
        }));
        c.tagsize = st.new_tagsize;
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
        let mut applied = Vec::new();
        self.apply_requests(resolved, Some(&mut applied));
        Ok(applied)
    }

    /// Apply this process's registration changes to its own table (its NULL pops resolved to
    /// the slots of `resolved`, in order) and its tag-size change, once every process's
    /// requests agree; the changes applied, in order, go to `applied` if given.
    pub(crate) fn apply_requests(
        &mut self,
        resolved: Vec<u32>,
        mut applied: Option<&mut Vec<(bool, u32, u32)>>,
    ) {
        self.named_cache.set(None);
        let st = self.st.get_mut();
        let (ops, graveyard, slots) = (&mut st.reg_ops, &mut st.graveyard, &mut st.slots);
        let mut resolved = resolved.into_iter();
        let mut note = |change| {
            if let Some(a) = applied.as_deref_mut() {
                a.push(change);
            }
        };
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
                            note((false, slot, 0));
                        }
                        RegOp::Push {
                            slot, generation, ..
                        } => note((true, slot, generation)),
                        RegOp::PopNull { .. } => {}
                    }
                    table.apply(op, graveyard);
                }
            })
        };
        if let Some(t) = st.new_tagsize.take() {
            self.tagsize.set(t);
        }
    }

    /// Whether `c` holds requests that [`agree`](Self::agree) accepts with nothing to resolve
    /// when every process made exactly them (the same registration calls and the same tag
    /// size): no NULL pop, no slot popped twice. The thread engine's sync takes identical
    /// requests that pass this without running `agree` (which copies every process's), so a
    /// rule added to `agree` belongs here too.
    pub(crate) fn plain_requests(c: &Coll) -> bool {
        let pops = || c.regs.iter().filter(|r| !r.push).map(|r| r.slot);
        c.wild.is_empty()
            && pops()
                .enumerate()
                .all(|(i, s)| pops().take(i).all(|t| t != s))
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

    /// The misuse of a lazy sync of a superstep that also used a get, a registration change or
    /// a tag-size change (`flags`: this process's barrier flags), if it did; both engines
    /// refuse those in a lazy superstep.
    pub(crate) fn lazy_refusal(&self, flags: u32, m: u64) -> Option<crate::error::Error> {
        if flags & (FLAG_GETS | FLAG_REGS | FLAG_TAGS) == 0 {
            return None;
        }
        let what = [
            (FLAG_GETS, "get"),
            (FLAG_REGS, "push_reg/pop_reg"),
            (FLAG_TAGS, "set_tagsize"),
        ]
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, w)| *w)
        .collect::<Vec<_>>();
        (!what.is_empty()).then(|| {
            self.misuse(
                "sync",
                format!(
                    "superstep {} called declare_incoming({m}) and also called {}: a lazy superstep \
                     allows only puts and messages (the others need every process's requests \
                     at a full sync)",
                    self.step,
                    what.join(", ")
                ),
            )
        })
    }

    /// Empty the queue at the start of a sync: owned messages nobody moved out are freed.
    pub(crate) fn clear_queue(&mut self) {
        let st = self.st.get_mut();
        let q = &mut st.queue;
        if q.owned > 0 {
            // Owned messages never ride (`engine/threads/ride.rs`).
            for from in q.srcs.iter().filter(|s| s.rode.is_none()) {
                // SAFETY: as in `move_owned`: the sender does not touch this outbox before this
                // process passes barrier 1 of this sync; their borrows ended (`&mut self`).
                unsafe {
                    self.run.proc(from.pid as usize).outboxes(q.slot, |outs| {
                        if let Some(ob) = outs[self.pid].as_deref() {
                            ob.free_owned();
                        }
                    })
                };
            }
        }
        q.clear();
    }
}
