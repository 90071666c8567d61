//! Distributed sparse matrix–vector multiplication `y = Ax` on a 2D partition: plain BSP,
//! high-performance, and hierarchical (packages → cores).
//!
//! [`SpmvPlan::new`] turns a matrix and its [`Distribution`] into one [`LocalSpmv`] per process,
//! once, outside the multiply: the process's nonzeros in CRS over its local rows and local
//! columns (indices into a local `x` buffer), the runs of `x` entries to fetch from each owner,
//! and the slots its partial sums take in each owner's receive buffer. Inside a run, the four
//! phases of the BSPlib paper's §5.4 / Bisseling's Algorithm 4.5 are:
//!
//! 1. fan-out: each process fetches the `x_j` it needs from their owners (one request per run
//!    of consecutive entries of one owner);
//! 2. local multiply `u = A_s x_s` over the local rows;
//! 3. fan-in: partial sums for rows owned elsewhere are packed per owner and sent, one
//!    communication per owner;
//! 4. summation: each owner adds its own partial sums and the received ones into `y`.
//!
//! Four variants run them:
//!
//! * [`Spmv`] — plain primitives: `get` for the fan-out (superstep 1), `put` for the fan-in
//!   (superstep 2, a lazy sync: each process declares the puts it receives, one per process
//!   that sums rows it owns, and waits for those processes only). `x` may be written right
//!   before the multiply.
//! * [`HpSpmv`] — `hpsend`/`hpmove` for the fan-in, and for the fan-out ([`Fanout`]) either one
//!   put per owner and reader, planned once, with both supersteps ending in lazy syncs, or
//!   `direct_get` straight from the owners' `x` (the default): one superstep per multiply, no
//!   buffering of `x`, `x` written before a sync (checked: see [`HpSpmv::x_mut`]).
//! * [`SharedSpmv`] — the multiply of processes that share the whole vectors
//!   ([`SharedVectors`], the caller's `x` and `y`): each process sums whole rows of `y`, whole
//!   cache lines of it (each line to the process that owns most of its rows), reading `x` in
//!   place (no fan-out copies) and writing `y` in place; no partial sums, no messages; one
//!   superstep. For callers that hold whole vectors (the Python package).
//! * [`HierSpmv`] — the Multi-BSP form: the plain variant over packages whose local multiply is
//!   a nested BSP run over the package's cores, on a partition of each package's part
//!   ([`HierPlan`]).
//!
//! All four are made the same way, `new(ctx, &plan)` in every process of a run of `plan`'s
//! size. All but [`SharedSpmv`] read and write their vectors the same way: [`Spmv::x_mut`] /
//! [`Spmv::x`] are this process's entries of `x` in the order of [`LocalSpmv::x_owned`];
//! `multiply` fills its `y` in the order of [`LocalSpmv::y_owned`].
//!
//! **The distributions of `x` and `y`.** `x` is distributed by the distribution's `x_owner`
//! (columns), `y` by its `y_owner` (rows); the partitioner chooses them independently, each to
//! balance its own phase. An iterative method that multiplies its own result (CG, power
//! iteration) wants them equal, so that a process's part of `y` is already its part of the next
//! `x`: partition with [`partition_square`](crate::sparse::partition::partition_square), which
//! gives `x_owned == y_owned` on every process. To move whole vectors in and out of a run,
//! [`SpmvPlan::scatter_x`] hands one out, [`SpmvPlan::gather_y`] / [`SpmvPlan::allgather_y`]
//! (and their `x` twins) collect one inside a run, and [`SpmvPlan::collect_y`] assembles the
//! parts a run returned.
//!
//! The local multiply reads its nonzeros in SELL-C-σ ([`sell`](self) module docs: four rows
//! summed at once, each in CRS order, so the sums are those of a CRS multiply, bit for bit).
//!
//! Cost per multiply, with `nz(s)` the nonzeros of process `s` and `h` the fan-out and fan-in
//! h-relations: `T = max_s 2 nz(s) + (h_fanout + h_fanin) g + q_fanout (g_get_msg - g) +
//! q_fanin (g_msg - g) + 2 l` (plain, `q` its requests: one get per run of `x` entries fetched
//! from one owner, one put per owner of partial sums, [`SpmvPlan::requests`]; its second `l`
//! is a lazy sync's, which waits only for a process's senders); the same with both `l` lazy ones and one put per
//! owner and reader (hp with puts, [`SpmvPlan::predict_puts`]); `... + l` with
//! `h_fanout g_direct + q_fanout (g_direct_msg - g_direct)` (hp with direct gets: one
//! `direct_get` per run).
//! Nothing is allocated per multiply.

