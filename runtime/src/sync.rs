//! The end of a superstep.
//!
//! ```text
//! sync, superstep k, parity q = k mod 2
//!   copy hpsend payloads into outboxes; publish registration/tag-size requests (coll[q])
//!   barrier 1 ........ combines flags: COMM, GETS, REGS, TAGS, and whether processes ended
//!   nothing anywhere? -> done (one barrier)
//!   REGS|TAGS: compare own requests with pid 0's; apply own registration changes
//!   GETS: read the sources of own gets into the get buffer
//!   GETS|REGS: barrier 2 (all reads done, all tables updated)
//!   COMM: for every sender that wrote to us: copy its puts into our memory, queue its messages
//!   write own gets' data; count this sync as done
//! ```
//! Every write lands in the writer's own memory, so no third barrier is needed: a process
//! leaving the sync early can only touch its own memory and its next-parity outboxes.

use crate::barrier::{FLAG_COMM, FLAG_GETS, FLAG_REGS, FLAG_TAGS};
use crate::ctx::{Coll, Ctx};
use crate::error::Result;
use crate::outbox::Outbox;
use crate::registry::{RegOp, describe};
use crate::shim::Ordering;

impl Ctx {
    /// End the superstep: wait for all processes, then carry out all communication requested
    /// in it. Afterwards, puts and gets have landed, messages sent to this process are in its
    /// queue, and registration and tag-size changes are in effect.
    ///
    /// A superstep in which no process communicated or changed registrations costs one barrier.
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
        self.live("sync")?;
        self.superstep_end(false)
    }

    /// The implicit final sync when the SPMD function returns.
    pub(crate) fn end(&mut self) -> Result<()> {
        self.live("end")?;
        self.superstep_end(true)
    }

    fn superstep_end(&mut self, ending: bool) -> Result<()> {
        let op = if ending { "end" } else { "sync" };
        let q = (self.step & 1) as usize;
        let flags = self.flags.get();
        if flags & FLAG_COMM != 0 {
            self.flush_hpsends();
        }
        if flags & (FLAG_REGS | FLAG_TAGS) != 0 {
            self.publish_collective(q);
        }
        if ending {
            self.me().ended.store(true, Ordering::Relaxed);
        }

        let arrived = self.run.barrier.wait(&mut self.member, flags, ending);
        let out = arrived.map_err(|_| self.stopped(op))?;
        if out.some_ended && !out.all_ended {
            return Err(self.end_mismatch(op));
        }
        let g = out.flags;
        {
            let st = self.st.get_mut();
            if !st.queue.srcs.is_empty() || st.queue.left != 0 {
                st.queue.srcs.clear();
                st.queue.left = 0;
                st.queue.left_bytes = 0;
            }
            st.queue.cur_src = 0;
            st.queue.cur_off = 0;
        }
        if g == 0 {
            self.finish_sync();
            return Ok(());
        }

        let sent_tagsize = self.st.get_mut().tagsize;
        if g & (FLAG_REGS | FLAG_TAGS) != 0 {
            self.collective(q, g)?;
        }
        if g & FLAG_GETS != 0 {
            let st = self.st.get_mut();
            for op in st.gets.iter_mut() {
                // SAFETY: the source is in bounds of a live registration (kept alive until the
                // owner's sync ends) and nobody writes registered memory before barrier 2.
                op.buf_off = unsafe { st.getbuf.push_raw(op.src, op.len) };
            }
        }
        if g & (FLAG_GETS | FLAG_REGS) != 0 {
            let arrived = self.run.barrier.wait(&mut self.member, 0, false);
            arrived.map_err(|_| self.stopped(op))?;
        }
        if g & FLAG_COMM != 0 {
            self.receive(q, sent_tagsize);
        }
        let st = self.st.get_mut();
        if !st.gets.is_empty() {
            let base = st.getbuf.base();
            for op in st.gets.drain(..) {
                // SAFETY: the destination is this process's own memory (kept alive by the op or
                // promised by the raw caller) and no reference to it lives across `&mut self`.
                unsafe { std::ptr::copy_nonoverlapping(base.add(op.buf_off), op.dst, op.len) };
            }
            st.getbuf.clear();
        }
        self.finish_sync();
        Ok(())
    }

    fn finish_sync(&mut self) {
        let st = self.st.get_mut();
        if !st.graveyard.is_empty() {
            st.graveyard.clear();
        }
        self.flags.set(0);
        self.step += 1;
        self.me().done.store(self.step, Ordering::Release);
    }

    fn flush_hpsends(&mut self) {
        let mut hps = std::mem::take(&mut self.st.get_mut().hpsends);
        if hps.is_empty() {
            return;
        }
        let tags = std::mem::take(&mut self.st.get_mut().hp_tags);
        for h in hps.drain(..) {
            let tag = tags.bytes(h.tag_off, h.tag_len);
            // SAFETY: the hpsend caller promised the payload stays valid until this sync.
            unsafe { self.outbox(h.pid).send(tag, h.payload, h.len) };
        }
        let st = self.st.get_mut();
        st.hpsends = hps;
        st.hp_tags = tags;
        st.hp_tags.clear();
    }

    fn publish_collective(&mut self, q: usize) {
        let stamp = self.step + 1;
        let st = self.st.get_mut();
        let regs = st.reg_ops.iter().map(RegOp::signature).collect();
        let tagsize = st.new_tagsize;
        // SAFETY: our own coll[q]; others read it only after barrier 1.
        let c = unsafe { &mut *self.run.procs[self.pid].coll[q].get() };
        *c = Coll {
            stamp,
            regs,
            tagsize,
        };
    }

    /// Check that this process's registration and tag-size requests equal pid 0's, then apply
    /// the registration changes to the own table.
    fn collective(&mut self, q: usize, g: u32) -> Result<()> {
        let stamp = self.step + 1;
        let view = |pid: usize| {
            // SAFETY: written before barrier 1 and not again before the next superstep's.
            let c = unsafe { &*self.run.procs[pid].coll[q].get() };
            if c.stamp == stamp {
                (&c.regs[..], c.tagsize)
            } else {
                (&[][..], None)
            }
        };
        let (root_regs, root_tag) = view(0);
        let (my_regs, my_tag) = view(self.pid);
        if g & FLAG_REGS != 0 && my_regs != root_regs {
            let msg = format!(
                "push_reg/pop_reg calls differ between processes in superstep {}: pid 0 made {}, \
                 pid {} made {} (all processes must register and deregister in the same order)",
                self.step,
                describe(root_regs),
                self.pid,
                describe(my_regs)
            );
            return Err(self.misuse("sync", msg));
        }
        if g & FLAG_TAGS != 0 && my_tag != root_tag {
            let show = |t: Option<usize>| match t {
                Some(t) => format!("asked for {t} bytes"),
                None => "did not call set_tagsize".to_string(),
            };
            let msg = format!(
                "set_tagsize differs between processes in superstep {}: pid 0 {}, pid {} {} \
                 (set_tagsize is collective)",
                self.step,
                show(root_tag),
                self.pid,
                show(my_tag)
            );
            return Err(self.misuse("sync", msg));
        }
        // SAFETY: our own table, between barrier 1 and barrier 2 (REGS forces barrier 2).
        let table = unsafe { &mut *self.run.procs[self.pid].regs.get() };
        let st = self.st.get_mut();
        for op in st.reg_ops.drain(..) {
            if let RegOp::Pop { slot } = op {
                st.slots.release(slot);
            }
            table.apply(op, &mut st.graveyard);
        }
        if let Some(t) = st.new_tagsize.take() {
            st.tagsize = t;
        }
        Ok(())
    }

    /// Deliver the puts of every sender that wrote to us and queue its messages. An outbox is
    /// fresh iff its stamp names this superstep; stale ones stay cached, so checking all p
    /// senders costs little more than reading the ones that wrote.
    fn receive(&mut self, q: usize, tagsize: usize) {
        let (me, fresh) = (self.pid, self.step + 1);
        let run = &*self.run;
        let st = self.st.get_mut();
        st.queue.tagsize = tagsize;
        for sender in run.procs.iter() {
            // SAFETY: the sender filled its parity-q outboxes before barrier 1 and leaves them
            // alone until after the next sync's barrier 1.
            let outs = unsafe { &*sender.out[q].get() };
            let Some(ob) = outs[me].as_deref() else {
                continue;
            };
            if ob.stamp != fresh {
                continue;
            }
            // SAFETY: put destinations are our own registered memory, kept alive by our table
            // or graveyard, with no live references (we hold `&mut self`).
            unsafe { ob.deliver_puts() };
            if ob.msg_count > 0 {
                st.queue.srcs.push(&**ob as *const Outbox);
                st.queue.left += ob.msg_count;
                st.queue.left_bytes += ob.msg_bytes;
            }
        }
    }

    #[cold]
    fn end_mismatch(&self, op: &'static str) -> crate::Error {
        let (ended, synced): (Vec<usize>, Vec<usize>) =
            (0..self.run.p).partition(|&i| self.run.procs[i].ended.load(Ordering::Relaxed));
        self.misuse(
            op,
            format!(
                "pid(s) {ended:?} returned from the SPMD function while pid(s) {synced:?} called \
                 sync (every process must call sync the same number of times)"
            ),
        )
    }
}
