//! Halo exchange for the 2D block distribution: an `n_rows x n_cols` grid of items is cut over a
//! `pr x pc` grid of processes (process `pid` sits at grid row `pid / pc`, column `pid % pc`,
//! and owns the rows and columns [`block_range`] gives it), and each process sends the edges of
//! width `w` of its block to its eight neighbours (four sides and four corners), periodic or
//! not. The sync that delivers them is lazy (declared counts, `Ctx::declare_incoming`): a process waits
//! for its neighbours only, not for every process.
//!
//! Cost per exchange, for a block of `r x c` items: `(2 w c + 2 w r + 4 w²) g` (one put per
//! neighbour; the west and east columns are packed first, `2 w r` copies) plus a lazy sync's
//! `l` (the arrival of the neighbours' puts), not a barrier over all processes.

use super::block_range;
use bytemuck::Pod;
use mbsp::{Ctx, Reg};

/// The eight ghost regions, in the order of the registered buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    North,
    South,
    West,
    East,
    NorthWest,
    NorthEast,
    SouthWest,
    SouthEast,
}

impl Side {
    /// The grid step to the neighbour on this side (rows, columns).
    fn step(self) -> (isize, isize) {
        match self {
            Side::North => (-1, 0),
            Side::South => (1, 0),
            Side::West => (0, -1),
            Side::East => (0, 1),
            Side::NorthWest => (-1, -1),
            Side::NorthEast => (-1, 1),
            Side::SouthWest => (1, -1),
            Side::SouthEast => (1, 1),
        }
    }

    /// The side of the neighbour on which this process lies.
    fn opposite(self) -> Side {
        match self {
            Side::North => Side::South,
            Side::South => Side::North,
            Side::West => Side::East,
            Side::East => Side::West,
            Side::NorthWest => Side::SouthEast,
            Side::NorthEast => Side::SouthWest,
            Side::SouthWest => Side::NorthEast,
            Side::SouthEast => Side::NorthWest,
        }
    }

    const ALL: [Side; 8] = [
        Side::North,
        Side::South,
        Side::West,
        Side::East,
        Side::NorthWest,
        Side::NorthEast,
        Side::SouthWest,
        Side::SouthEast,
    ];
}

/// Ghost cells of one process of a 2D block distribution over a `pr x pc` process grid: the
/// `width` rows above and below its block, the `width` columns left and right of it, and the
/// four `width x width` corners, filled by [`Halo2d::exchange`]. Blocks are row-major.
///
/// ```
/// use mbsp_algorithms::dist::Halo2d;
/// // A 4 x 4 grid of items on 2 x 2 processes (2 x 2 items each), item (r, c) = 10 r + c,
/// // periodic: every process sees all four others' edges.
/// let ghosts = mbsp::run(4, |ctx| {
///     let mut halo = Halo2d::<u32>::new(ctx, (2, 2), (4, 4), 1, true)?; // one sync
///     let (rows, cols) = (halo.rows(), halo.cols());
///     let block: Vec<u32> = rows.clone()
///         .flat_map(|r| cols.clone().map(move |c| 10 * r as u32 + c as u32))
///         .collect();
///     halo.exchange(ctx, &block)?; // one lazy sync
///     Ok((halo.north(ctx)?.to_vec(), halo.west(ctx)?.to_vec(), halo.north_west(ctx)?.to_vec()))
/// })?;
/// // Process 3 owns rows 2..4, columns 2..4.
/// assert_eq!(ghosts[3], (vec![12, 13], vec![21, 31], vec![11]));
/// // Process 0's neighbours wrap around: row 3 above it, column 3 left of it.
/// assert_eq!(ghosts[0], (vec![30, 31], vec![3, 13], vec![33]));
/// # Ok::<(), mbsp::Error>(())
/// ```
#[derive(Debug)]
pub struct Halo2d<T: Pod> {
    /// `[north | south | west | east | nw | ne | sw | se]`: `w x cols`, `w x cols`,
    /// `rows x w`, `rows x w`, then four `w x w`, each row-major.
    ghosts: Reg<T>,
    /// Packs the west or east columns of the block for a put (`rows x w`).
    pack: Vec<T>,
    grid: (usize, usize),
    /// The global grid's rows and columns.
    size: (usize, usize),
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    width: usize,
    periodic: bool,
}

