//! The tree algorithms ([`Algorithm::Tree`](super::Algorithm::Tree)): supersteps in which every
//! process sends and receives at most one message, `L = ⌈log₂ p⌉` of them per phase, so that
//! the work of a collective grows as `p·log p` over all processes instead of the `p²` messages
//! of a one-superstep exchange. That is what matters with many processes: at p = 1000 a
//! one-word all-reduce by messages handles a million messages, and with more processes than
//! cores every one of them is paid on the few cores there are.
//!
//! With `w` words per process and `H` words of header per message:
//!
//! | operation | supersteps | h per superstep |
//! |---|---|---|
//! | broadcast (binomial tree from the root) | `L` | `w + H` |
//! | reduce (binomial tree to pid 0, then to the root if it is not 0) | `L` (+1) | `w + H` |
//! | all-reduce (reduce to pid 0, broadcast from it) | `2L` | `w + H` |
//! | scans (recursive doubling: round `k` sends to `pid + 2ᵏ`) | `L` | `w + H` |
//!
//! Every tree combines contributions in pid order and each exactly once, so an associative
//! operator need not be commutative (the module's contract). Each superstep's messages carry the
//! call's header, so processes that disagree on the collective fail as with the other
//! algorithms.

use super::wire::{Call, Inbox, Op, zero_tag};
use bytemuck::Pod;
use mbsp::{Ctx, Result};

/// Supersteps of one tree phase on `p` processes: `⌈log₂ p⌉`.
pub(super) fn rounds(p: usize) -> usize {
    p.next_power_of_two().trailing_zeros() as usize
}

/// One superstep: send `out` (if any) to its process, sync, and copy what `from` sent into
/// `into` (if a sender is expected); anything from another process is an error.
fn step<T: Pod>(
    ctx: &mut Ctx,
    call: &Call,
    out: Option<(usize, &[T])>,
    from: Option<usize>,
    into: &mut [T],
) -> Result<()> {
    if let Some((to, data)) = out {
        let tag = zero_tag(ctx);
        call.send(ctx, to, data, &tag)?;
    }
    ctx.sync()?;
    let inbox = Inbox::take(ctx, call)?;
    inbox.only_from(ctx, call, |q| Some(q) == from)?;
    if let Some(q) = from {
        super::copy_into(into, inbox.from(ctx, call, q)?);
    }
    Ok(())
}

/// Copy `buf` of `root` into `buf` of every process: in round `k`, the processes at distance
/// `v < 2ᵏ` from the root (in pid order, wrapping) send to the one at `v + 2ᵏ`.
pub(super) fn broadcast<T: Pod>(
    ctx: &mut Ctx,
    call: &Call,
    root: usize,
    buf: &mut [T],
) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let v = (me + p - root) % p;
    for k in 0..rounds(p) {
        let bit = 1 << k;
        let out = (v < bit && v + bit < p).then(|| ((root + v + bit) % p, &buf[..]));
        let from = (bit <= v && v < 2 * bit).then(|| (root + v - bit) % p);
        // The sender's data and the receiver's buffer are the same slice only on the sender,
        // which receives nothing in that round.
        let mut got = if from.is_some() {
            buf.to_vec()
        } else {
            Vec::new()
        };
        step(ctx, call, out, from, &mut got)?;
        if from.is_some() {
            buf.copy_from_slice(&got);
        }
    }
    Ok(())
}

/// `acc := acc ⊕ later` elementwise (`later`'s contributions come after `acc`'s in pid order).
fn fold_after<T: Pod>(acc: &mut [T], later: &[T], op: &impl Fn(T, T) -> T) {
    for (a, &b) in acc.iter_mut().zip(later) {
        *a = op(*a, b);
    }
}

/// `acc := earlier ⊕ acc` elementwise.
fn fold_before<T: Pod>(acc: &mut [T], earlier: &[T], op: &impl Fn(T, T) -> T) {
    for (a, &b) in acc.iter_mut().zip(earlier) {
        *a = op(b, *a);
    }
}

/// Combine every process's `buf` in pid order into pid 0's return value (other processes
/// return what they passed on): in round `k`, a process whose pid is an odd multiple of `2ᵏ`
/// sends its partial (pids `[pid, pid + 2ᵏ)`) to `pid - 2ᵏ`, which appends it.
fn reduce_to_zero<T: Pod, F: Fn(T, T) -> T>(
    ctx: &mut Ctx,
    call: &Call,
    buf: &[T],
    op: &F,
) -> Result<Vec<T>> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let mut acc = buf.to_vec();
    let mut got = vec![T::zeroed(); buf.len()];
    for k in 0..rounds(p) {
        let bit = 1 << k;
        let out = (me % (2 * bit) == bit).then(|| (me - bit, &acc[..]));
        let from = (me % (2 * bit) == 0 && me + bit < p).then_some(me + bit);
        step(ctx, call, out, from, &mut got)?;
        if from.is_some() {
            fold_after(&mut acc, &got, op);
        }
    }
    Ok(acc)
}

/// Reduce (to `root`), all-reduce and the scans by trees (module documentation); `identity` is
/// the exclusive scan's value on pid 0.
pub(super) fn reduction<T: Pod, F: Fn(T, T) -> T>(
    ctx: &mut Ctx,
    call: &Call,
    root: Option<usize>,
    buf: &mut [T],
    identity: Option<T>,
    op: &F,
) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    match call.op {
        Op::AllReduce => {
            let all = reduce_to_zero(ctx, call, buf, op)?;
            if me == 0 {
                buf.copy_from_slice(&all);
            }
            broadcast(ctx, call, 0, buf)
        }
        Op::Reduce => {
            let root = root.unwrap_or(0);
            let all = reduce_to_zero(ctx, call, buf, op)?;
            if root == 0 {
                if me == 0 {
                    buf.copy_from_slice(&all);
                }
                return Ok(());
            }
            let out = (me == 0).then_some((root, &all[..]));
            let from = (me == root).then_some(0);
            let mut got = vec![T::zeroed(); if me == root { buf.len() } else { 0 }];
            step(ctx, call, out, from, &mut got)?;
            if me == root {
                buf.copy_from_slice(&got);
            }
            Ok(())
        }
        _ => {
            // Recursive doubling: after round k, `incl` holds pids (me - 2^(k+1), me] and `excl`
            // the pids before me among them.
            let mut incl = buf.to_vec();
            let mut excl: Option<Vec<T>> = None;
            let mut got = vec![T::zeroed(); buf.len()];
            for k in 0..rounds(p) {
                let bit = 1 << k;
                let out = (me + bit < p).then(|| (me + bit, &incl[..]));
                let from = (me >= bit).then(|| me - bit);
                step(ctx, call, out, from, &mut got)?;
                if from.is_some() {
                    fold_before(&mut incl, &got, op);
                    match &mut excl {
                        Some(e) => fold_before(e, &got, op),
                        None => excl = Some(got.clone()),
                    }
                }
            }
            if call.op == Op::ScanInclusive {
                buf.copy_from_slice(&incl);
            } else if let Some(e) = excl {
                buf.copy_from_slice(&e);
            } else if let Some(id) = identity {
                buf.fill(id);
            }
            Ok(())
        }
    }
}
