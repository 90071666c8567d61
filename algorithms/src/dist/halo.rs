//! Halo exchange for the 1D block distribution: each process sends the first and last `width`
//! items of its block to its neighbours, and the sync that delivers them is lazy (declared
//! counts, `Ctx::declare_incoming`): a process waits for its neighbours only, not for every process.
//!
//! Cost per exchange: `2 width g + l`, where the `l` is a lazy sync's (the arrival of the two
//! neighbours' puts), not a barrier over all processes.

use bytemuck::Pod;
use mbsp::{Ctx, Reg};

/// Ghost cells of one process of a 1D block distribution: `width` items from the left
/// neighbour's block and `width` from the right one's, filled by [`Halo1d::exchange`].
///
/// ```
/// use mbsp_algorithms::dist::Halo1d;
/// // A periodic ring: every process's block is [pid * 10, pid * 10 + 1, pid * 10 + 2].
/// let ghosts = mbsp::run(3, |ctx| {
///     let halo = Halo1d::<u64>::new(ctx, 1, true)?; // one sync: the registration
///     let block: Vec<u64> = (0..3).map(|i| ctx.pid() as u64 * 10 + i).collect();
///     halo.exchange(ctx, &block)?;
///     Ok((halo.left(ctx)?.to_vec(), halo.right(ctx)?.to_vec()))
/// })?;
/// assert_eq!(ghosts[0], (vec![22], vec![10])); // pid 2's last item, pid 1's first
/// assert_eq!(ghosts[1], (vec![2], vec![20]));
/// # Ok::<(), mbsp::Error>(())
/// ```
#[derive(Debug)]
pub struct Halo1d<T: Pod> {
    /// `[left ghosts (width) | right ghosts (width)]`.
    ghosts: Reg<T>,
    width: usize,
    periodic: bool,
}

impl<T: Pod + Send> Halo1d<T> {
    /// Collective: register the ghost cells of `width` items on each side (this syncs once).
    /// `periodic`: process 0's left neighbour is process p - 1 and the other way round;
    /// otherwise the ends of the line have one neighbour and their outer ghosts stay zero.
    pub fn new(ctx: &mut Ctx, width: usize, periodic: bool) -> mbsp::Result<Self> {
        let len = width.checked_mul(2).ok_or_else(|| {
            ctx.misuse_error("halo new", format!("a width of {width} items overflows"))
        })?;
        let ghosts = ctx.push_reg(vec![T::zeroed(); len])?;
        ctx.sync()?;
        Ok(Halo1d {
            ghosts,
            width,
            periodic,
        })
    }

    /// The neighbours of this process: (left, right), `None` at the ends of a line.
    pub fn neighbours(&self, ctx: &Ctx) -> (Option<usize>, Option<usize>) {
        let (pid, p) = (ctx.pid(), ctx.nprocs());
        if self.periodic {
            (Some((pid + p - 1) % p), Some((pid + 1) % p))
        } else {
            (pid.checked_sub(1), (pid + 1 < p).then_some(pid + 1))
        }
    }

    /// Collective: send the first `width` items of `block` to the left neighbour and the last
    /// `width` to the right one, and end the superstep with a lazy sync; afterwards
    /// [`left`](Self::left) and [`right`](Self::right) hold the neighbours' items. The
    /// superstep must not contain gets, registrations or immediate primitives (see
    /// `Ctx::declare_incoming`); puts and messages of the caller's own are fine if every receiver also
    /// counts them: use [`exchange_with`](Self::exchange_with) then.
    pub fn exchange(&self, ctx: &mut Ctx, block: &[T]) -> mbsp::Result<()> {
        self.exchange_with(ctx, block, 0)
    }

    /// [`exchange`](Self::exchange) in a superstep in which this process also receives `more`
    /// puts and messages of the caller's own.
    pub fn exchange_with(&self, ctx: &mut Ctx, block: &[T], more: usize) -> mbsp::Result<()> {
        let w = self.width;
        if block.len() < w {
            return Err(ctx.misuse_error(
                "halo exchange",
                format!(
                    "the block has {} items, fewer than the halo width {w}",
                    block.len()
                ),
            ));
        }
        let (left, right) = self.neighbours(ctx);
        let mut incoming = more;
        if w > 0 {
            if let Some(l) = left {
                // Our first items are the left neighbour's right ghosts.
                ctx.put(l, &block[..w], &self.ghosts, w)?;
                incoming += 1;
            }
            if let Some(r) = right {
                ctx.put(r, &block[block.len() - w..], &self.ghosts, 0)?;
                incoming += 1;
            }
        }
        ctx.declare_incoming(incoming)?;
        ctx.sync()
    }

    /// The left neighbour's last `width` items (zeros at the left end of a line).
    pub fn left<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        Ok(&ctx.local(&self.ghosts)?[..self.width])
    }

    /// The right neighbour's first `width` items (zeros at the right end of a line).
    pub fn right<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        Ok(&ctx.local(&self.ghosts)?[self.width..])
    }

    /// Collective: deregister the ghost cells (this syncs once).
    pub fn free(self, ctx: &mut Ctx) -> mbsp::Result<()> {
        ctx.pop_reg(&self.ghosts)?;
        ctx.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::Halo1d;

    /// Lines and rings of 1 to 5 processes, widths 0 to 2, several exchanges in a row: the
    /// ghosts hold the neighbours' edge items of the same exchange.
    #[test]
    fn ghosts_hold_the_neighbours_edges() {
        for p in 1..=5 {
            for width in 0..=2 {
                for periodic in [false, true] {
                    mbsp::run(p, |ctx| {
                        let halo = Halo1d::<u64>::new(ctx, width, periodic)?;
                        let (pid, p) = (ctx.pid(), ctx.nprocs());
                        for round in 1..=4u64 {
                            let block: Vec<u64> =
                                (0..3).map(|i| round * 1000 + pid as u64 * 10 + i).collect();
                            halo.exchange(ctx, &block)?;
                            let edge = |q: usize, last: bool| -> Vec<u64> {
                                let b: Vec<u64> =
                                    (0..3).map(|i| round * 1000 + q as u64 * 10 + i).collect();
                                if last {
                                    b[3 - width..].to_vec()
                                } else {
                                    b[..width].to_vec()
                                }
                            };
                            let (l, r) = halo.neighbours(ctx);
                            let want_l = l.map_or(vec![0; width], |q| edge(q, true));
                            let want_r = r.map_or(vec![0; width], |q| edge(q, false));
                            assert_eq!(halo.left(ctx)?, &want_l[..], "p {p} w {width} pid {pid}");
                            assert_eq!(halo.right(ctx)?, &want_r[..], "p {p} w {width} pid {pid}");
                        }
                        halo.free(ctx)
                    })
                    .unwrap();
                }
            }
        }
    }

    #[test]
    fn a_block_shorter_than_the_width_is_a_misuse() {
        let e = mbsp::run(2, |ctx| {
            let halo = Halo1d::<f64>::new(ctx, 3, false)?;
            halo.exchange(ctx, &[1.0, 2.0])
        })
        .unwrap_err();
        assert_eq!(e.kind(), mbsp::ErrorKind::Misuse, "{e}");
        assert!(e.to_string().contains("fewer than the halo width 3"), "{e}");
    }
}