impl<T: Pod + Send> Halo2d<T> {
    /// Collective: register the ghost cells of this process's block of an `n_rows x n_cols`
    /// grid distributed over `grid = (pr, pc)` processes (`pr · pc` must be the number of
    /// processes), `width` items deep (this syncs once). Every block must be at least `width`
    /// rows high and `width` columns wide. `periodic`: the grid wraps around in both
    /// directions; otherwise ghosts outside the grid stay zero.
    pub fn new(
        ctx: &mut Ctx,
        grid: (usize, usize),
        size: (usize, usize),
        width: usize,
        periodic: bool,
    ) -> mbsp::Result<Self> {
        const OP: &str = "halo2d new";
        let ((pr, pc), (n_rows, n_cols), p) = (grid, size, ctx.nprocs());
        if pr.checked_mul(pc) != Some(p) {
            return Err(ctx.misuse_error(
                OP,
                format!("a {pr} x {pc} process grid does not match the {p} processes of the run"),
            ));
        }
        // The smallest blocks are n / p items long (block_range: lengths differ by at most 1).
        if n_rows / pr < width || n_cols / pc < width {
            return Err(ctx.misuse_error(
                OP,
                format!(
                    "a {n_rows} x {n_cols} grid over {pr} x {pc} processes has blocks of {} x {} \
                     items at the smallest, less than the halo width {width}",
                    n_rows / pr,
                    n_cols / pc
                ),
            ));
        }
        let (i, j) = (ctx.pid() / pc, ctx.pid() % pc);
        let (rows, cols) = (block_range(n_rows, pr, i), block_range(n_cols, pc, j));
        let edges = (rows.len().checked_add(cols.len()))
            .and_then(|s| s.checked_mul(2))
            .and_then(|s| s.checked_mul(width));
        let corners = width.checked_mul(width).and_then(|s| s.checked_mul(4));
        let Some(len) = edges.zip(corners).and_then(|(e, c)| e.checked_add(c)) else {
            return Err(ctx.misuse_error(
                OP,
                format!("ghost cells of width {width} around {rows:?} x {cols:?} overflow"),
            ));
        };
        let ghosts = ctx.push_reg(vec![T::zeroed(); len])?;
        ctx.sync()?;
        Ok(Halo2d {
            ghosts,
            pack: vec![T::zeroed(); rows.len() * width],
            grid,
            size,
            rows,
            cols,
            width,
            periodic,
        })
    }

    /// The global rows of this process's block.
    pub fn rows(&self) -> std::ops::Range<usize> {
        self.rows.clone()
    }

    /// The global columns of this process's block.
    pub fn cols(&self) -> std::ops::Range<usize> {
        self.cols.clone()
    }

    /// The neighbour of process `pid` on `side`, `None` outside a grid that does not wrap.
    fn neighbour(&self, pid: usize, side: Side) -> Option<usize> {
        let (pr, pc) = self.grid;
        let (i, j) = (pid / pc, pid % pc);
        let (di, dj) = side.step();
        let wrap = |x: usize, d: isize, n: usize| -> Option<usize> {
            let y = x as isize + d;
            if (0..n as isize).contains(&y) {
                Some(y as usize)
            } else if self.periodic {
                Some(y.rem_euclid(n as isize) as usize)
            } else {
                None
            }
        };
        Some(wrap(i, di, pr)? * pc + wrap(j, dj, pc)?)
    }

    /// Where ghost region `side` starts in the registered buffer of this process, and its
    /// length.
    fn region(&self, side: Side) -> (usize, usize) {
        Self::region_in(self.width, self.rows.len(), self.cols.len(), side)
    }

    /// Where ghost region `side` of process `pid` starts in its registered buffer (whose
    /// layout depends on its block's size).
    fn region_of(&self, pid: usize, side: Side) -> usize {
        let ((pr, pc), (n_rows, n_cols)) = (self.grid, self.size);
        let r = block_range(n_rows, pr, pid / pc).len();
        let c = block_range(n_cols, pc, pid % pc).len();
        Self::region_in(self.width, r, c, side).0
    }

    /// The ghost region `side` around a block of `r x c` items, `w` deep: start and length.
    fn region_in(w: usize, r: usize, c: usize, side: Side) -> (usize, usize) {
        let (ns, we, corner) = (w * c, r * w, w * w);
        let at = |k: usize| 2 * ns + 2 * we + k * corner;
        match side {
            Side::North => (0, ns),
            Side::South => (ns, ns),
            Side::West => (2 * ns, we),
            Side::East => (2 * ns + we, we),
            Side::NorthWest => (at(0), corner),
            Side::NorthEast => (at(1), corner),
            Side::SouthWest => (at(2), corner),
            Side::SouthEast => (at(3), corner),
        }
    }