use super::{CooMatrix, Distribution};
use mbsp::{Ctx, Reg};

mod build;
mod error;
mod guard;
mod hier;
mod hp;
mod rows;
mod sell;
mod share;
mod shared;
mod vectors;

pub use error::SpmvError;

/// The former name of [`SpmvError`], which mbsp-topology's placement `PlanError` shadowed in
/// programs that use both.
#[deprecated(note = "renamed `SpmvError` (mbsp::topology::PlanError is the placement's)")]
pub type PlanError = SpmvError;
pub use hier::{HierPlan, HierSpmv, row_blocks};
pub use hp::{Fanout, HpSpmv};
pub use share::BLOCKS as SHARED_BLOCKS;
pub use shared::{SharedSpmv, SharedVectors};

/// A run of `len` entries fetched from process `from`, from position `src` of its owned `x`
/// into position `dst` of the local `x` buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fetch {
    from: u32,
    src: u32,
    dst: u32,
    len: u32,
}

/// The partial sums for one owner: `len` words at `start` of the send buffer (the word before
/// them holds the sender's number, for the message variants), landing at `offset` of the
/// owner's receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Out {
    to: u32,
    start: u32,
    len: u32,
    offset: u32,
}

/// A received message that is not the partial-sum message a process expects (a misuse of the
/// message queue around a multiply; turned into the run's error by the caller).
#[derive(Debug)]
enum BadMessage {
    Empty,
    Foreign {
        bytes: usize,
        pid: usize,
    },
    Length {
        got: usize,
        from: u64,
        expected: u32,
    },
}

impl std::fmt::Display for BadMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            BadMessage::Empty => f.write_str("an empty message"),
            BadMessage::Foreign { bytes, pid } => write!(
                f,
                "a message of {bytes} bytes that is not a partial-sum message for process {pid}"
            ),
            BadMessage::Length {
                got,
                from,
                expected,
            } => write!(
                f,
                "{got} partial sums from process {from}, expected {expected}"
            ),
        }
    }
}

/// One process's share of the multiply, made by [`SpmvPlan::new`].
#[derive(Clone, Debug)]
pub struct LocalSpmv {
    /// Process number.
    pub pid: usize,
    /// Global indices of the `x` entries this process owns, ascending (the order of its `x`).
    pub x_owned: Vec<u32>,
    /// Global indices of the `y` entries this process owns, ascending (the order of its `y`).
    pub y_owned: Vec<u32>,
    /// The owned local rows (`..own_rows`) and the others, in SELL-C-σ over local columns.
    own: sell::Sell,
    other: sell::Sell,
    /// Local columns: the local `x` buffer holds the owned entries first (in the order of
    /// `x_owned`, so the buffer's head *is* this process's `x`, read in place), then the
    /// fetched ones, then one zero that padding entries read ([`Self::x_buffer_len`]).
    local_cols: usize,
    fetches: Vec<Fetch>,
    /// Local rows `..own_rows` are owned here, the others are summed elsewhere.
    own_rows: usize,
    /// Local row -> position in `y_owned` (owned rows) or in the send buffer (rows owned
    /// elsewhere).
    dest: Vec<u32>,
    /// Owned rows without a nonzero here (positions in `y_owned`): zero before the fan-in.
    y_empty: Vec<u32>,
    /// Per destination process, ascending.
    outs: Vec<Out>,
    send_len: usize,
    /// Receive slot -> position in `y_owned`.
    recv_to_y: Vec<u32>,
    /// Per sender, ascending: (sender, offset in the receive buffer, length).
    recv_from: Vec<(u32, u32, u32)>,
    /// Processes whose `x` this one reads, ascending.
    sources: Vec<u32>,
    /// Processes that read this one's `x`, ascending.
    readers: Vec<u32>,
}

impl LocalSpmv {
    /// Number of nonzeros stored here.
    pub fn nnz(&self) -> usize {
        self.own.nnz() + self.other.nnz()
    }

    /// Number of local rows (rows with a nonzero here).
    pub fn local_rows(&self) -> usize {
        self.dest.len()
    }

    /// Number of local columns (the `x` entries the local multiply reads).
    pub fn local_cols(&self) -> usize {
        self.local_cols
    }

    /// Length of the local `x` buffer: the local columns and the zero that padding reads.
    fn x_buffer_len(&self) -> usize {
        self.local_cols + 1
    }

