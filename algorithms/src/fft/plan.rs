//! [`BspFft`]: the plan of a distributed FFT inside a run (see the [module docs](super)), and
//! the nested levels below a process of the Multi-BSP FFT ([`Below`]): a transform's local FFT
//! may be a nested run of transforms, which may have levels below them in turn, so the two
//! live in one module.

use super::num::{Complex, Float, butterflies, root};
use super::split::{self, Gather, Scratch, Theirs, Twiddles};
use crate::shared::Shared;
use mbsp::{Ctx, Reg, Result};
use rustfft::Fft;
use std::sync::{Arc, Mutex};

/// Forward (`e^{-2πi jk/n}`, unscaled) or inverse (`e^{+2πi jk/n}`, scaled by `1/n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `y_k = Σ_j x_j e^{-2πi jk/n}`.
    Forward,
    /// `x_j = (1/n) Σ_k y_k e^{+2πi jk/n}`.
    Inverse,
}

/// How the superstep of a transform moves the packs between processes (see "exchange" in the
/// [module docs](super)). Every process of a run must plan with the same one (checked by
/// [`BspFft::with_exchange`]).
///
/// Both cost one superstep with an h-relation of `h = 2·(n/p)·(p-1)/p` words per process
/// (complex entries are two words), read once by the receiver; they differ in what ends the
/// superstep and where the data waits:
///
/// ```
/// use mbsp_algorithms::fft::{BspFft, Complex, Exchange};
/// let n = 1 << 10;
/// let out = mbsp::run(2, |ctx| {
///     let mut plan = BspFft::<f64>::with_exchange(ctx, n, Exchange::Owned)?;
///     assert_eq!(plan.exchange(), Exchange::Owned);
///     let mut local = vec![Complex::new(1.0, 0.0); n / 2]; // x = all ones
///     plan.forward(ctx, &mut local)?;
///     let first = local[0]; // y₀ = n on pid 0, 0 on pid 1
///     plan.free(ctx)?;
///     Ok(first.re)
/// })?;
/// assert_eq!(out, vec![n as f64, 0.0]);
/// # Ok::<(), mbsp::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Exchange {
    /// Each process writes its packs into one of two registered buffers (the other one on the
    /// next transform), and after a full sync reads the packs meant for it from the other
    /// processes' buffers with direct gets. Cost: `h·g + l` (a full barrier); the superstep
    /// after the transform's sync holds the direct gets, so the caller's next sync should be
    /// a full one (a lazy superstep allows no direct gets).
    DirectGet,
    /// Each process writes each pack meant for another process into a buffer of its own and
    /// hands it over as an owned message ([`Ctx::send_owned`]), declaring the `p - 1` packs it
    /// receives ([`Ctx::declare_incoming`]): its sync is lazy and waits for those packs only, not for a
    /// barrier over all processes. The receiver reads each pack where its sender wrote it and
    /// keeps the buffer for its own packs of the next transform, so a steady state copies and
    /// allocates nothing. Cost: `h·g` plus the wait for the `p - 1` senders instead of `l`.
    /// The transform's superstep must carry no other puts or messages of the caller (the
    /// declared count would not match: an error), and must not follow direct gets in the same
    /// superstep (those of a [`DirectGet`](Exchange::DirectGet) transform included). Used where
    /// the local FFT is split (`1 < p`, `p² ≤ n`, sequential local work); other shapes
    /// exchange with direct gets ([`BspFft::exchange`] says which a plan uses). The default:
    /// faster than direct gets where it is used (docs/benchmarks.md).
    #[default]
    Owned,
}

/// An error unless `n` and `p` are powers of two with `p ≤ n`.
pub(crate) fn check_shape(ctx: &Ctx, n: usize, p: usize) -> Result<()> {
    let why = if n == 0 || !n.is_power_of_two() {
        format!("n = {n} is not a power of two")
    } else if !p.is_power_of_two() {
        format!("p = {p} processes is not a power of two")
    } else if p > n {
        format!("p = {p} processes exceeds n = {n}")
    } else {
        return Ok(());
    };
    Err(ctx.misuse_error("fft", why))
}

/// The group-cyclic redistributions of a transform of length `n` over `p` processes and the
/// size of the groups of its final exchange: `(0, p)` when `p² ≤ n` (or `n = p`).
pub(crate) fn group_cyclic(n: usize, p: usize) -> (usize, usize) {
    let m = n / p;
    let (mut stages, mut gp) = (0, p);
    while m >= 2 && gp > m {
        gp /= m;
        stages += 1;
    }
    (stages, gp)
}

/// `scale·e^{sign·2πi·me·k/n}` for `k < m`, as products of two exactly computed roots (a
/// high and a low part of `me·k`): `2√m` sin/cos evaluations instead of `m`, and an error of a
/// few ulps.
fn twiddles<T: Float>(me: usize, n: usize, m: usize, sign: f64, scale: f64) -> Vec<Complex<T>> {
    const L: usize = 1024;
    let lo: Vec<Complex<f64>> = (0..L.min(m)).map(|k| root(me * k, n, sign, 1.0)).collect();
    let hi: Vec<Complex<f64>> = (0..m.div_ceil(L))
        .map(|h| root(me * h * L, n, sign, scale))
        .collect();
    let f = |x: f64| T::from_f64(x).expect("a float");
    (0..m)
        .map(|k| {
            let z = hi[k / L] * lo[k % L];
            Complex::new(f(z.re), f(z.im))
        })
        .collect()
}

/// Complex entries per tile row of the length-p transforms (a tile of p rows stays in L1/L2).
const TILE: usize = 2048;