    /// Collective: send the edges of `block` (this process's `rows x cols` items, row-major)
    /// to the neighbours, and end the superstep with a lazy sync; afterwards the accessors
    /// ([`north`](Self::north), ...) hold the neighbours' edges. The superstep must not contain
    /// gets, registrations or immediate primitives (see `Ctx::declare_incoming`); puts and messages of the
    /// caller's own are fine if every receiver also counts them: use
    /// [`exchange_with`](Self::exchange_with) then.
    pub fn exchange(&mut self, ctx: &mut Ctx, block: &[T]) -> mbsp::Result<()> {
        self.exchange_with(ctx, block, 0)
    }

    /// [`exchange`](Self::exchange) in a superstep in which this process also receives `more`
    /// puts and messages of the caller's own.
    pub fn exchange_with(&mut self, ctx: &mut Ctx, block: &[T], more: usize) -> mbsp::Result<()> {
        let (w, r, c) = (self.width, self.rows.len(), self.cols.len());
        if block.len() != r * c {
            return Err(ctx.misuse_error(
                "halo2d exchange",
                format!(
                    "the block has {} items; process {} owns {r} x {c} = {}",
                    block.len(),
                    ctx.pid(),
                    r * c
                ),
            ));
        }
        let me = ctx.pid();
        let mut incoming = more;
        if w > 0 {
            for side in Side::ALL {
                let Some(to) = self.neighbour(me, side) else {
                    continue;
                };
                // Our edge on `side` is the ghost region on the opposite side of `to`; its
                // rows start at `r0`, its columns at `c0`, `h x v` items.
                let (di, dj) = side.step();
                let (r0, h) = if di < 0 {
                    (0, w)
                } else if di > 0 {
                    (r - w, w)
                } else {
                    (0, r)
                };
                let (c0, v) = if dj < 0 {
                    (0, w)
                } else if dj > 0 {
                    (c - w, w)
                } else {
                    (0, c)
                };
                let at = self.region_of(to, side.opposite());
                if v == c {
                    // Whole rows: contiguous in the block.
                    ctx.put(to, &block[r0 * c..(r0 + h) * c], &self.ghosts, at)?;
                } else {
                    let pack = &mut self.pack[..h * v];
                    for (k, row) in pack.chunks_exact_mut(v).enumerate() {
                        let s = (r0 + k) * c + c0;
                        row.copy_from_slice(&block[s..s + v]);
                    }
                    ctx.put(to, pack, &self.ghosts, at)?;
                }
                incoming += 1;
            }
        }
        ctx.declare_incoming(incoming)?;
        ctx.sync()
    }

    fn ghost<'a>(&'a self, ctx: &'a Ctx, side: Side) -> mbsp::Result<&'a [T]> {
        let (at, len) = self.region(side);
        Ok(&ctx.local(&self.ghosts)?[at..at + len])
    }