    /// This process's nonzeros as a `local_rows × local_cols` matrix in local indices (what a
    /// nested level partitions further).
    pub fn matrix(&self) -> CooMatrix {
        let mut e: Vec<(u32, u32, f64)> = self.own.entries().chain(self.other.entries()).collect();
        e.sort_unstable_by_key(|&(r, c, _)| (r, c));
        let mut a = CooMatrix::empty(self.local_rows(), self.local_cols());
        for (r, c, v) in e {
            a.row_idx.push(r);
            a.col_idx.push(c);
            a.vals.push(v);
        }
        a
    }

    /// Words this process receives in the fan-out and sends in the fan-in.
    pub fn traffic(&self) -> (usize, usize) {
        let fetched = self.fetches.iter().map(|f| f.len as usize).sum();
        (fetched, self.outs.iter().map(|o| o.len as usize).sum())
    }

    /// Seconds of this process's local multiply (phase 2 alone, on this thread, `x` all ones):
    /// the best of three batches of `multiplies`. With the plan of one process this is the
    /// sequential kernel's time, the `seconds_per_nz · nnz` that [`SpmvPlan::predict`] wants.
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (0, 1, 2.0), (1, 1, 3.0)]).unwrap();
    /// let d = Distribution { p: 1, nz_part: vec![0; 3], x_owner: vec![0; 2], y_owner: vec![0; 2] };
    /// let t = SpmvPlan::new(&a, &d).unwrap().procs[0].time_local_multiply(10);
    /// assert!(t > 0.0 && t < 1.0);
    /// ```
    pub fn time_local_multiply(&self, multiplies: usize) -> f64 {
        let mut buffers = self.local_buffers();
        let n = multiplies.max(1);
        (0..3)
            .map(|_| {
                let t = std::time::Instant::now();
                self.local_multiplies(n, &mut buffers);
                t.elapsed().as_secs_f64() / n as f64
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// Runs `multiplies` local multiplies (phase 2 alone, on this thread, `x` all ones),
    /// untimed: for a caller that times them its own way, every process of a run at once
    /// between two syncs, say, so that the slowest process's time is the local phase's.
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (0, 1, 2.0), (1, 1, 3.0)]).unwrap();
    /// let d = Distribution { p: 1, nz_part: vec![0; 3], x_owner: vec![0; 2], y_owner: vec![0; 2] };
    /// SpmvPlan::new(&a, &d).unwrap().procs[0].run_local_multiplies(10);
    /// ```
    pub fn run_local_multiplies(&self, multiplies: usize) {
        let mut buffers = self.local_buffers();
        self.local_multiplies(multiplies, &mut buffers);
    }

    /// `x` (all ones, its local columns' slot zero), `y` and the send buffer of the local
    /// multiplies that [`time_local_multiply`](Self::time_local_multiply) and
    /// [`run_local_multiplies`](Self::run_local_multiplies) run.
    fn local_buffers(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut x = vec![1.0; self.x_buffer_len()];
        x[self.local_cols] = 0.0;
        (x, vec![0.0; self.y_owned.len()], self.send_buffer())
    }

    fn local_multiplies(&self, n: usize, (x, y, send): &mut (Vec<f64>, Vec<f64>, Vec<f64>)) {
        for _ in 0..n {
            self.multiply_local(std::hint::black_box(x), y, send);
            std::hint::black_box(&mut *y);
        }
    }

    /// A send buffer with each destination's header word (the sender's number) in place.
    fn send_buffer(&self) -> Vec<f64> {
        let mut send = vec![0.0; self.send_len];
        for o in &self.outs {
            send[o.start as usize - 1] = f64::from_bits(self.pid as u64);
        }
        send
    }

    /// The local multiply: the sums of owned rows go to `y` (owned rows without nonzeros here
    /// get zero), the others to their slots in `send`.
    fn multiply_local(&self, xb: &[f64], y: &mut [f64], send: &mut [f64]) {
        let dest = &self.dest[..];
        self.multiply_local_rows(xb, |r, s| y[dest[r] as usize] = s, send);
        for &q in &self.y_empty {
            y[q as usize] = 0.0;
        }
    }

    /// The local multiply with the sum of owned local row `r` written to `y[map[r]]` and the
    /// others to their slots in `send` (owned rows without nonzeros here are left alone): what
    /// [`multiply_local`](Self::multiply_local) does with `map` = `dest`.
    ///
    /// Not inlined on purpose: the kernel is only fast where `y` and `map` are plain slices in
    /// its own frame. Inlined into a caller's closure that captures them (the nested run of
    /// [`HierSpmv`]), the compiler reloaded them from the captured environment at every row,
    /// which made the multiply markedly slower (docs/benchmarks.md, "hier with one package on
    /// top").
    #[inline(never)]
    fn multiply_local_mapped(&self, xb: &[f64], y: &mut [f64], map: &[u32], send: &mut [f64]) {
        self.multiply_local_rows(xb, |r, s| y[map[r] as usize] = s, send);
    }

    /// The local multiply with the sum of owned local row `r` (`..own_rows`) handed to
    /// `own_row(r, sum)`, for callers that map local rows to their destinations themselves;
    /// owned rows without nonzeros here (`y_empty`) are left to the caller.
    #[inline(always)]
    fn multiply_local_rows(&self, xb: &[f64], own_row: impl FnMut(usize, f64), send: &mut [f64]) {
        self.own.multiply(xb, own_row);
        let dest = &self.dest[..];
        self.other.multiply(xb, |r, s| send[dest[r] as usize] = s);
    }

    /// Hands the partial sums of one received message (its payload, the sender's number first)
    /// to `add(q, sum)`, `q` the owned row's position in `y_owned`; `Err` saying how when the
    /// message is not one this process expects.
    fn add_message_with(
        &self,
        slot_of: &[u32],
        payload: &[f64],
        mut add: impl FnMut(usize, f64),
    ) -> Result<(), BadMessage> {
        let Some((&head, sums)) = payload.split_first() else {
            return Err(BadMessage::Empty);
        };
        let from = head.to_bits();
        let k = usize::try_from(from)
            .ok()
            .and_then(|f| slot_of.get(f))
            .copied()
            .unwrap_or(u32::MAX);
        if k == u32::MAX {
            return Err(BadMessage::Foreign {
                bytes: payload.len() * 8,
                pid: self.pid,
            });
        }
        let (_, off, len) = self.recv_from[k as usize];
        if sums.len() != len as usize {
            return Err(BadMessage::Length {
                got: sums.len(),
                from,
                expected: len,
            });
        }
        let slots = &self.recv_to_y[off as usize..(off + len) as usize];
        for (&q, &v) in slots.iter().zip(sums) {
            add(q as usize, v);
        }
        Ok(())
    }

    /// The fan-in's sends: one `hpsend` per owner of partial sums, straight from `send`
    /// (filled by the local multiply; each owner's block is preceded by this process's number,
    /// so no tag is needed and the caller's tag size is left alone). `tag` is a zero tag of
    /// the current tag size, kept by the caller between multiplies.
    ///
    /// # Safety
    /// `send` is neither changed nor freed before the next sync (`hpsend` reads it then).
    unsafe fn send_partial_sums(
        &self,
        ctx: &mut Ctx,
        tag: &mut Vec<u8>,
        send: &[f64],
    ) -> mbsp::Result<()> {
        let tagsize = ctx.tagsize();
        if tag.len() != tagsize {
            *tag = vec![0; tagsize];
        }
        for o in &self.outs {
            let (start, len) = (o.start as usize - 1, o.len as usize + 1);
            let payload: &[u8] = bytemuck::cast_slice(&send[start..start + len]);
            // SAFETY: `send` stays as it is until the sync (the caller's promise).
            unsafe { ctx.hpsend(o.to as usize, tag, payload)? };
        }
        Ok(())
    }

    /// The fan-in's receives, after the sync: moves every partial-sum message out of the queue
    /// and hands each sum for owned row `q` (position in `y_owned`) to `add(q, sum)`. `slot_of`
    /// is [`slot_of`](Self::slot_of)'s table; `op` names the multiply in errors.
    fn receive_partial_sums(
        &self,
        ctx: &Ctx,
        op: &'static str,
        slot_of: &[u32],
        mut add: impl FnMut(usize, f64),
    ) -> mbsp::Result<()> {
        for _ in 0..self.recv_from.len() {
            let Some(m) = ctx.hpmove()? else {
                return Err(ctx.misuse_error(
                    op,
                    format!(
                        "process {} expected {} partial-sum messages and the queue ran dry",
                        self.pid,
                        self.recv_from.len()
                    ),
                ));
            };
            if !m.payload.len().is_multiple_of(8)
                || !(m.payload.as_ptr() as usize).is_multiple_of(8)
            {
                return Err(ctx.misuse_error(op, "a foreign message in the queue"));
            }
            self.add_message_with(slot_of, m.payload_as::<f64>(), &mut add)
                .map_err(|e| {
                    ctx.misuse_error(
                        op,
                        format!("{e} (messages sent in the multiply's superstep by the caller?)"),
                    )
                })?;
        }
        Ok(())
    }

    /// Sender number -> index in `recv_from` (`u32::MAX` for processes that send nothing here).
    fn slot_of(&self, p: usize) -> Vec<u32> {
        let mut slot_of = vec![u32::MAX; p];
        for (k, &(s, _, _)) in self.recv_from.iter().enumerate() {
            slot_of[s as usize] = k as u32;
        }
        slot_of
    }

    fn check_y(&self, ctx: &Ctx, op: &'static str, y: &[f64]) -> mbsp::Result<()> {
        if y.len() == self.y_owned.len() {
            return Ok(());
        }
        Err(ctx.misuse_error(
            op,
            format!(
                "y has {} entries; process {} owns {}",
                y.len(),
                self.pid,
                self.y_owned.len()
            ),
        ))
    }
}
/// The multiply of one matrix under one distribution, cut into per-process parts.
#[derive(Clone, Debug)]
pub struct SpmvPlan {
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns of the matrix.
    pub cols: usize,
    /// One part per process.
    pub procs: Vec<LocalSpmv>,
    guard: guard::HpGuard,
    /// The blocks of owned rows that [`SharedSpmv`]'s processes share.
    shares: share::Shares,
    /// Local columns are the matrix's columns (a nested level's plan, see `build`).
    shared_x: bool,
}

