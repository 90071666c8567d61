//! Random BSP programs and a sequential model of BSPlib to check them against (shared by
//! `tests/semantics/model.rs`, on either engine, and by the MPI self-test, over ranks).
//!
//! A generator walks the model's registration state to produce valid multi-superstep programs
//! over the address-based (`*_raw`) primitives: local writes, puts (source captured at call
//! time), gets (source read at the owner's sync entry), sends with changing tag sizes, and
//! pushes/pops with null registrations, sizes that differ per process and shadowing (the same
//! address registered twice). Every process runs its part, recording its memory and its queue
//! after each sync. Afterwards the model replays the program and checks every record. Where
//! BSPlib leaves the outcome open (overlapping writes in one superstep), the model accepts any of
//! the written values per byte and continues from what the runtime produced.

#![allow(clippy::needless_range_loop)] // indices name pids, buffers and bytes of the model
#![allow(dead_code)]

use std::collections::BTreeMap;

pub const BUFS: usize = 3;
pub const BUF_LEN: usize = 32;

pub struct Rng(u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[derive(Clone, Debug)]
pub enum Op {
    Write {
        b: usize,
        off: usize,
        bytes: Vec<u8>,
    },
    Put {
        to: usize,
        name: usize,
        off: usize,
        src: usize,
        src_off: usize,
        len: usize,
    },
    Get {
        from: usize,
        name: usize,
        off: usize,
        dst: usize,
        dst_off: usize,
        len: usize,
    },
    Send {
        to: usize,
        tag: Vec<u8>,
        payload: Vec<u8>,
    },
}

/// A registration call, as each process makes it: `Some(b)` = buffer b, `None` = null.
#[derive(Clone, Debug)]
pub enum RegCall {
    Push(Vec<(Option<usize>, usize)>),
    Pop(Vec<Option<usize>>),
}

#[derive(Clone, Copy, Debug)]
pub enum Drain {
    Keep,
    HpMove,
    Move,
    PeekDrop,
}

#[derive(Clone, Debug)]
pub struct Step {
    pub ops: Vec<Vec<Op>>,
    pub regs: Vec<RegCall>,
    pub tagsize: Option<usize>,
    pub drain: Vec<Drain>,
}

/// One slot of the model's registration sequence.
#[derive(Clone, Debug)]
pub struct Slot {
    pub per: Vec<(Option<usize>, usize)>,
    pub valid_from: usize,
}

/// The registration state the generator and the checker share.
#[derive(Clone, Debug, Default)]
pub struct Regs {
    pub stack: Vec<Slot>,
}

impl Regs {
    /// The slot that process `i`'s non-null address `b` names in superstep `k`.
    pub fn resolve(&self, i: usize, b: usize, k: usize) -> Option<usize> {
        (0..self.stack.len())
            .rev()
            .find(|&s| self.stack[s].valid_from <= k && self.stack[s].per[i].0 == Some(b))
    }
}

pub fn generate(p: usize, steps: usize, seed: u64) -> Vec<Step> {
    let mut rng = Rng(seed);
    let mut regs = Regs::default();
    let mut tagsize = 0usize;
    let mut prog = Vec::new();
    for k in 0..steps {
        let mut ops = vec![Vec::new(); p];
        for (i, mine) in ops.iter_mut().enumerate() {
            for _ in 0..rng.below(6) {
                match rng.below(4) {
                    0 => {
                        let len = 1 + rng.below(8);
                        let off = rng.below(BUF_LEN - len + 1);
                        mine.push(Op::Write {
                            b: rng.below(BUFS),
                            off,
                            bytes: rng.bytes(len),
                        });
                    }
                    1 | 2 => {
                        let name = rng.below(BUFS);
                        let other = rng.below(p);
                        let Some(s) = regs.resolve(i, name, k) else {
                            continue;
                        };
                        let (Some(_), have) = regs.stack[s].per[other] else {
                            continue;
                        };
                        let len = rng.below(have.min(9) + 1);
                        let off = rng.below(have - len + 1);
                        let local = rng.below(BUFS);
                        let local_off = rng.below(BUF_LEN - len + 1);
                        mine.push(if rng.chance(55) {
                            Op::Put {
                                to: other,
                                name,
                                off,
                                src: local,
                                src_off: local_off,
                                len,
                            }
                        } else {
                            Op::Get {
                                from: other,
                                name,
                                off,
                                dst: local,
                                dst_off: local_off,
                                len,
                            }
                        });
                    }
                    _ => {
                        let n = rng.below(10);
                        mine.push(Op::Send {
                            to: rng.below(p),
                            tag: rng.bytes(tagsize),
                            payload: rng.bytes(n),
                        });
                    }
                }
            }
        }
        // Collective registration calls: pops first (of slots every process can name
        // unambiguously), then pushes.
        let mut calls = Vec::new();
        let mut popping: Vec<usize> = Vec::new();
        for _ in 0..rng.below(3) {
            if regs.stack.is_empty() {
                break;
            }
            let s = rng.below(regs.stack.len());
            if popping.contains(&s) || regs.stack[s].valid_from > k {
                continue;
            }
            // Process i pops by its address for slot s; that must name s: no newer slot still
            // registered under the same address.
            let unambiguous = (0..p).all(|i| {
                let a = regs.stack[s].per[i].0;
                (s + 1..regs.stack.len())
                    .all(|t| popping.contains(&t) || regs.stack[t].per[i].0 != a)
            });
            if unambiguous {
                popping.push(s);
                calls.push(RegCall::Pop(
                    (0..p).map(|i| regs.stack[s].per[i].0).collect(),
                ));
            }
        }
        let mut pushed = Vec::new();
        for _ in 0..rng.below(3) {
            let b = rng.below(BUFS);
            let per: Vec<_> = (0..p)
                .map(|_| {
                    if rng.chance(15) {
                        (None, 0)
                    } else {
                        (Some(b), rng.below(BUF_LEN + 1))
                    }
                })
                .collect();
            calls.push(RegCall::Push(per.clone()));
            pushed.push(Slot {
                per,
                valid_from: k + 1,
            });
        }
        popping.sort_unstable();
        for s in popping.into_iter().rev() {
            regs.stack.remove(s);
        }
        regs.stack.extend(pushed);
        let new_tag = if rng.chance(25) {
            Some(rng.below(6))
        } else {
            None
        };
        let drain = (0..p)
            .map(|_| match rng.below(4) {
                0 => Drain::Keep,
                1 => Drain::HpMove,
                2 => Drain::Move,
                _ => Drain::PeekDrop,
            })
            .collect();
        prog.push(Step {
            ops,
            regs: calls,
            tagsize: new_tag,
            drain,
        });
        if let Some(t) = new_tag {
            tagsize = t;
        }
    }
    prog
}

/// A message as a process read it: (sender, tag, payload).
pub type Msg = (usize, Vec<u8>, Vec<u8>);

/// What a process saw after one sync.
#[derive(Clone, Debug, Default)]
pub struct Record {
    pub bufs: Vec<Vec<u8>>,
    pub qsize: (usize, usize),
    /// Fully read messages (sender, tag, payload), or with `PeekDrop`, as peeked.
    pub msgs: Vec<Msg>,
}

pub fn initial(i: usize, b: usize) -> Vec<u8> {
    (0..BUF_LEN).map(|j| (i * 100 + b * 10 + j) as u8).collect()
}

/// Superstep `k` is a lazy one (`Ctx::declare_incoming`) if every other one that could be is: one with
/// only writes, puts and messages (no gets, registration or tag-size changes), but every third.
/// Then process `i` declares the puts (non-empty) and messages addressed to it.
pub fn lazy_count(prog: &[Step], k: usize, i: usize) -> Option<usize> {
    let step = &prog[k];
    let eligible = k % 3 != 2
        && step.regs.is_empty()
        && step.tagsize.is_none()
        && step
            .ops
            .iter()
            .flatten()
            .all(|op| !matches!(op, Op::Get { .. }));
    eligible.then(|| {
        step.ops
            .iter()
            .flatten()
            .filter(|op| match op {
                Op::Put { to, len, .. } => *to == i && *len > 0,
                Op::Send { to, .. } => *to == i,
                _ => false,
            })
            .count()
    })
}

/// Run process `ctx.pid()`'s part of `prog`: its records after every sync, and its buffers
/// (addresses), to be freed with [`free`] once the run is over (puts may land in them until its
/// final sync).
pub fn process(ctx: &mut mbsp::Ctx, prog: &[Step]) -> mbsp::Result<(Vec<Record>, Vec<usize>)> {
    let i = ctx.pid();
    let bufs = buffers(i);
    let mut records = Vec::new();
    let mut tagsize = 0;
    for k in 0..prog.len() {
        issue(ctx, prog, k, &bufs, &mut tagsize)?;
        ctx.sync()?;
        records.push(drain(ctx, &prog[k], &bufs)?);
    }
    // Free the buffers only after the final sync of the run: keep them alive until then by
    // leaking into the result (freed by `free`).
    Ok((
        records,
        bufs.into_iter().map(|b| b as usize).collect::<Vec<_>>(),
    ))
}

/// Process `i`'s buffers, with their initial contents (freed with [`free`]).
pub fn buffers(i: usize) -> Vec<*mut u8> {
    (0..BUFS)
        .map(|b| Box::into_raw(initial(i, b).into_boxed_slice()) as *mut u8)
        .collect()
}

/// The contents of `bufs` (read outside a sync).
pub fn snapshot(bufs: &[*mut u8]) -> Vec<Vec<u8>> {
    bufs.iter()
        // SAFETY: our buffers, read outside a sync.
        .map(|&b| unsafe { std::slice::from_raw_parts(b, BUF_LEN) }.to_vec())
        .collect()
}

/// Superstep `k` of process `ctx.pid()` up to its sync: its operations, registration calls,
/// tag size and (for a lazy superstep) declared count.
pub fn issue(
    ctx: &mut mbsp::Ctx,
    prog: &[Step],
    k: usize,
    bufs: &[*mut u8],
    tagsize: &mut usize,
) -> mbsp::Result<()> {
    let (i, step) = (ctx.pid(), &prog[k]);
    for op in &step.ops[i] {
        match op {
            // SAFETY: our buffer of BUF_LEN bytes (the generator keeps `off + len` within
            // it), written outside a sync.
            Op::Write { b, off, bytes } => unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), bufs[*b].add(*off), bytes.len())
            },
            Op::Put {
                to,
                name,
                off,
                src,
                src_off,
                len,
            } => {
                // SAFETY: our buffer, read outside a sync.
                let data = unsafe { std::slice::from_raw_parts(bufs[*src].add(*src_off), *len) };
                ctx.put_raw(*to, data, bufs[*name], *off)?;
            }
            Op::Get {
                from,
                name,
                off,
                dst,
                dst_off,
                len,
                // SAFETY: the destination is our buffer (`dst_off + len` within it), alive
                // until after the run and not touched until the sync writes it.
            } => unsafe {
                ctx.get_raw(*from, bufs[*name], *off, bufs[*dst].add(*dst_off), *len)?;
            },
            Op::Send { to, tag, payload } => ctx.send(*to, tag, payload)?,
        }
    }
    registrations(ctx, step, bufs)?;
    if let Some(t) = step.tagsize {
        let old = ctx.set_tagsize(t)?;
        assert_eq!(old, *tagsize, "set_tagsize returns the tag size in force");
        *tagsize = t;
    }
    if let Some(m) = lazy_count(prog, k, i) {
        ctx.declare_incoming(m)?;
    }
    Ok(())
}