/// A distributed FFT of length `n` over the processes of a run, cyclic distribution in and out.
///
/// Planning (sequential kernels, twiddle tables, pack buffers) happens
/// once, in [`BspFft::new`] (collective, one superstep); each [`forward`](BspFft::forward) or
/// [`inverse`](BspFft::inverse) then costs one superstep (see the [module docs](super)).
///
/// ```
/// use mbsp_algorithms::fft::{BspFft, Complex};
/// let n = 64;
/// let out = mbsp::run(4, |ctx| {
///     let mut plan = BspFft::<f64>::new(ctx, n)?;
///     // Cyclic distribution: this process holds x[pid], x[pid + 4], ...; x = an impulse at 1.
///     let mut local: Vec<Complex<f64>> = (0..n / 4)
///         .map(|i| Complex::new(if ctx.pid() + 4 * i == 1 { 1.0 } else { 0.0 }, 0.0))
///         .collect();
///     plan.forward(ctx, &mut local)?;
///     // y_k = e^{-2πi k/n}: check this process's entries k = pid + 4 i.
///     for (i, y) in local.iter().enumerate() {
///         let k = (ctx.pid() + 4 * i) as f64;
///         let want = Complex::from_polar(1.0, -2.0 * std::f64::consts::PI * k / n as f64);
///         assert!((y - want).norm() < 1e-12);
///     }
///     plan.free(ctx)
/// })?;
/// # Ok::<(), mbsp::Error>(())
/// ```
pub struct BspFft<T: Float> {
    t: Arc<Tables<T>>,
    /// The exchange this plan uses (`Owned` only where the local FFT is split).
    exchange: Exchange,
    /// `Owned`: the packs for the other processes in order of pid (`b` entries each), written
    /// by the kernels and handed over at the sync; after it, the packs received, in the same
    /// order, which become the next transform's.
    owned: Vec<Vec<Complex<T>>>,
    /// `Owned` with `p > 2`: this process's pack for itself.
    mine: Vec<Complex<T>>,
    /// The (zero) tag of the owned messages, as long as the tag size.
    tag: Vec<u8>,
    scratch: Scratch<T>,
    /// A fetched slab and a copy of this process's own (the split transform with p = 2).
    slab: Vec<Complex<T>>,
    /// The registered pack buffers of the direct-get exchange (empty ones for the owned
    /// exchange); none for a nested leaf's plan kept across nested runs ([`BspFft::kept`]),
    /// whose owned exchange reads none.
    packs: Option<[Reg<Complex<T>>; 2]>,
    parity: usize,
    tile: Vec<Complex<T>>,
    /// The fetched packs of a Multi-BSP level (allocated on first use).
    recv: Vec<Complex<T>>,
}

/// A sequential kernel and the twiddles that go with it.
type Kernel<T> = (Arc<dyn Fft<T>>, Vec<Complex<T>>);

/// What one process of a transform needs besides communication buffers: the sequential
/// kernels and the twiddle tables. Immutable, so a Multi-BSP plan keeps the tables of nested
/// processes across nested runs.
pub(crate) struct Tables<T: Float> {
    pub(crate) n: usize,
    pub(crate) p: usize,
    pub(crate) me: usize,
    /// Local length `n/p`.
    pub(crate) m: usize,
    /// Pack length of the final exchange, `m/gp`; 0 only when `n/p = 1 < p` (no group-cyclic
    /// stage can make progress there: see `small`).
    pub(crate) b: usize,
    /// The group of the final exchange: processes `gbase + gstride·s` for `s < gp`, this
    /// process being member `gme`. The whole run when `p² ≤ n`.
    gp: usize,
    gme: usize,
    gbase: usize,
    gstride: usize,
    /// The group-cyclic redistributions before the final exchange (empty when `p² ≤ n`).
    levels: Vec<Level<T>>,
    /// The twiddles of the split local FFT (see the [module docs](super)): the flat case with
    /// `p > 1`, `p² ≤ n` and sequential local work.
    split: Option<Twiddles<T>>,
    /// The sequential kernel: of length `n/p`, or `n/(p·L)` when split in `L` rows.
    fwd: Arc<dyn Fft<T>>,
    /// `ω_n^{me·k₁}` for `k₁ < n/p` (empty when split).
    tw_fwd: Vec<Complex<T>>,
    /// The inverse kernel and twiddles (scaling folded in), made at the first inverse
    /// transform: planning is a large part of a plan's cost, and many users only go forward.
    inverse: std::sync::OnceLock<Kernel<T>>,
    inv_scale: f64,
    /// `ω_gp^{j}` for `j < gp/2`, forward.
    roots: Vec<Complex<T>>,
    /// Bit reversal of group members in `log₂ gp` bits.
    bitrev: Vec<usize>,
}

/// One group-cyclic redistribution and the stage after it (see the [module docs](super)).
struct Level<T: Float> {
    /// The processes to fetch from: the entry from `sources[t]` becomes local entry `t`.
    sources: Vec<usize>,
    /// The entry of each source's pack to fetch (this process's column `k₁`).
    column: usize,
    /// The stage's twiddles `ω_N^{j·k₁}` (`N` its transform length, `j` this process's index
    /// in its group), forward and inverse.
    tw_fwd: Vec<Complex<T>>,
    tw_inv: Vec<Complex<T>>,
}

impl<T: Float> Tables<T> {
    /// The kernel and twiddles of `dir`.
    fn kernel(&self, dir: Direction) -> (&Arc<dyn Fft<T>>, &[Complex<T>]) {
        match dir {
            Direction::Forward => (&self.fwd, &self.tw_fwd),
            Direction::Inverse => {
                let (k, tw) = self.inverse.get_or_init(|| {
                    let k = T::rustfft_plan(self.fwd.len(), true);
                    let tw = if self.split.is_some() {
                        Vec::new()
                    } else {
                        twiddles(self.me, self.n, self.m, 1.0, self.inv_scale)
                    };
                    (k, tw)
                });
                (k, tw)
            }
        }
    }

    /// Tables of process `me` of `p` for length `n`. The inverse twiddles fold in `1/n`, or
    /// `1/p` when the local transforms are themselves scaled (nested BSP FFTs scale by `p/n`).
    pub(crate) fn new(n: usize, p: usize, me: usize, local_scaled: bool) -> Self {
        // Rows of the split local FFT (0: not split); nested processes' tables are not split.
        let rows = if local_scaled { 0 } else { split::rows(n, p) };
        Self::with_rows(n, p, me, local_scaled, rows)
    }

    /// [`new`](Self::new) with the local FFT split in `rows` rows (0: not split).
    fn with_rows(n: usize, p: usize, me: usize, local_scaled: bool, rows: usize) -> Self {
        let m = n / p;
        let split = rows > 0;
        let fwd = T::rustfft_plan(if split { m / rows } else { m }, false);
        let scale = 1.0 / if local_scaled { p } else { n } as f64;
        // Group-cyclic stages while the group is larger than the local length: the group of
        // `gp` processes `gbase + gstride·j` doing a transform of length `m·gp` hands column
        // `k₁` of its length-`gp` transforms to the subgroup `{k₁ + m·i}` (stride times `m`).
        let (mut gp, mut gstride) = (p, 1);
        let mut levels = Vec::new();
        while gp > m && m >= 2 {
            let (sub, j) = (gp / m, me / gstride);
            let (base, column, i) = (me % gstride, j % m, j / m);
            // Nested local transforms are scaled by 1/m at every stage: undo it after stage 0.
            let inv = if local_scaled { m as f64 } else { 1.0 };
            levels.push(Level {
                sources: (0..m).map(|t| base + gstride * (i + sub * t)).collect(),
                column,
                tw_fwd: twiddles(i, gp, m, -1.0, 1.0),
                tw_inv: twiddles(i, gp, m, 1.0, inv),
            });
            gp = sub;
            gstride *= m;
        }
        let bits = gp.trailing_zeros();
        Tables {
            n,
            p,
            me,
            m,
            b: if gp <= m { m / gp } else { 0 },
            gp,
            gme: me / gstride,
            gbase: me % gstride,
            gstride,
            levels,
            split: split.then(|| Twiddles::new(n, p, rows, me, scale)),
            fwd,
            tw_fwd: if split {
                Vec::new()
            } else {
                twiddles(me, n, m, -1.0, 1.0)
            },
            inverse: std::sync::OnceLock::new(),
            inv_scale: scale,
            roots: (0..gp / 2).map(|j| root(j, gp, -1.0, 1.0)).collect(),
            bitrev: (0..gp)
                .map(|s| {
                    if bits == 0 {
                        0
                    } else {
                        s.reverse_bits() >> (usize::BITS - bits)
                    }
                })
                .collect(),
        }
    }