    /// The `width` rows above the block (`width x cols`, row-major, top row first).
    pub fn north<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        self.ghost(ctx, Side::North)
    }

    /// The `width` rows below the block (`width x cols`, row-major).
    pub fn south<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        self.ghost(ctx, Side::South)
    }

    /// The `width` columns left of the block (`rows x width`, row-major).
    pub fn west<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        self.ghost(ctx, Side::West)
    }

    /// The `width` columns right of the block (`rows x width`, row-major).
    pub fn east<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        self.ghost(ctx, Side::East)
    }

    /// The `width x width` items above and left of the block.
    pub fn north_west<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        self.ghost(ctx, Side::NorthWest)
    }

    /// The `width x width` items above and right of the block.
    pub fn north_east<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        self.ghost(ctx, Side::NorthEast)
    }

    /// The `width x width` items below and left of the block.
    pub fn south_west<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        self.ghost(ctx, Side::SouthWest)
    }

    /// The `width x width` items below and right of the block.
    pub fn south_east<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [T]> {
        self.ghost(ctx, Side::SouthEast)
    }

    /// Collective: deregister the ghost cells (this syncs once).
    pub fn free(self, ctx: &mut Ctx) -> mbsp::Result<()> {
        ctx.pop_reg(&self.ghosts)?;
        ctx.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::{Halo2d, Side};

    /// Item `(gr, gc)` of the global grid in exchange `round`.
    fn item(round: u64, gr: usize, gc: usize) -> u64 {
        round * 1_000_000 + gr as u64 * 1000 + gc as u64
    }

    /// Grids of 1 to 6 processes, widths 0 to 2, periodic or not, several exchanges in a row:
    /// every ghost holds the global item at its position (wrapped around when periodic, zero
    /// outside a grid that does not wrap).
    #[test]
    fn ghosts_hold_the_items_around_the_block() {
        let grids = [(1, 1), (1, 3), (3, 1), (2, 2), (2, 3), (3, 2)];
        for grid in grids {
            for width in 0..=2 {
                for periodic in [false, true] {
                    let size = (7, 8);
                    mbsp::run(grid.0 * grid.1, |ctx| {
                        let mut halo = Halo2d::<u64>::new(ctx, grid, size, width, periodic)?;
                        let (rows, cols) = (halo.rows(), halo.cols());
                        for round in 1..=3u64 {
                            let block: Vec<u64> = rows
                                .clone()
                                .flat_map(|r| cols.clone().map(move |c| item(round, r, c)))
                                .collect();
                            halo.exchange(ctx, &block)?;
                            // The global item at (row, column) offsets from the block's corner.
                            let at = |gr: isize, gc: isize| -> u64 {
                                let wrap = |x: isize, n: usize| {
                                    if (0..n as isize).contains(&x) {
                                        Some(x as usize)
                                    } else if periodic {
                                        Some(x.rem_euclid(n as isize) as usize)
                                    } else {
                                        None
                                    }
                                };
                                match (wrap(gr, size.0), wrap(gc, size.1)) {
                                    (Some(r), Some(c)) => item(round, r, c),
                                    _ => 0,
                                }
                            };
                            let (r0, c0) = (rows.start as isize, cols.start as isize);
                            let (r1, c1) = (rows.end as isize, cols.end as isize);
                            let w = width as isize;
                            let region =
                                |rs: std::ops::Range<isize>, cs: std::ops::Range<isize>| {
                                    rs.flat_map(|r| cs.clone().map(move |c| (r, c)))
                                        .map(|(r, c)| at(r, c))
                                        .collect::<Vec<u64>>()
                                };
                            let want = [
                                (Side::North, region(r0 - w..r0, c0..c1)),
                                (Side::South, region(r1..r1 + w, c0..c1)),
                                (Side::West, region(r0..r1, c0 - w..c0)),
                                (Side::East, region(r0..r1, c1..c1 + w)),
                                (Side::NorthWest, region(r0 - w..r0, c0 - w..c0)),
                                (Side::NorthEast, region(r0 - w..r0, c1..c1 + w)),
                                (Side::SouthWest, region(r1..r1 + w, c0 - w..c0)),
                                (Side::SouthEast, region(r1..r1 + w, c1..c1 + w)),
                            ];
                            for (side, want) in want {
                                assert_eq!(
                                    halo.ghost(ctx, side)?,
                                    &want[..],
                                    "grid {grid:?} w {width} periodic {periodic} pid {} \
                                     {side:?}",
                                    ctx.pid()
                                );
                            }
                        }
                        assert_eq!(halo.north(ctx)?.len(), width * halo.cols().len());
                        assert_eq!(halo.east(ctx)?.len(), width * halo.rows().len());
                        halo.free(ctx)
                    })
                    .unwrap();
                }
            }
        }
    }

    #[test]
    fn misuses_are_named() {
        let e = mbsp::run(4, |ctx| {
            Halo2d::<f64>::new(ctx, (3, 1), (9, 9), 1, false).map(drop)
        })
        .unwrap_err();
        assert!(e.to_string().contains("3 x 1 process grid"), "{e}");
        let e = mbsp::run(4, |ctx| {
            Halo2d::<f64>::new(ctx, (2, 2), (9, 5), 3, false).map(drop)
        })
        .unwrap_err();
        assert!(e.to_string().contains("less than the halo width 3"), "{e}");
        let e = mbsp::run(2, |ctx| {
            let mut halo = Halo2d::<f64>::new(ctx, (1, 2), (4, 4), 1, false)?;
            halo.exchange(ctx, &[0.0; 5])
        })
        .unwrap_err();
        assert!(e.to_string().contains("owns 4 x 2 = 8"), "{e}");
    }

    /// Processes that disagree on the wrap-around declare counts that do not match what
    /// arrives: an error of the run, never a hang.
    #[test]
    fn disagreeing_processes_fail_the_run() {
        let e = mbsp::run(4, |ctx| {
            let periodic = ctx.pid() == 0;
            let mut halo = Halo2d::<u8>::new(ctx, (2, 2), (4, 4), 1, periodic)?;
            halo.exchange(ctx, &[1; 4])?;
            ctx.sync()
        })
        .unwrap_err();
        assert_eq!(e.kind(), mbsp::ErrorKind::Misuse, "{e}");
        assert!(e.to_string().contains("declare_incoming"), "{e}");
    }
}