impl SpmvPlan {
    /// Cuts `a` by `d` into per-process parts; checks that they belong together.
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, spmv::SpmvPlan, partition::{partition, Options}};
    /// let a = CooMatrix::new(3, 3, vec![(0, 0, 1.0), (1, 1, 2.0), (2, 0, 3.0), (2, 2, 4.0)]).unwrap();
    /// let d = partition(&a, 2, &Options::default()).unwrap().dist;
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// assert_eq!(plan.procs.iter().map(|l| l.nnz()).sum::<usize>(), 4);
    /// ```
    pub fn new(a: &CooMatrix, d: &Distribution) -> Result<Self, SpmvError> {
        Self::build(a, d, false)
    }

    /// Number of processes.
    pub fn p(&self) -> usize {
        self.procs.len()
    }

    /// An error unless the run has the plan's number of processes.
    fn check_run(&self, ctx: &Ctx, op: &'static str) -> mbsp::Result<()> {
        if self.p() == ctx.nprocs() {
            return Ok(());
        }
        Err(ctx.misuse_error(
            op,
            format!(
                "the plan is for {} processes, the run has {}",
                self.p(),
                ctx.nprocs()
            ),
        ))
    }

    /// The h-relations of one multiply: (fan-out, fan-in), each the largest over the processes
    /// of the words sent or received in that phase.
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// // Row 0 on process 0 needs x1, owned by process 1: one word out, one word back.
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (0, 1, 2.0), (1, 1, 3.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![0, 0, 1], x_owner: vec![0, 1], y_owner: vec![0, 1] };
    /// assert_eq!(SpmvPlan::new(&a, &d).unwrap().h_relations(), (1, 0));
    /// ```
    pub fn h_relations(&self) -> (usize, usize) {
        let p = self.p();
        let (mut out_x, mut in_x) = (vec![0usize; p], vec![0usize; p]);
        let (mut out_y, mut in_y) = (vec![0usize; p], vec![0usize; p]);
        for l in &self.procs {
            for f in &l.fetches {
                in_x[l.pid] += f.len as usize;
                out_x[f.from as usize] += f.len as usize;
            }
            for o in &l.outs {
                out_y[l.pid] += o.len as usize;
                in_y[o.to as usize] += o.len as usize;
            }
        }
        let h = |a: &[usize], b: &[usize]| a.iter().zip(b).map(|(x, y)| *x.max(y)).max();
        (h(&out_x, &in_x).unwrap_or(0), h(&out_y, &in_y).unwrap_or(0))
    }

    /// The requests of one plain multiply: (fan-out, fan-in), each the largest over the
    /// processes of the requests it issues or serves in that phase: one get per run of
    /// consecutive `x` entries fetched from one owner, one put per owner of partial sums.
    /// Where the entries a process needs lie scattered in their owner's `x` (a power-law
    /// graph), a get moves a word or two and costs what a request costs, not `g` per word.
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// // Process 0 needs x1 and x3 of process 1, not x2: two runs, two gets.
    /// let a = CooMatrix::new(2, 4, vec![(0, 0, 1.0), (0, 1, 2.0), (0, 3, 3.0), (1, 2, 4.0)]).unwrap();
    /// let d = Distribution {
    ///     p: 2,
    ///     nz_part: vec![0, 0, 0, 1],
    ///     x_owner: vec![0, 1, 1, 1],
    ///     y_owner: vec![0, 1],
    /// };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// assert_eq!(plan.h_relations(), (2, 0));
    /// assert_eq!(plan.requests(), (2, 0));
    /// ```
    pub fn requests(&self) -> (usize, usize) {
        let p = self.p();
        let (mut out_x, mut in_x) = (vec![0usize; p], vec![0usize; p]);
        let (mut out_y, mut in_y) = (vec![0usize; p], vec![0usize; p]);
        for l in &self.procs {
            in_x[l.pid] += l.fetches.len();
            for f in &l.fetches {
                out_x[f.from as usize] += 1;
            }
            out_y[l.pid] += l.outs.len();
            for o in &l.outs {
                in_y[o.to as usize] += 1;
            }
        }
        let h = |a: &[usize], b: &[usize]| a.iter().zip(b).map(|(x, y)| *x.max(y)).max();
        (h(&out_x, &in_x).unwrap_or(0), h(&out_y, &in_y).unwrap_or(0))
    }

    /// The BSP-predicted seconds of one multiply (the module's cost formula) with the machine
    /// parameters `params` and a local multiply that takes `seconds_per_nz` per nonzero (the
    /// local kernel's measured rate, e.g. from [`LocalSpmv::time_local_multiply`] on a plan of
    /// one process: SpMV is memory bound, so a flop rate would mislead):
    /// `max_s nz(s) t_nz + (h_fanout + h_fanin) g + q_fanout (g_get_msg - g) + q_fanin (g_msg -
    /// g) + 2 l` for the plain variant, with `q` its [`requests`](Self::requests) (each get
    /// costs `g_get_msg` and each put `g_msg`, the per-request g's, where its words would cost
    /// less: [`Params::time_with_gets`]); the
    /// high-performance variant with direct gets (`hp`: [`Fanout::DirectGet`]) reads `x` once,
    /// one `direct_get` per run of entries (`g_direct` per word and `g_direct_msg - g_direct`
    /// per get: [`Params::direct_gets`]), and takes one superstep; with puts,
    /// [`predict_puts`](Self::predict_puts).
    ///
    /// [`Params::time_with_gets`]: crate::cost::Params::time_with_gets
    /// [`Params::direct_gets`]: crate::cost::Params::direct_gets
    ///
    /// ```
    /// use mbsp_algorithms::{cost::Params, sparse::{CooMatrix, Distribution, spmv::SpmvPlan}};
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (0, 1, 2.0), (1, 1, 3.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![0, 0, 1], x_owner: vec![0, 1], y_owner: vec![0, 1] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// let params = Params {
    ///     l: 1e-6, g: 1e-9, g_msg: 5e-9, g_get_msg: 7e-9, g_direct: 0.5e-9,
    ///     g_direct_msg: 3e-9, ..Params::DEFAULT
    /// };
    /// // Process 0 has 2 nonzeros; one word is fetched, by one get (a request: g_get_msg).
    /// let t = plan.predict(&params, 1e-9, false);
    /// assert!((t - (2e-9 + 1e-9 + 6e-9 + 2e-6)).abs() < 1e-18);
    /// // hp: one direct get of one word (g_direct_msg in all), one superstep.
    /// let t = plan.predict(&params, 1e-9, true);
    /// assert!((t - (2e-9 + 3e-9 + 1e-6)).abs() < 1e-18);
    /// ```
    pub fn predict(&self, params: &crate::cost::Params, seconds_per_nz: f64, hp: bool) -> f64 {
        let work = self.most_nnz() as f64;
        let (fan_out, fan_in) = self.h_relations();
        let (fan_out, fan_in) = (fan_out as f64, fan_in as f64);
        let (q_out, q_in) = self.requests();
        let comm = if hp {
            params.direct_gets(fan_out, q_out as f64) + fan_in * params.g + params.l
        } else {
            params.time_with_gets(2, fan_out + fan_in, q_in as f64, q_out as f64)
        };
        work * seconds_per_nz + comm
    }

    /// The largest part's nonzeros (0 for a plan of no nonzeros): the local phase's critical
    /// path, by which [`predict`](Self::predict) charges the time per nonzero.
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (0, 1, 2.0), (1, 1, 3.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![0, 0, 1], x_owner: vec![0, 1], y_owner: vec![0, 1] };
    /// assert_eq!(SpmvPlan::new(&a, &d).unwrap().most_nnz(), 2);
    /// ```
    pub fn most_nnz(&self) -> usize {
        self.procs.iter().map(LocalSpmv::nnz).max().unwrap_or(0)
    }

    /// [`predict`](Self::predict) for the hp multiply whose fan-out is puts
    /// ([`Fanout::Puts`]): the plain formula, but with one put per owner and reader (the
    /// runs packed into it), not a request per run.
    ///
    /// ```
    /// use mbsp_algorithms::{cost::Params, sparse::{CooMatrix, Distribution, spmv::SpmvPlan}};
    /// // Process 0 needs x1 and x3 of process 1: two runs, one put.
    /// let a = CooMatrix::new(2, 4, vec![(0, 0, 1.0), (0, 1, 2.0), (0, 3, 3.0), (1, 2, 4.0)]).unwrap();
    /// let d = Distribution {
    ///     p: 2,
    ///     nz_part: vec![0, 0, 0, 1],
    ///     x_owner: vec![0, 1, 1, 1],
    ///     y_owner: vec![0, 1],
    /// };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// let params = Params { l: 1e-6, g: 1e-9, g_msg: 5e-9, ..Params::DEFAULT };
    /// // 3 nonzeros on process 0 at 1 ns; 2 words by one put (g_msg - g on top of 2 g); 2 l.
    /// let t = plan.predict_puts(&params, 1e-9);
    /// assert!((t - (3e-9 + 2e-9 + 4e-9 + 2e-6)).abs() < 1e-18);
    /// assert!(plan.predict(&params, 1e-9, false) > t, "the plain multiply's two gets");
    /// ```
    pub fn predict_puts(&self, params: &crate::cost::Params, seconds_per_nz: f64) -> f64 {
        let work = self.most_nnz() as f64;
        let (fan_out, fan_in) = self.h_relations();
        let (_, q_in) = self.requests();
        let q_out = self
            .procs
            .iter()
            .map(|l| l.sources.len().max(l.readers.len()))
            .max()
            .unwrap_or(0);
        work * seconds_per_nz + params.time_of(2, (fan_out + fan_in) as f64, (q_out + q_in) as f64)
    }
}