    /// The number of supersteps of one transform (`1 +` the group-cyclic redistributions).
    pub(crate) fn supersteps(&self) -> usize {
        1 + self.levels.len()
    }
}

impl<T: Float> BspFft<T> {
    /// Plan a transform of length `n` over this run's processes with the default [`Exchange`]
    /// (collective: every process calls it with the same `n`; one superstep). `n` and the number of processes must be powers of
    /// two with `p ≤ n`.
    pub fn new(ctx: &mut Ctx, n: usize) -> Result<Self> {
        Self::with_exchange(ctx, n, Exchange::default())
    }

    /// [`new`](Self::new) with the given [`Exchange`] (every process must ask for the same
    /// one). Shapes whose local FFT is not split (`p = 1`, `p² > n`) exchange with direct
    /// gets whatever is asked: [`exchange`](Self::exchange) says which one the plan uses.
    pub fn with_exchange(ctx: &mut Ctx, n: usize, exchange: Exchange) -> Result<Self> {
        let (p, me) = (ctx.nprocs(), ctx.pid());
        check_shape(ctx, n, p)?;
        Self::with_tables(ctx, Arc::new(Tables::new(n, p, me, false)), exchange)
    }

    /// A plan from tables made earlier for this process (collective, one superstep: registers
    /// the pack buffers and checks that all processes plan the same length and exchange).
    pub(crate) fn with_tables(
        ctx: &mut Ctx,
        t: Arc<Tables<T>>,
        exchange: Exchange,
    ) -> Result<Self> {
        let (p, me, n, m, b) = (t.p, t.me, t.n, t.m, t.b);
        let zero = Complex::new(T::zero(), T::zero());
        let scratch_len = t
            .fwd
            .get_inplace_scratch_len()
            .max(t.fwd.get_outofplace_scratch_len());
        let exchange = match exchange {
            Exchange::Owned if t.split.is_some() => Exchange::Owned,
            _ => Exchange::DirectGet,
        };
        let owned = exchange == Exchange::Owned;
        // The owned exchange reads no registered packs: it registers empty ones (so that
        // `free` is the same for both).
        let reg_len = if owned { 0 } else { m };
        let packs = [
            ctx.push_reg(vec![zero; reg_len])?,
            ctx.push_reg(vec![zero; reg_len])?,
        ];
        let mut bufs = Vec::new();
        let mut mine = Vec::new();
        if owned {
            for _ in 0..p - 1 {
                bufs.push(filled(ctx, b, zero)?);
            }
            if p > 2 {
                mine = filled(ctx, b, zero)?;
            }
        }
        // Every process checks its left neighbour's n and exchange in the registration
        // superstep.
        let tag = vec![0u8; ctx.tagsize()];
        if p > 1 {
            ctx.send(
                (me + 1) % p,
                &tag,
                bytemuck::bytes_of(&[PLAN_MAGIC, n as u64, owned as u64]),
            )?;
        }
        ctx.sync()?;
        let left = (me + p - 1) % p;
        let mut theirs = if p > 1 { None } else { Some(n as u64) };
        let mut their_exchange = owned as u64;
        while let Some(msg) = ctx.hpmove()? {
            let w: [u64; 3] = match msg.payload.len() {
                24 => bytemuck::pod_read_unaligned(msg.payload),
                _ => [0, 0, 0],
            };
            if w[0] != PLAN_MAGIC {
                return Err(ctx.misuse_error(
                    "fft",
                    "a message not sent by BspFft::new arrived in its superstep (messages sent \
                     before it are delivered by its sync)",
                ));
            }
            theirs = Some(w[1]);
            their_exchange = w[2];
        }
        if theirs != Some(n as u64) {
            return Err(ctx.misuse_error(
                "fft",
                format!(
                    "processes plan different transforms: pid {left} n = {}, pid {me} n = {n}",
                    theirs.map_or("(no plan)".to_string(), |t| t.to_string())
                ),
            ));
        }
        if their_exchange != owned as u64 {
            let name = |o: bool| if o { "Owned" } else { "DirectGet" };
            return Err(ctx.misuse_error(
                "fft",
                format!(
                    "processes plan different exchanges: pid {left} Exchange::{}, pid {me} \
                     Exchange::{}",
                    name(their_exchange != 0),
                    name(owned)
                ),
            ));
        }
        Ok(BspFft {
            exchange,
            owned: bufs,
            mine,
            tag,
            scratch: Scratch::new(scratch_len),
            slab: vec![zero; slab_room(&t)],
            packs: Some(packs),
            parity: 0,
            // Only the p² > n path gathers all packs; the others work in the local array.
            tile: vec![zero; if b > 0 { 0 } else { n }],
            recv: Vec::new(),
            t,
        })
    }

    /// A plan for a leaf of a Multi-BSP level, kept across its nested runs: the owned exchange
    /// (the tables must be split), which reads no registered memory, so nothing is registered;
    /// no plan check (the tables of all the nested processes come from one plan); its buffers
    /// are allocated here, once.
    pub(crate) fn kept(t: Arc<Tables<T>>) -> Self {
        debug_assert!(
            t.split.is_some(),
            "a kept plan exchanges with owned messages"
        );
        let (p, b) = (t.p, t.b);
        let zero = Complex::new(T::zero(), T::zero());
        let scratch_len = t
            .fwd
            .get_inplace_scratch_len()
            .max(t.fwd.get_outofplace_scratch_len());
        BspFft {
            exchange: Exchange::Owned,
            owned: (1..p).map(|_| vec![zero; b]).collect(),
            mine: if p > 2 { vec![zero; b] } else { Vec::new() },
            tag: Vec::new(),
            scratch: Scratch::new(scratch_len),
            slab: vec![zero; slab_room(&t)],
            packs: None,
            parity: 0,
            tile: Vec::new(),
            recv: Vec::new(),
            t,
        }
    }

