//! Small messages ride in the barrier lines beside small puts (engine/threads/ride.rs): the
//! queue still holds each sender's messages in the order it sent them, senders in pid order,
//! whatever mix of riding sends, sends too big to ride, `hpsend`, `send_parts`, owned messages
//! and riding puts a superstep makes, with full syncs, declared syncs at the barrier and the
//! lazy protocol (lanes and inboxes).

use crate::common;

use common::within;
use mbsp::internals::{declared_at_barrier, lanes};
use mbsp::{Ctx, Run};

const STEPS: u64 = 10;
const TAG: usize = 4;
/// Puts per sender and superstep at most (each to its own word of the destination's area).
const MAX_PUTS: usize = 8;

/// What one process does to one destination, in order.
#[derive(Clone, Debug, PartialEq)]
enum Op {
    /// A message (tag, payload) sent with `send`, `send_parts`, `hpsend` or `send_owned`.
    Msg(How, [u8; TAG], Vec<u8>),
    /// A one-word put.
    Put(u64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum How {
    Send,
    Parts,
    Hp,
    Owned,
}

/// A small deterministic generator: every process computes every process's program.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Process `pid`'s operations in superstep `step` of a run of `p`, as (destination, op).
fn program(seed: u64, p: usize, step: u64, pid: usize) -> Vec<(usize, Op)> {
    let mut r = mix(seed ^ mix(step * 1000 + pid as u64));
    let mut next = |n: u64| {
        r = mix(r.wrapping_add(0x9E37_79B9_7F4A_7C15));
        r % n
    };
    let n = next(9) as usize;
    let mut puts = vec![0; p];
    let mut ops = Vec::new();
    for i in 0..n {
        let d = next(p as u64) as usize;
        let tag = [pid as u8, step as u8, i as u8, 0xA5];
        // Mostly small (riding where a line leads to `d`, up to seven words each with tag and
        // header, so that a busy superstep fills the line), some around what a line carries
        // (232 bytes beside a tag) and past it.
        let len = match next(8) {
            0 => 220 + next(60) as usize,
            _ => next(40) as usize,
        };
        let payload: Vec<u8> = (0..len)
            .map(|k| (k as u8) ^ (i as u8) ^ pid as u8)
            .collect();
        let op = match next(10) {
            0..=4 => Op::Msg(How::Send, tag, payload),
            5 => Op::Msg(How::Parts, tag, payload),
            6 => Op::Msg(How::Hp, tag, payload),
            7 => Op::Msg(How::Owned, tag, payload),
            _ if puts[d] < MAX_PUTS => {
                puts[d] += 1;
                Op::Put(step << 32 | (pid as u64) << 16 | i as u64)
            }
            _ => Op::Msg(How::Send, tag, payload),
        };
        ops.push((d, op));
    }
    ops
}

/// One process of the test: every superstep runs its program, then checks its queue (every
/// sender in pid order, each one's messages in its order) and its puts.
fn body(ctx: &mut Ctx, seed: u64, declare: bool) -> mbsp::Result<()> {
    let (p, me) = (ctx.nprocs(), ctx.pid());
    ctx.set_tagsize(TAG)?;
    let area = ctx.push_reg(vec![0u64; p * MAX_PUTS])?;
    ctx.sync()?;
    for step in 0..STEPS {
        let mine = program(seed, p, step, me);
        let mut put_at = vec![0; p];
        for (d, op) in &mine {
            match op {
                Op::Msg(How::Send, tag, payload) => ctx.send(*d, tag, payload)?,
                Op::Msg(How::Parts, tag, payload) => {
                    let (a, b) = payload.split_at(payload.len() / 2);
                    ctx.send_parts(*d, tag, &[a, b])?
                }
                // SAFETY: `mine` outlives the sync below and is not changed.
                Op::Msg(How::Hp, tag, payload) => unsafe { ctx.hpsend(*d, tag, payload)? },
                Op::Msg(How::Owned, tag, payload) => ctx.send_owned(*d, tag, payload.clone())?,
                Op::Put(v) => {
                    ctx.put(*d, &[*v], &area, me * MAX_PUTS + put_at[*d])?;
                    put_at[*d] += 1;
                }
            }
        }
        let all: Vec<Vec<(usize, Op)>> = (0..p).map(|s| program(seed, p, step, s)).collect();
        let to_me = |s: usize| all[s].iter().filter(|(d, _)| *d == me).map(|(_, op)| op);
        if declare {
            ctx.declare_incoming((0..p).map(|s| to_me(s).count()).sum())?;
        }
        ctx.sync()?;
        let want: Vec<(usize, [u8; TAG], Vec<u8>)> = (0..p)
            .flat_map(|s| {
                to_me(s).filter_map(move |op| match op {
                    Op::Msg(_, tag, payload) => Some((s, *tag, payload.clone())),
                    Op::Put(_) => None,
                })
            })
            .collect();
        let q = ctx.qsize()?;
        let bytes: usize = want.iter().map(|m| m.2.len()).sum();
        assert_eq!(
            (q.messages, q.bytes),
            (want.len(), bytes),
            "pid {me} step {step}"
        );
        for (k, (from, tag, payload)) in want.iter().enumerate() {
            let at = format!("pid {me} step {step}, message {k} of {}", want.len());
            // Every way of reading the queue.
            match k % 3 {
                0 => {
                    let m = ctx.hpmove()?.expect(&at);
                    assert_eq!(
                        (m.from, m.tag, m.payload),
                        (*from, &tag[..], &payload[..]),
                        "{at}"
                    );
                }
                1 => {
                    let (len, t) = ctx.get_tag()?.expect(&at);
                    assert_eq!((len, t), (payload.len(), &tag[..]), "{at}");
                    let mut buf = vec![0u8; 300];
                    let n = ctx.move_message(&mut buf)?.expect(&at);
                    assert_eq!(&buf[..n], &payload[..], "{at}");
                }
                _ => {
                    let m = ctx.move_owned::<u8>()?.expect(&at);
                    assert_eq!((m.from, &m.payload[..]), (*from, &payload[..]), "{at}");
                    assert_eq!(m.tag, &tag[..], "{at}");
                }
            }
        }
        assert!(
            ctx.peek()?.is_none(),
            "pid {me} step {step}: more messages than sent"
        );
        let got = ctx.local(&area)?.to_vec();
        for s in 0..p {
            let puts: Vec<u64> = to_me(s)
                .filter_map(|op| match op {
                    Op::Put(v) => Some(*v),
                    Op::Msg(..) => None,
                })
                .collect();
            let row = &got[s * MAX_PUTS..s * MAX_PUTS + puts.len()];
            assert_eq!(row, &puts[..], "pid {me} step {step}: puts from {s}");
        }
    }
    ctx.sync()?;
    Ok(())
}

#[test]
fn the_queue_keeps_its_order_when_messages_ride() {
    within(300, || {
        for p in [2, 3, 4, 5, 8] {
            for seed in 0..6 {
                let seed = seed * 7919 + p as u64;
                Run::new(p).run(move |ctx| body(ctx, seed, false)).unwrap();
                Run::new(p).run(move |ctx| body(ctx, seed, true)).unwrap();
                for lanes_on in [true, false] {
                    let run = lanes(declared_at_barrier(Run::new(p), false), lanes_on);
                    run.run(move |ctx| body(ctx, seed, true)).unwrap();
                }
            }
        }
    });
}

/// A one-word put and two small messages to the same process fill its line; the third and
/// fourth messages go to the outbox, and the receiver reads the two riding ones first, in
/// order; the next superstep rides again. With full syncs, and with lazy ones (where the
/// riding messages move to the outbox at the sync, ahead of the two already there).
#[test]
fn riding_messages_come_before_the_outbox_ones() {
    within(60, || {
        for lazy in [false, true] {
            let r = declared_at_barrier(Run::new(2), !lazy).run(move |ctx| {
                let other = 1 - ctx.pid();
                let x = ctx.push_reg(vec![0u64; 1])?;
                ctx.sync()?;
                for round in 0..3u8 {
                    ctx.put(other, &[round as u64 + 40], &x, 0)?;
                    for k in 0..4u8 {
                        ctx.send(other, &[], &[round, k])?;
                    }
                    if lazy {
                        ctx.declare_incoming(5)?;
                    }
                    ctx.sync()?;
                    assert_eq!(ctx.local(&x)?[0], round as u64 + 40);
                    for k in 0..4u8 {
                        let m = ctx.hpmove()?.expect("four messages");
                        assert_eq!(m.payload, &[round, k], "lazy: {lazy}");
                    }
                    assert!(ctx.hpmove()?.is_none());
                }
                Ok(())
            });
            r.unwrap();
        }
    });
}