/// The registration calls of `step` by process `ctx.pid()`.
pub fn registrations(ctx: &mut mbsp::Ctx, step: &Step, bufs: &[*mut u8]) -> mbsp::Result<()> {
    let i = ctx.pid();
    for call in &step.regs {
        match call {
            RegCall::Push(per) => {
                let (b, len) = per[i];
                let ptr = b.map_or(std::ptr::null_mut(), |b| bufs[b]);
                // SAFETY: our buffers live until after the run.
                unsafe { ctx.push_reg_raw(ptr, len)? };
            }
            RegCall::Pop(per) => {
                let ptr = per[i].map_or(std::ptr::null(), |b| bufs[b] as *const u8);
                ctx.pop_reg_raw(ptr)?;
            }
        }
    }
    Ok(())
}

/// After the sync of `step`: process `ctx.pid()`'s record (its buffers, its queue's size) and
/// its queue drained as `step` says.
pub fn drain(ctx: &mut mbsp::Ctx, step: &Step, bufs: &[*mut u8]) -> mbsp::Result<Record> {
    let i = ctx.pid();
    let q = ctx.qsize()?;
    let mut rec = Record {
        bufs: snapshot(bufs),
        qsize: (q.messages, q.bytes),
        msgs: Vec::new(),
    };
    match step.drain[i] {
        Drain::Keep => {}
        Drain::HpMove => {
            while let Some(m) = ctx.hpmove()? {
                rec.msgs.push((m.from, m.tag.to_vec(), m.payload.to_vec()));
            }
        }
        Drain::Move => {
            while let Some((len, tag)) = ctx.get_tag()? {
                let tag = tag.to_vec();
                let from = ctx.peek()?.expect("get_tag saw a message").from;
                let mut buf = vec![0u8; len];
                assert_eq!(ctx.move_message(&mut buf)?, Some(len));
                rec.msgs.push((from, tag, buf));
            }
            assert_eq!(ctx.move_message(&mut [0u8; 4])?, None);
        }
        Drain::PeekDrop => {
            while let Some(m) = ctx.peek()? {
                rec.msgs.push((m.from, m.tag.to_vec(), m.payload.to_vec()));
                assert_eq!(ctx.move_message(&mut [])?, Some(m.payload.len()));
            }
        }
    }
    if !matches!(step.drain[i], Drain::Keep) {
        assert_eq!(
            ctx.qsize()?,
            mbsp::QueueSize::default(),
            "drained queue is empty"
        );
        assert!(ctx.hpmove()?.is_none());
    }
    Ok(rec)
}