    /// The transform length `n`.
    pub fn len(&self) -> usize {
        self.t.n
    }

    /// Whether the length is 0 (never: `n` is a power of two).
    pub fn is_empty(&self) -> bool {
        self.t.n == 0
    }

    /// The length of each process's local array, `n/p`.
    pub fn local_len(&self) -> usize {
        self.t.m
    }

    /// The exchange this plan uses: the one it was planned with, or
    /// [`DirectGet`](Exchange::DirectGet) where the local FFT is not split (`p = 1`, `p² > n`).
    pub fn exchange(&self) -> Exchange {
        self.exchange
    }

    /// Forward transform of the cyclically distributed vector whose local part is `local`
    /// (entries `pid, pid + p, ...`), in place; collective, one superstep.
    pub fn forward(&mut self, ctx: &mut Ctx, local: &mut [Complex<T>]) -> Result<()> {
        self.transform(ctx, local, Direction::Forward)
    }

    /// Inverse transform (scaled by `1/n`), as [`forward`](Self::forward).
    pub fn inverse(&mut self, ctx: &mut Ctx, local: &mut [Complex<T>]) -> Result<()> {
        self.transform(ctx, local, Direction::Inverse)
    }

    /// Deregister the pack buffers (effective at the next sync); the buffers of an owned
    /// exchange go to this process's pool ([`Ctx::recycle`]), for later buffers of the run.
    pub fn free(self, ctx: &mut Ctx) -> Result<()> {
        for v in self.owned {
            ctx.recycle(v);
        }
        ctx.recycle(self.mine);
        match self.packs {
            Some([a, b]) => {
                ctx.pop_reg(&a)?;
                ctx.pop_reg(&b)
            }
            None => Ok(()),
        }
    }

    /// [`forward`](Self::forward) or [`inverse`](Self::inverse).
    pub fn transform(
        &mut self,
        ctx: &mut Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
    ) -> Result<()> {
        self.transform_with(ctx, local, dir, None)
    }

    /// [`transform`](Self::transform) whose local FFTs are nested BSP FFTs over the processes
    /// of `below` (Multi-BSP), or sequential when `below` is `None`.
    pub(crate) fn transform_with(
        &mut self,
        ctx: &mut Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
        below: Option<&Below<T>>,
    ) -> Result<()> {
        let t = self.t.clone();
        if local.len() != t.m {
            return Err(ctx.misuse_error(
                "fft",
                format!(
                    "the local array of pid {} has {} entries; a transform of n = {} over {} \
                     processes needs n/p = {}",
                    t.me,
                    local.len(),
                    t.n,
                    t.p,
                    t.m
                ),
            ));
        }
        if let Some(below) = below
            && t.p > 1
            && t.b > 0
            && t.levels.is_empty()
        {
            return self.transform_nested(ctx, local, dir, below, &t);
        }
        if let Some(tw) = &t.split
            && below.is_none()
        {
            return self.transform_split(ctx, local, dir, &t, tw);
        }
        let (kernel, tw) = t.kernel(dir);
        // (1) Local FFT, in order: sequential, or a nested BSP FFT over the cores below.
        self.local_fft(ctx, local, kernel, below, dir)?;
        if t.p == 1 {
            if dir == Direction::Inverse {
                let s = tw[0].re; // 1/n
                local.iter_mut().for_each(|x| *x = x.scale(s));
            }
            return ctx.sync();
        }
        let inverse = dir == Direction::Inverse;
        // (2) Twiddle and pack, (3) one superstep; then, when p² > n, the group-cyclic stages:
        // fetch this process's column, local FFT, twiddle and pack, one superstep each.
        let mut tw = tw;
        for stage in 0..t.supersteps() {
            if stage > 0 {
                let lv = &t.levels[stage - 1];
                let par = self.parity ^ 1;
                let own = ctx.local(reg(&self.packs, par))?;
                for (x, &src) in local.iter_mut().zip(&lv.sources) {
                    if src == t.me {
                        *x = own[lv.column];
                    } else {
                        let dst = std::slice::from_mut(x);
                        // SAFETY: pid `src` wrote this pack before the last sync and rewrites
                        // it only after the next one (double buffering); `x` is private.
                        unsafe { ctx.direct_get(src, reg(&self.packs, par), lv.column, dst)? };
                    }
                }
                self.local_fft(ctx, local, kernel, below, dir)?;
                tw = if inverse { &lv.tw_inv } else { &lv.tw_fwd };
            }
            let last = stage + 1 == t.supersteps();
            let pack = ctx.local_mut(&mut registered(&mut self.packs)[self.parity])?;
            if last && t.b > 0 {
                // Pack r holds entries k₁ ≡ r (mod gp), in order of k₁: one sequential pass
                // over the local array and the twiddles, gp interleaved write streams (faster
                // than gp strided passes, each of which would read the whole array).
                let (gp, shift) = (t.gp, t.b.trailing_zeros());
                for (u, (xs, ws)) in local.chunks_exact(gp).zip(tw.chunks_exact(gp)).enumerate() {
                    for (r, (x, w)) in xs.iter().zip(ws).enumerate() {
                        pack[(r << shift) + u] = x * w;
                    }
                }
            } else {
                for ((d, x), w) in pack.iter_mut().zip(local.iter()).zip(tw) {
                    *d = x * w;
                }
            }
            // The packs of the other parity may still be read by slow processes of the
            // previous superstep, these ones only after this sync.
            ctx.sync()?;
            self.parity ^= 1;
        }
        let par = self.parity ^ 1;
        if t.b == 0 {
            return self.small(ctx, local, par, inverse);
        }
        // (4) Length-gp FFTs across the packs of the group, one column slab at a time: the slab
        // of the pack from member s goes to row bitrev(s) of the local array (gp rows of b),
        // the columns are transformed there in place, and row k₂ is then local[k₂·b ..], the
        // cyclic order of the output.
        let (gp, b, gme) = (t.gp, t.b, t.gme);
        let c = TILE.min(b);
        let own = ctx.local(reg(&self.packs, par))?;
        let mut e0 = 0;
        while e0 < b {
            let cl = c.min(b - e0);
            for s in 0..gp {
                let at = t.bitrev[s] * b + e0;
                let dst = &mut local[at..at + cl];
                let from = gme * b + e0;
                if s == gme {
                    dst.copy_from_slice(&own[from..from + cl]);
                } else {
                    let src = t.gbase + t.gstride * s;
                    // SAFETY: as above: pid `src` rewrites its pack only after the next sync.
                    unsafe { ctx.direct_get(src, reg(&self.packs, par), from, dst)? };
                }
            }
            butterflies(&mut local[e0..], gp, b, cl, &t.roots, inverse);
            e0 += cl;
        }
        Ok(())
    }