/// The registered buffer of one process's plain multiply, made once per run
/// ([`Spmv::new`]).
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, spmv::{Spmv, SpmvPlan}, partition::{partition, Options}};
/// // y = A x with A = [[2, 1], [0, 3]], x = (1, 1).
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (0, 1, 1.0), (1, 1, 3.0)]).unwrap();
/// let plan = SpmvPlan::new(&a, &partition(&a, 2, &Options::default()).unwrap().dist).unwrap();
/// let parts = mbsp::run(2, |ctx| {
///     let mut spmv = Spmv::new(ctx, &plan)?;
///     spmv.x_mut(ctx)?.fill(1.0);
///     let mut y = vec![0.0; spmv.local().y_owned.len()];
///     spmv.multiply(ctx, &mut y)?;
///     Ok(y)
/// }).unwrap();
/// assert_eq!(plan.collect_y(&parts).unwrap(), vec![3.0, 3.0]);
/// ```
pub struct Spmv<'p> {
    local: &'p LocalSpmv,
    /// The local `x` buffer: this process's `x`, then the fetched entries.
    x: Reg<f64>,
    recv: Reg<f64>,
    send: Vec<f64>,
}

impl<'p> Spmv<'p> {
    /// Registers this process's local `x` buffer (its `x` at the head) and its receive buffer
    /// (one superstep). Every process of the run calls it with the same plan (its part is
    /// `plan.procs[pid]`), as [`HpSpmv::new`].
    pub fn new(ctx: &mut Ctx, plan: &'p SpmvPlan) -> mbsp::Result<Self> {
        plan.check_run(ctx, "spmv")?;
        Self::for_part(ctx, &plan.procs[ctx.pid()])
    }