/// Free the buffers [`process`] returned (its run is over).
pub fn free(bufs: Vec<usize>) {
    for b in bufs {
        // SAFETY: allocated by `process` as boxed slices of BUF_LEN; the run is over.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(b as *mut u8, BUF_LEN)) });
    }
}

pub fn check(p: usize, prog: &[Step], records: &[Vec<Record>]) -> Result<(), String> {
    let mut mem: Vec<Vec<Vec<u8>>> = (0..p)
        .map(|i| (0..BUFS).map(|b| initial(i, b)).collect())
        .collect();
    let mut regs = Regs::default();
    let mut tagsize = 0usize;
    for (k, step) in prog.iter().enumerate() {
        // Computation phase: local writes and put captures, per process in program order.
        let mut writes: Vec<(usize, usize, usize, Vec<u8>)> = Vec::new(); // (pid, buf, off, data)
        let mut gets = Vec::new();
        let mut sent: Vec<Vec<Msg>> = vec![Vec::new(); p];
        for i in 0..p {
            for op in &step.ops[i] {
                match op {
                    Op::Write { b, off, bytes } => {
                        mem[i][*b][*off..*off + bytes.len()].copy_from_slice(bytes)
                    }
                    Op::Put {
                        to,
                        name,
                        off,
                        src,
                        src_off,
                        len,
                    } => {
                        let s = regs
                            .resolve(i, *name, k)
                            .ok_or("put through an unresolvable name")?;
                        let rb = regs.stack[s].per[*to]
                            .0
                            .ok_or("put to a null registration")?;
                        writes.push((
                            *to,
                            rb,
                            *off,
                            mem[i][*src][*src_off..*src_off + len].to_vec(),
                        ));
                    }
                    Op::Get {
                        from,
                        name,
                        off,
                        dst,
                        dst_off,
                        len,
                    } => {
                        let s = regs
                            .resolve(i, *name, k)
                            .ok_or("get through an unresolvable name")?;
                        let rb = regs.stack[s].per[*from]
                            .0
                            .ok_or("get from a null registration")?;
                        gets.push((*from, rb, *off, i, *dst, *dst_off, *len));
                    }
                    Op::Send { to, tag, payload } => {
                        assert_eq!(tag.len(), tagsize);
                        sent[*to].push((i, tag.clone(), payload.clone()));
                    }
                }
            }
        }
        // Sync: gets read the state at sync entry, then all writes land.
        for (from, rb, off, i, dst, dst_off, len) in gets {
            writes.push((i, dst, dst_off, mem[from][rb][off..off + len].to_vec()));
        }
        let mut candidates: BTreeMap<(usize, usize, usize), Vec<u8>> = BTreeMap::new();
        for (i, b, off, data) in &writes {
            for (j, v) in data.iter().enumerate() {
                candidates.entry((*i, *b, off + j)).or_default().push(*v);
            }
        }
        for i in 0..p {
            let rec = &records[i][k];
            for b in 0..BUFS {
                for j in 0..BUF_LEN {
                    let got = rec.bufs[b][j];
                    match candidates.get(&(i, b, j)) {
                        Some(c) if !c.contains(&got) => {
                            return Err(format!(
                                "superstep {k}: pid {i} buf {b} byte {j} is {got}, expected one of {c:?}"
                            ));
                        }
                        None if got != mem[i][b][j] => {
                            return Err(format!(
                                "superstep {k}: pid {i} buf {b} byte {j} is {got}, expected {} (untouched)",
                                mem[i][b][j]
                            ));
                        }
                        _ => mem[i][b][j] = got,
                    }
                }
            }
            let want_bytes: usize = sent[i].iter().map(|m| m.2.len()).sum();
            if rec.qsize != (sent[i].len(), want_bytes) {
                return Err(format!(
                    "superstep {k}: pid {i} qsize {:?}, expected {:?}",
                    rec.qsize,
                    (sent[i].len(), want_bytes)
                ));
            }
            if !matches!(step.drain[i], Drain::Keep) {
                let mut got = rec.msgs.clone();
                let mut want = sent[i].clone();
                got.sort();
                want.sort();
                if got != want {
                    return Err(format!(
                        "superstep {k}: pid {i} received {got:?}, expected {want:?}"
                    ));
                }
            }
        }
        // Registration changes and the tag size take effect.
        let mut pops = Vec::new();
        for call in &step.regs {
            match call {
                RegCall::Pop(per) => {
                    let s = (0..regs.stack.len())
                        .rev()
                        .find(|&s| {
                            !pops.contains(&s) && (0..p).all(|i| regs.stack[s].per[i].0 == per[i])
                        })
                        .ok_or("pop of nothing")?;
                    pops.push(s);
                }
                RegCall::Push(_) => {}
            }
        }
        pops.sort_unstable();
        for s in pops.into_iter().rev() {
            regs.stack.remove(s);
        }
        for call in &step.regs {
            if let RegCall::Push(per) = call {
                regs.stack.push(Slot {
                    per: per.clone(),
                    valid_from: k + 1,
                });
            }
        }
        if let Some(t) = step.tagsize {
            tagsize = t;
        }
    }
    Ok(())
}