    /// The local FFT of `local` in order: the sequential kernel, or a nested BSP FFT over the
    /// cores below (scaled by `1/len` when inverse).
    fn local_fft(
        &mut self,
        ctx: &mut Ctx,
        local: &mut [Complex<T>],
        kernel: &Arc<dyn Fft<T>>,
        below: Option<&Below<T>>,
        dir: Direction,
    ) -> Result<()> {
        match below {
            None => {
                let scratch = self.scratch.get(kernel.get_inplace_scratch_len());
                kernel.process_with_scratch(local, scratch);
                Ok(())
            }
            Some(below) => below.transform(ctx, local, dir),
        }
    }

    /// Steps (1) and (2) of [`transform_split`](Self::transform_split): the first pass and
    /// the kernels, which write the packs.
    fn split_kernels(
        &mut self,
        ctx: &mut Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
        t: &Tables<T>,
        tw: &Twiddles<T>,
    ) -> Result<()> {
        let kernel = t.kernel(dir).0;
        let inverse = dir == Direction::Inverse;
        let (p, l) = (t.p, tw.rows());
        let c = t.m / l;
        // (1) Length-l transforms down the columns of the l rows of c, natural order in and
        // bit-reversed out; row i (frequency f = bitrev(i)) times ω_{n/p}^{f·t}.
        split::dif_pass(local, l, &t.roots, &t.bitrev, tw, inverse);
        // (2) The rows' FFTs of length c, out of place: row i gives the entries k₁ ≡ f
        // (mod l) of the local FFT in order, f = bitrev(i). With l = p that is pack f before
        // its twiddles. With p = 2 only the other process's pack goes to the registered
        // buffer (with l = 4, f = 0, 2, 1, 3, each pack is two blocks), this process's stays
        // in `local` (see `split::kernels2`).
        // With the owned exchange, pack f goes to the buffer handed to process f (or kept
        // for this process).
        let owned = self.exchange == Exchange::Owned;
        let (me, b) = (t.me, t.b);
        let pack = if owned {
            &mut [][..]
        } else {
            ctx.local_mut(&mut registered(&mut self.packs)[self.parity])?
        };
        let scratch = self.scratch.get(kernel.get_outofplace_scratch_len());
        if p == 2 {
            let theirs = if owned {
                &mut self.owned[0][..]
            } else {
                &mut pack[..b]
            };
            let own = slab_and_own(&mut self.slab, l).1;
            split::kernels2(local, theirs, own, me, tw, inverse, |row, out| {
                kernel.process_outofplace_with_scratch(row, out, scratch)
            });
        } else {
            for (i, row) in local.chunks_exact_mut(c).enumerate() {
                let f = t.bitrev[i];
                let out = match (owned, f.cmp(&me)) {
                    (false, _) => &mut pack[f * c..][..c],
                    (true, std::cmp::Ordering::Equal) => &mut self.mine[..],
                    (true, std::cmp::Ordering::Less) => &mut self.owned[f][..],
                    (true, std::cmp::Ordering::Greater) => &mut self.owned[f - 1][..],
                };
                kernel.process_outofplace_with_scratch(row, out, scratch);
            }
        }
        Ok(())
    }

    /// The flat transform with sequential local work and `p² ≤ n`, its local FFT split into
    /// a pass of length-`l` transforms and `l` kernels `l` times shorter (one pass less over
    /// memory than a whole local FFT followed by twiddle-and-pack): see the [module docs](super).
    fn transform_split(
        &mut self,
        ctx: &mut Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
        t: &Tables<T>,
        tw: &Twiddles<T>,
    ) -> Result<()> {
        let inverse = dir == Direction::Inverse;
        let (p, l) = (t.p, tw.rows());
        self.split_kernels(ctx, local, dir, t, tw)?;
        let owned = self.exchange == Exchange::Owned;
        let (me, b) = (t.me, t.b);
        if owned {
            self.hand_over(ctx)?;
        } else {
            // The packs of the other parity may still be read by slow processes of the
            // previous superstep, these ones only after this sync.
            ctx.sync()?;
            self.parity ^= 1;
        }
        let par = self.parity ^ 1;
        // (3) Fetch slab by slab, multiply in the twiddles ω_n^{s·k₁} (k₁ = me + p·u) the
        // senders left out, ω_n^{s·me}·ω_{n/p}^{s·u} (the second factor is row s of the split
        // twiddles), and 1/n when inverse; the length-p FFTs across the packs.
        // Registered where the exchange is by direct gets (never `None` there).
        let packs = self.packs.as_ref().map(|r| &r[par]);
        if p == 2 {
            let other = 1 - me;
            let mut fetch = |from: usize, dst: &mut [Complex<T>]| {
                let packs = packs.expect(KEPT_PACKS);
                // SAFETY: pid `other` wrote this pack before the last sync and rewrites it
                // only after the next one (double buffering); `dst` is private.
                unsafe { ctx.direct_get(other, packs, from, dst) }
            };
            let theirs = if owned {
                Theirs::Here(&self.owned[0])
            } else {
                Theirs::Fetch(&mut fetch)
            };
            let (slab, own) = slab_and_own(&mut self.slab, l);
            let gather = split::Gather2 {
                me,
                l,
                theirs,
                tw,
                inverse,
                slab,
                own,
            };
            return split::gather2_pass(local, gather);
        }
        let received = &self.owned;
        let mut fetch = |s: usize, from: usize, dst: &mut [Complex<T>]| {
            if owned {
                let pack = &received[s - usize::from(s > me)];
                dst.copy_from_slice(&pack[from..from + dst.len()]);
                Ok(())
            } else {
                let packs = packs.expect(KEPT_PACKS);
                // SAFETY: as above.
                unsafe { ctx.direct_get(s, packs, me * b + from, dst) }
            }
        };
        let own = if owned {
            &self.mine[..]
        } else {
            &ctx.local(packs.expect(KEPT_PACKS))?[me * b..][..b]
        };
        let gather = Gather {
            me,
            p,
            own,
            fetch: &mut fetch,
            tw,
            roots: &t.roots,
            bitrev: &t.bitrev,
            inverse,
        };
        split::gather_pass(local, gather)
    }