    /// [`Spmv::new`] with this process's part given directly (the top level of
    /// [`HierSpmv`], whose plan is a [`HierPlan`]).
    fn for_part(ctx: &mut Ctx, local: &'p LocalSpmv) -> mbsp::Result<Self> {
        let x = ctx.push_reg(vec![0.0; local.x_buffer_len()])?;
        let recv = ctx.push_reg(vec![0.0; local.recv_to_y.len()])?;
        ctx.sync()?;
        Ok(Spmv {
            local,
            x,
            recv,
            send: local.send_buffer(),
        })
    }

    /// This process's part of the plan (its `x_owned` and `y_owned`).
    pub fn local(&self) -> &'p LocalSpmv {
        self.local
    }

    /// This process's owned entries of `x` (in the order of `x_owned`), to fill before a
    /// multiply.
    pub fn x_mut<'a>(&'a mut self, ctx: &'a Ctx) -> mbsp::Result<&'a mut [f64]> {
        let own = self.local.x_owned.len();
        Ok(&mut ctx.local_mut(&mut self.x)?[..own])
    }

    /// This process's owned entries of `x` (in the order of `x_owned`), to read: what the last
    /// multiply used, unchanged by it.
    ///
    /// ```
    /// # use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::{Spmv, SpmvPlan}};
    /// # let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (1, 1, 3.0)]).unwrap();
    /// # let d = Distribution { p: 2, nz_part: vec![0, 1], x_owner: vec![0, 1], y_owner: vec![0, 1] };
    /// # let plan = SpmvPlan::new(&a, &d).unwrap();
    /// mbsp::run(2, |ctx| {
    ///     let mut spmv = Spmv::new(ctx, &plan)?;
    ///     spmv.x_mut(ctx)?.fill(1.5);
    ///     let mut y = vec![0.0; spmv.local().y_owned.len()];
    ///     spmv.multiply(ctx, &mut y)?;
    ///     assert_eq!(spmv.x(ctx)?, &[1.5]); // one entry per process here
    ///     Ok(())
    /// })?;
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn x<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [f64]> {
        let own = self.local.x_owned.len();
        Ok(&ctx.local(&self.x)?[..own])
    }

    /// Deregisters the buffers (effective at the next sync), so that a long run can make and
    /// free multiplies of many plans; every process calls it.
    ///
    /// ```
    /// # use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::{Spmv, SpmvPlan}};
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (1, 1, 3.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![0, 1], x_owner: vec![0, 1], y_owner: vec![0, 1] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// mbsp::run(2, |ctx| {
    ///     for _ in 0..3 {
    ///         let mut spmv = Spmv::new(ctx, &plan)?;
    ///         spmv.x_mut(ctx)?.fill(1.0);
    ///         let mut y = vec![0.0; 1];
    ///         spmv.multiply(ctx, &mut y)?;
    ///         spmv.free(ctx)?;
    ///         ctx.sync()?;
    ///     }
    ///     Ok(())
    /// })?;
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn free(self, ctx: &mut Ctx) -> mbsp::Result<()> {
        ctx.pop_reg(&self.x)?;
        ctx.pop_reg(&self.recv)
    }

    /// `y = A x`: `y` receives this process's owned entries (in the order of `y_owned`). Two
    /// supersteps; every process must call it.
    pub fn multiply(&mut self, ctx: &mut Ctx, y: &mut [f64]) -> mbsp::Result<()> {
        let l = self.local;
        self.multiply_with(ctx, y, |_, xb, y, send| {
            l.multiply_local(xb, y, send);
            Ok(())
        })
    }

    /// The multiply with the local phase done by `local(ctx, x buffer, y, send buffer)`, which
    /// must leave in `y` the sums of the owned local rows (zero for owned rows without
    /// nonzeros here) and in `send` those of the other local rows.
    fn multiply_with(
        &mut self,
        ctx: &mut Ctx,
        y: &mut [f64],
        local: impl FnOnce(&Ctx, &[f64], &mut [f64], &mut [f64]) -> mbsp::Result<()>,
    ) -> mbsp::Result<()> {
        let l = self.local;
        l.check_y(ctx, "spmv multiply", y)?;
        // Fan-out (the owned entries are in place already).
        for f in &l.fetches {
            let (src, len) = (f.src as usize, f.len as usize);
            ctx.get(
                f.from as usize,
                &self.x,
                src..src + len,
                &self.x,
                f.dst as usize,
            )?;
        }
        ctx.sync()?;
        local(ctx, ctx.local(&self.x)?, y, &mut self.send)?;
        // Fan-in.
        for o in &l.outs {
            let (start, len) = (o.start as usize, o.len as usize);
            ctx.put(
                o.to as usize,
                &self.send[start..start + len],
                &self.recv,
                o.offset as usize,
            )?;
        }
        // The plan knows every count: one put from each sender (a lazy sync waits for those
        // senders only).
        ctx.declare_incoming(l.recv_from.len())?;
        ctx.sync()?;
        let recv = ctx.local(&self.recv)?;
        for (slot, &q) in l.recv_to_y.iter().enumerate() {
            y[q as usize] += recv[slot];
        }
        Ok(())
    }
}