    /// The owned exchange's superstep: hand the packs in `self.owned` to their processes,
    /// declare the `p - 1` packs this process receives, sync (lazily), and put the received
    /// packs in `self.owned`, in order of their senders' pids (the queue's order).
    fn hand_over(&mut self, ctx: &mut Ctx) -> Result<()> {
        let (p, me, b) = (self.t.p, self.t.me, self.t.b);
        let tagsize = ctx.tagsize();
        if self.tag.len() != tagsize {
            self.tag = vec![0; tagsize];
        }
        for (i, pack) in self.owned.drain(..).enumerate() {
            ctx.send_owned(i + usize::from(i >= me), &self.tag, pack)?;
        }
        ctx.declare_incoming(p - 1)?;
        ctx.sync()?;
        while let Some(msg) = ctx.move_owned::<Complex<T>>()? {
            let (from, payload) = (msg.from, msg.payload);
            let len = payload.len();
            // The packs come in the order of their senders' pids, skipping this process.
            let k = self.owned.len();
            let sender = k + usize::from(k >= me);
            if len != b || k == p - 1 || from != sender {
                return Err(ctx.misuse_error(
                    "fft",
                    format!(
                        "pid {me} received a message of {len} entries from pid {} in the \
                         superstep of an owned exchange, beside the packs of {b} entries from \
                         the {} other processes (the transform's superstep must carry no other \
                         messages)",
                        from,
                        p - 1
                    ),
                ));
            }
            self.owned.push(payload);
        }
        if self.owned.len() != p - 1 {
            return Err(ctx.misuse_error(
                "fft",
                format!(
                    "pid {me} received {} packs in the superstep of an owned exchange, not {}",
                    self.owned.len(),
                    p - 1
                ),
            ));
        }
        Ok(())
    }

    /// The transform with the cores below doing the local work (Multi-BSP): a nested run
    /// computes the local FFT and writes the twiddled outputs straight into this process's pack;
    /// after this level's superstep, this process fetches the packs, and a second nested run
    /// does the length-p FFTs, each nested process on its own columns.
    fn transform_nested(
        &mut self,
        ctx: &mut Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
        below: &Below<T>,
        t: &Tables<T>,
    ) -> Result<()> {
        let tw = t.kernel(dir).1;
        let (p, b, me, par) = (t.p, t.b, t.me, self.parity);
        let (pmask, pshift) = (p - 1, p.trailing_zeros());
        {
            let pack = Shared::new(ctx.local_mut(&mut registered(&mut self.packs)[par])?);
            // SAFETY: entry k₁ of the local transform goes to one pack position, a bijection
            // of 0..m, so the nested processes (each writing the k₁ it owns) write disjoint
            // entries; nobody reads the pack before this level's sync.
            let sink = |k1: usize, v: Complex<T>| unsafe {
                pack.write((k1 & pmask) * b + (k1 >> pshift), v * tw[k1])
            };
            below.transform_into(ctx, local, dir, &sink)?;
        }
        ctx.sync()?;
        self.parity ^= 1;
        // Fetch: pack row of source s at row bitrev(s) of the receive buffer.
        let m = t.m;
        if self.recv.len() != m {
            self.recv = vec![Complex::new(T::zero(), T::zero()); m];
        }
        let own = ctx.local(reg(&self.packs, par))?;
        for s in 0..p {
            let row = t.bitrev[s] * b;
            let dst = &mut self.recv[row..row + b];
            if s == me {
                dst.copy_from_slice(&own[me * b..(me + 1) * b]);
            } else {
                // SAFETY: as in `transform`.
                unsafe { ctx.direct_get(s, reg(&self.packs, par), me * b, dst)? };
            }
        }
        // Length-p FFTs by the cores below, each on its own columns of the receive buffer.
        let recv = &self.recv;
        let out = Shared::new(local);
        let inverse = dir == Direction::Inverse;
        let c = below.fanout();
        ctx.run(c, |nctx| {
            let cols = crate::dist::block_range(b, c, nctx.pid());
            let width = TILE.min(cols.len().max(1));
            let mut tile = below.nodes[nctx.pid()]
                .tile
                .lock()
                .map_err(|_| nctx.misuse_error("fft", "a nested process's tile is poisoned"))?;
            // Made at the first transform, kept for the next ones.
            tile.resize(p * width, Complex::new(T::zero(), T::zero()));
            let mut e0 = cols.start;
            while e0 < cols.end {
                let cl = width.min(cols.end - e0);
                for r in 0..p {
                    tile[r * width..r * width + cl]
                        .copy_from_slice(&recv[r * b + e0..r * b + e0 + cl]);
                }
                butterflies(&mut tile, p, width, cl, &t.roots, inverse);
                for k2 in 0..p {
                    // SAFETY: this nested process alone writes columns `cols` of every row.
                    unsafe { out.slice_mut(k2 * b + e0..k2 * b + e0 + cl) }
                        .copy_from_slice(&tile[k2 * width..k2 * width + cl]);
                }
                e0 += cl;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// `p² > n`: fetch every pack whole and compute this process's outputs directly.
    fn small(
        &mut self,
        ctx: &mut Ctx,
        local: &mut [Complex<T>],
        par: usize,
        inverse: bool,
    ) -> Result<()> {
        let (p, m, me) = (self.t.p, self.t.m, self.t.me);
        let own = ctx.local(reg(&self.packs, par))?;
        for s in 0..p {
            let dst = &mut self.tile[s * m..(s + 1) * m];
            if s == me {
                dst.copy_from_slice(own);
            } else {
                // SAFETY: as in `transform`.
                unsafe { ctx.direct_get(s, reg(&self.packs, par), 0, dst)? };
            }
        }
        let sign = if inverse { 1.0 } else { -1.0 };
        for (i, y) in local.iter_mut().enumerate() {
            let k = me + p * i;
            let (k1, k2) = (k % m, k / m);
            let mut acc = Complex::new(T::zero(), T::zero());
            for s in 0..p {
                acc = acc + self.tile[s * m + k1] * root::<T>(s * k2, p, sign, 1.0);
            }
            *y = acc;
        }
        Ok(())
    }
}

/// A buffer of `len` entries `zero`, from this process's pool ([`Ctx::buffer`]).
fn filled<T: Float>(ctx: &Ctx, len: usize, zero: Complex<T>) -> Result<Vec<Complex<T>>> {
    let mut v = ctx.buffer(len)?;
    v.resize(len, zero);
    Ok(v)
}

/// Stores output `k` of a nested local FFT: `store(local, k, value)`.
type Store<'a, T> = dyn Fn(&Shared<'_, Complex<T>>, usize, Complex<T>) + Sync + 'a;

/// Why a plan has registered packs where it reads them: only a plan kept across nested runs
/// ([`BspFft::kept`]) has none, and it exchanges with owned messages, which read none.
const KEPT_PACKS: &str = "a plan kept across nested runs exchanges with owned messages only";

/// The registered pack of parity `par` of a plan that has them (see [`KEPT_PACKS`]).
fn reg<T>(packs: &Option<[Reg<T>; 2]>, par: usize) -> &Reg<T> {
    &packs.as_ref().expect(KEPT_PACKS)[par]
}

/// The registered packs of a plan that has them (see [`KEPT_PACKS`]).
fn registered<T>(packs: &mut Option<[Reg<T>; 2]>) -> &mut [Reg<T>; 2] {
    packs.as_mut().expect(KEPT_PACKS)
}

/// The room of the gather pass of a plan with these tables (`p = 2` with a split local FFT).
fn slab_room<T: Float>(t: &Tables<T>) -> usize {
    match &t.split {
        Some(tw) if t.p == 2 => split::gather2_room(t.m, tw.rows()),
        _ => 0,
    }
}

/// The gather pass's room in `slab` (`p = 2`, [`slab_room`]) and, split in `l > 8` rows (two
/// levels), this process's own pack, which lies past the slabs; else empty.
fn slab_and_own<T>(slab: &mut [Complex<T>], l: usize) -> (&mut [Complex<T>], &mut [Complex<T>]) {
    if l > 8 {
        slab.split_at_mut(2 * split::SLAB)
    } else {
        (slab, &mut [][..])
    }
}

/// Marks the plan-check message of [`BspFft::new`].
const PLAN_MAGIC: u64 = 0x4253_5046_4654_0001;

/// The nested levels below a process: the nested run's size and, per nested pid, its tables
/// and its own levels below.
pub(crate) struct Below<T: Float> {
    fanout: usize,
    nodes: Vec<Node<T>>,
}

/// On cache lines of its own (128 bytes: Intel's adjacent-line prefetch pairs 64-byte lines):
/// nested process `t` locks and changes node `t` at every transform, and a neighbour on the
/// same lines would take them from its core each time.
#[repr(align(128))]
struct Node<T: Float> {
    tables: Arc<Tables<T>>,
    below: Option<Below<T>>,
    /// A leaf whose local FFT is split: its plan and local array, made at its first transform
    /// and kept (the owned exchange registers nothing, so they outlive the nested run).
    kept: Option<Mutex<Option<Kept<T>>>>,
    /// The tile of this nested process's length-p FFTs for its parent (`transform_nested`).
    tile: Mutex<Vec<Complex<T>>>,
}

/// A nested leaf's plan and local array, kept across nested runs.
struct Kept<T: Float> {
    fft: BspFft<T>,
    local: Vec<Complex<T>>,
}

impl<T: Float> Node<T> {
    /// The local FFT of this nested process's part: `load(loc)` fills its local array, the
    /// transform runs (kept plan, or one planned, registered and freed in this nested run),
    /// and `store(loc)` takes the outputs.
    fn transform(
        &self,
        nctx: &mut Ctx,
        dir: Direction,
        load: impl FnOnce(&mut Vec<Complex<T>>),
        store: impl FnOnce(&[Complex<T>]),
    ) -> Result<()> {
        let Some(kept) = &self.kept else {
            let mut loc = Vec::new();
            load(&mut loc);
            self.plan_and_transform(nctx, dir, &mut loc)?;
            store(&loc);
            return Ok(());
        };
        self.with_kept(nctx, kept, |k, nctx| {
            load(&mut k.local);
            k.fft.transform(nctx, &mut k.local, dir)?;
            store(&k.local);
            Ok(())
        })
    }

    /// The local FFT of `local`, this nested process's part, where it lies (`Order::Parts`
    /// of a top level of one process): nothing is copied in or out.
    fn transform_in_place(
        &self,
        nctx: &mut Ctx,
        dir: Direction,
        local: &mut [Complex<T>],
    ) -> Result<()> {
        match &self.kept {
            None => self.plan_and_transform(nctx, dir, local),
            Some(kept) => self.with_kept(nctx, kept, |k, nctx| k.fft.transform(nctx, local, dir)),
        }
    }

    /// A transform with a plan made, registered and freed in this nested run (levels below, or
    /// a local FFT that is not split: their exchanges read registered packs).
    fn plan_and_transform(
        &self,
        nctx: &mut Ctx,
        dir: Direction,
        local: &mut [Complex<T>],
    ) -> Result<()> {
        let mut fft = BspFft::with_tables(nctx, self.tables.clone(), Exchange::DirectGet)?;
        fft.transform_with(nctx, local, dir, self.below.as_ref())?;
        fft.free(nctx)
    }

    /// `f` with the kept plan (made at the first transform). A transform cut short leaves its
    /// packs half handed over, so an error drops the plan: the next transform plans anew.
    fn with_kept(
        &self,
        nctx: &mut Ctx,
        kept: &Mutex<Option<Kept<T>>>,
        f: impl FnOnce(&mut Kept<T>, &mut Ctx) -> Result<()>,
    ) -> Result<()> {
        let mut slot = kept
            .lock()
            .map_err(|_| nctx.misuse_error("fft", "a nested process's plan is poisoned"))?;
        let k = slot.get_or_insert_with(|| Kept {
            fft: BspFft::kept(self.tables.clone()),
            // Filled (and allocated) by the first copy in; in-place transforms never use it.
            local: Vec::new(),
        });
        let r = f(k, nctx);
        if r.is_err() {
            *slot = None;
        }
        r
    }
}

impl<T: Float> Below<T> {
    /// Plan the levels `fanouts` below a process whose local length is `m` (each fan-out a
    /// power of two, capped at the length it splits).
    pub(crate) fn plan(m: usize, fanouts: &[usize]) -> Option<Below<T>> {
        let (&c, rest) = fanouts.split_first()?;
        let c = c.min(m);
        if c <= 1 {
            return Below::plan(m, rest);
        }
        let nodes = (0..c)
            .map(|t| {
                let below = Below::plan(m / c, rest);
                let tables = Arc::new(Tables::new(m, c, t, below.is_some()));
                let kept = (below.is_none() && tables.split.is_some()).then(|| Mutex::new(None));
                Node {
                    tables,
                    below,
                    kept,
                    tile: Mutex::new(Vec::new()),
                }
            })
            .collect();
        Some(Below { fanout: c, nodes })
    }

    /// The length of the local array the nested run transforms.
    pub(crate) fn len(&self) -> usize {
        self.nodes[0].tables.n
    }

    /// The size of the nested run.
    pub(crate) fn fanout(&self) -> usize {
        self.fanout
    }

    /// The local FFT of `local` by a nested run, as [`transform`](Self::transform), except that
    /// the outputs are not written back: output `k` goes to `sink(k, value)`, called by the
    /// nested process that owns `k` (each `k` once).
    pub(crate) fn transform_into(
        &self,
        ctx: &Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
        sink: &(dyn Fn(usize, Complex<T>) + Sync),
    ) -> Result<()> {
        self.each_part(ctx, local, dir, &|_, k, v| sink(k, v))
    }

    /// The transform of `local` held as the nested processes' parts end to end
    /// ([`Order::Parts`](super::Order::Parts)): nested process `t` transforms entries
    /// `t·m .. (t+1)·m` (`m = len/c`) where they lie, with its kept plan; nothing is copied.
    pub(crate) fn transform_parts(
        &self,
        ctx: &Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
    ) -> Result<()> {
        let m = local.len() / self.fanout;
        // Not a lock per part: the parent would make the locks (on one cache line) at every
        // transform and the nested processes take them, each taking the line from the others.
        let parts = Shared::new(local);
        ctx.run(self.fanout, |nctx| {
            let t = nctx.pid();
            // SAFETY: every pid of the nested run runs this once, and pid `t` alone touches
            // part `t`; the parent touches none before the nested run has ended.
            let part = unsafe { parts.slice_mut(t * m..(t + 1) * m) };
            self.nodes[t].transform_in_place(nctx, dir, part)
        })?;
        Ok(())
    }

    /// The nested run of the local FFT of `local`: nested process `t` transforms the cyclic
    /// part `t, t + c, ...` and hands output `i` to `store(local, t + c·i, value)`.
    fn each_part(
        &self,
        ctx: &Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
        store: &Store<'_, T>,
    ) -> Result<()> {
        let c = self.fanout;
        let len = local.len() / c;
        let shared = Shared::new(local);
        ctx.run(c, |nctx| {
            let t = nctx.pid();
            let load = |loc: &mut Vec<Complex<T>>| {
                loc.clear();
                // SAFETY: the entries `≡ t (mod c)` are this nested process's alone.
                loc.extend((0..len).map(|i| unsafe { shared.read(t + c * i) }));
            };
            let out = |loc: &[Complex<T>]| {
                for (i, &v) in loc.iter().enumerate() {
                    store(&shared, t + c * i, v);
                }
            };
            self.nodes[t].transform(nctx, dir, load, out)
        })?;
        Ok(())
    }

    /// The processes of the whole subtree.
    pub(crate) fn procs(&self) -> usize {
        self.fanout * self.nodes[0].below.as_ref().map_or(1, Below::procs)
    }

    /// The local FFT of `local` (scaled by `1/len` when inverse) by a nested run.
    pub(crate) fn transform(
        &self,
        ctx: &mut Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
    ) -> Result<()> {
        // SAFETY: each nested process stores only the entries of its own cyclic part.
        self.each_part(ctx, local, dir, &|x, k, v| unsafe { x.write(k, v) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fft::num::testing::{input, rel_error};

    /// The splits of `two_level_splits_match_rustfft` in single precision, where our passes
    /// take their portable loops (the vectorised ones are for f64): forward against rustfft
    /// in f64, and back.
    #[test]
    fn two_level_splits_in_single_precision() {
        let n = 1usize << 14;
        let x = input(n);
        let mut want = x.clone();
        f64::rustfft_plan(n, false).process(&mut want);
        for rows in [16, 32, 64] {
            let got = mbsp::run(2, |ctx| {
                let me = ctx.pid();
                let t = Arc::new(Tables::<f32>::with_rows(n, 2, me, false, rows));
                let mut plan = BspFft::with_tables(ctx, t, Exchange::Owned)?;
                let mine: Vec<Complex<f32>> = (me..n)
                    .step_by(2)
                    .map(|i| Complex::new(x[i].re as f32, x[i].im as f32))
                    .collect();
                let mut fwd = mine.clone();
                plan.forward(ctx, &mut fwd)?;
                let mut back = fwd.clone();
                plan.inverse(ctx, &mut back)?;
                plan.free(ctx)?;
                Ok((fwd, back, mine))
            })
            .unwrap();
            let wide = |v: &[Complex<f32>]| -> Vec<Complex<f64>> {
                v.iter()
                    .map(|c| Complex::new(c.re as f64, c.im as f64))
                    .collect()
            };
            for (me, (fwd, back, mine)) in got.iter().enumerate() {
                let want: Vec<Complex<f64>> = (me..n).step_by(2).map(|i| want[i]).collect();
                let case = format!("{rows} rows, f32, pid {me}");
                assert!(rel_error(&wide(fwd), &want) < 1e-5, "forward, {case}");
                assert!(
                    rel_error(&wide(back), &wide(mine)) < 1e-5,
                    "inverse, {case}"
                );
            }
        }
    }

    /// Splits in two levels (16, 32 and 64 rows for two processes) at lengths far below the
    /// ones `split::rows` gives them: forward against rustfft and back to the input, with
    /// both exchanges, three times on one plan (both parities of packs).
    #[test]
    fn two_level_splits_match_rustfft() {
        for rows in [16, 32, 64] {
            for exchange in [Exchange::Owned, Exchange::DirectGet] {
                for log in [13u32, 15] {
                    let n = 1usize << log;
                    let x = input(n);
                    let mut want = x.clone();
                    f64::rustfft_plan(n, false).process(&mut want);
                    let got = mbsp::run(2, |ctx| {
                        let me = ctx.pid();
                        let t = Arc::new(Tables::with_rows(n, 2, me, false, rows));
                        let mut plan = BspFft::with_tables(ctx, t, exchange)?;
                        let mine: Vec<Complex<f64>> = (me..n).step_by(2).map(|i| x[i]).collect();
                        let (mut fwd, mut back) = (mine.clone(), mine.clone());
                        for _ in 0..3 {
                            fwd.copy_from_slice(&mine);
                            plan.forward(ctx, &mut fwd)?;
                            back.copy_from_slice(&fwd);
                            plan.inverse(ctx, &mut back)?;
                        }
                        plan.free(ctx)?;
                        Ok((fwd, back, mine))
                    })
                    .unwrap();
                    for (me, (fwd, back, mine)) in got.iter().enumerate() {
                        let want: Vec<Complex<f64>> = (me..n).step_by(2).map(|i| want[i]).collect();
                        let case = format!("{rows} rows, {exchange:?}, n = 2^{log}, pid {me}");
                        assert!(rel_error(fwd, &want) < 1e-13, "forward, {case}");
                        assert!(rel_error(back, mine) < 1e-13, "inverse, {case}");
                    }
                }
            }
        }
    }
}
