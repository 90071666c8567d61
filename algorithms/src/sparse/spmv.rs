//! Distributed sparse matrix–vector multiplication `y = Ax` on a 2D partition (plain BSP).
//!
//! [`SpmvPlan::new`] turns a matrix and its [`Distribution`] into one [`LocalSpmv`] per process,
//! once, outside the multiply: the process's nonzeros in CRS over its local rows and local
//! columns (indices into a local `x` buffer), the runs of `x` entries to fetch from each owner,
//! and the slots its partial sums take in each owner's receive buffer. Inside a run,
//! [`Spmv::multiply`] does the four phases of the BSPlib paper's §5.4 / Bisseling's Algorithm
//! 4.5 in two supersteps:
//!
//! 1. fan-out: each process gets the `x_j` it needs from their owners (one `get` per run of
//!    consecutive entries of one owner) — superstep 1;
//! 2. local multiply `u = A_s x_s` over the local rows;
//! 3. fan-in: partial sums for rows owned elsewhere are packed per owner and put, one `put` per
//!    owner, into the owner's receive buffer — superstep 2;
//! 4. summation: each owner adds its own partial sums and the received ones into `y`.
//!
//! Cost per multiply: `2 nz(s)` flops locally, `h_fanout + h_fanin` words, two supersteps:
//! `T = max_s 2 nz(s) + (h_fanout + h_fanin) g + 2 l`. Nothing is allocated per multiply.

use super::{CooMatrix, Distribution};
use mbsp::{Ctx, Reg};

/// A run of `len` entries fetched from process `from`, from position `src` of its owned `x`
/// into position `dst` of the local `x` buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fetch {
    from: u32,
    src: u32,
    dst: u32,
    len: u32,
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
    row_ptr: Vec<u32>,
    col: Vec<u32>,
    val: Vec<f64>,
    /// Owned columns as runs (local start, start in `x_owned`, length): copied, not fetched.
    own_x: Vec<(u32, u32, u32)>,
    fetches: Vec<Fetch>,
    /// Local row -> position in `y_owned` (owned rows) or in `send` (rows owned elsewhere).
    row_dest: Vec<RowDest>,
    /// Per destination process: (process, start in `send`, length, offset in its receive
    /// buffer).
    puts: Vec<(u32, u32, u32, u32)>,
    send_len: usize,
    /// Receive slot -> position in `y_owned`.
    recv_to_y: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
enum RowDest {
    Own(u32),
    Send(u32),
}

impl LocalSpmv {
    /// Number of nonzeros stored here.
    pub fn nnz(&self) -> usize {
        self.val.len()
    }

    /// Number of local columns (the length of the local `x` buffer).
    pub fn local_cols(&self) -> usize {
        let own: usize = self.own_x.iter().map(|r| r.2 as usize).sum();
        own + self.fetches.iter().map(|f| f.len as usize).sum::<usize>()
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
}

/// Position of each global index in its owner's ascending list of owned indices.
fn positions(owner: &[u32], p: usize) -> (Vec<Vec<u32>>, Vec<u32>) {
    let mut owned: Vec<Vec<u32>> = vec![Vec::new(); p];
    let mut pos = vec![0u32; owner.len()];
    for (i, &s) in owner.iter().enumerate() {
        pos[i] = owned[s as usize].len() as u32;
        owned[s as usize].push(i as u32);
    }
    (owned, pos)
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
    pub fn new(a: &CooMatrix, d: &Distribution) -> Result<Self, String> {
        a.validate().map_err(|e| format!("spmv plan: {e}"))?;
        let p = d.p;
        if d.nz_part.len() != a.nnz() || d.x_owner.len() != a.cols || d.y_owner.len() != a.rows {
            return Err(format!(
                "spmv plan: the distribution is for another matrix ({} nonzero parts, {} x owners, \
                 {} y owners; the matrix is {} x {} with {} nonzeros)",
                d.nz_part.len(),
                d.x_owner.len(),
                d.y_owner.len(),
                a.rows,
                a.cols,
                a.nnz()
            ));
        }
        if let Some(&s) = d
            .nz_part
            .iter()
            .chain(&d.x_owner)
            .chain(&d.y_owner)
            .find(|&&s| s as usize >= p)
        {
            return Err(format!("spmv plan: part {s} is not below p = {p}"));
        }
        let (x_owned, x_pos) = positions(&d.x_owner, p);
        let (y_owned, y_pos) = positions(&d.y_owner, p);
        // Nonzeros of each process, sorted by (row, column).
        let mut mine: Vec<Vec<u32>> = vec![Vec::new(); p];
        for (k, &s) in d.nz_part.iter().enumerate() {
            mine[s as usize].push(k as u32);
        }
        // Receive slots: owner t gets, from each sender s (ascending), one slot per row of s
        // that t owns, in row order.
        let mut recv_len = vec![0u32; p];
        let mut procs: Vec<LocalSpmv> = Vec::with_capacity(p);
        let mut recv_to_y: Vec<Vec<u32>> = vec![Vec::new(); p];
        for (s, nz) in mine.iter_mut().enumerate() {
            nz.sort_unstable_by_key(|&k| (a.row_idx[k as usize], a.col_idx[k as usize]));
            // Local columns: sorted by (owner, position at owner), so fetches coalesce.
            let mut cols: Vec<u32> = nz.iter().map(|&k| a.col_idx[k as usize]).collect();
            cols.sort_unstable_by_key(|&j| (d.x_owner[j as usize], x_pos[j as usize], j));
            cols.dedup();
            let mut local_col = std::collections::HashMap::with_capacity(cols.len());
            let mut own_x: Vec<(u32, u32, u32)> = Vec::new();
            let mut fetches: Vec<Fetch> = Vec::new();
            for (l, &j) in cols.iter().enumerate() {
                local_col.insert(j, l as u32);
                let (o, q) = (d.x_owner[j as usize], x_pos[j as usize]);
                if o as usize == s {
                    match own_x.last_mut() {
                        Some(r) if r.0 + r.2 == l as u32 && r.1 + r.2 == q => r.2 += 1,
                        _ => own_x.push((l as u32, q, 1)),
                    }
                } else {
                    match fetches.last_mut() {
                        Some(f)
                            if f.from == o && f.src + f.len == q && f.dst + f.len == l as u32 =>
                        {
                            f.len += 1
                        }
                        _ => fetches.push(Fetch {
                            from: o,
                            src: q,
                            dst: l as u32,
                            len: 1,
                        }),
                    }
                }
            }
            let mut row_ptr = vec![0u32];
            let mut col = Vec::with_capacity(nz.len());
            let mut val = Vec::with_capacity(nz.len());
            let mut rows: Vec<u32> = Vec::new();
            for &k in nz.iter() {
                let i = a.row_idx[k as usize];
                if rows.last() != Some(&i) {
                    if !rows.is_empty() {
                        row_ptr.push(col.len() as u32);
                    }
                    rows.push(i);
                }
                col.push(local_col[&a.col_idx[k as usize]]);
                val.push(a.vals[k as usize]);
            }
            if !rows.is_empty() {
                row_ptr.push(col.len() as u32);
            }
            // Rows owned elsewhere: packed per owner (ascending owner, then row).
            let mut remote: Vec<(u32, usize)> = rows
                .iter()
                .enumerate()
                .filter(|&(_, &i)| d.y_owner[i as usize] as usize != s)
                .map(|(r, &i)| (d.y_owner[i as usize], r))
                .collect();
            remote.sort_unstable();
            let mut row_dest: Vec<RowDest> = rows
                .iter()
                .map(|&i| RowDest::Own(y_pos[i as usize]))
                .collect();
            let mut puts: Vec<(u32, u32, u32, u32)> = Vec::new();
            for (slot, &(t, r)) in remote.iter().enumerate() {
                row_dest[r] = RowDest::Send(slot as u32);
                match puts.last_mut() {
                    Some(put) if put.0 == t => put.2 += 1,
                    _ => puts.push((t, slot as u32, 1, recv_len[t as usize])),
                }
                recv_to_y[t as usize].push(y_pos[rows[r] as usize]);
            }
            for put in &puts {
                recv_len[put.0 as usize] += put.2;
            }
            procs.push(LocalSpmv {
                pid: s,
                x_owned: x_owned[s].clone(),
                y_owned: y_owned[s].clone(),
                row_ptr,
                col,
                val,
                own_x,
                fetches,
                row_dest,
                send_len: remote.len(),
                puts,
                recv_to_y: Vec::new(),
            });
        }
        for (s, r) in recv_to_y.into_iter().enumerate() {
            procs[s].recv_to_y = r;
        }
        Ok(SpmvPlan {
            rows: a.rows,
            cols: a.cols,
            procs,
        })
    }
}

/// The registered buffers of one process's multiply, made once per run ([`Spmv::new`]).
pub struct Spmv<'p> {
    local: &'p LocalSpmv,
    x: Reg<f64>,
    xbuf: Reg<f64>,
    recv: Reg<f64>,
    send: Vec<f64>,
}

impl<'p> Spmv<'p> {
    /// Registers this process's `x`, its local `x` buffer and its receive buffer (one
    /// superstep). Every process of the run calls it with its own part of one plan.
    pub fn new(ctx: &mut Ctx, local: &'p LocalSpmv) -> mbsp::Result<Self> {
        let x = ctx.push_reg(vec![0.0; local.x_owned.len()])?;
        let xbuf = ctx.push_reg(vec![0.0; local.local_cols()])?;
        let recv = ctx.push_reg(vec![0.0; local.recv_to_y.len()])?;
        ctx.sync()?;
        Ok(Spmv {
            local,
            x,
            xbuf,
            recv,
            send: vec![0.0; local.send_len],
        })
    }

    /// This process's owned entries of `x` (in the order of `x_owned`), to fill before a
    /// multiply.
    pub fn x_mut<'a>(&'a mut self, ctx: &'a Ctx) -> mbsp::Result<&'a mut [f64]> {
        ctx.local_mut(&mut self.x)
    }

    /// `y = A x`: `y` receives this process's owned entries (in the order of `y_owned`). Two
    /// supersteps; every process must call it.
    pub fn multiply(&mut self, ctx: &mut Ctx, y: &mut [f64]) -> mbsp::Result<()> {
        let l = self.local;
        if y.len() != l.y_owned.len() {
            return Err(ctx.misuse_error(
                "spmv multiply",
                format!(
                    "y has {} entries; process {} owns {}",
                    y.len(),
                    l.pid,
                    l.y_owned.len()
                ),
            ));
        }
        // Fan-out.
        {
            let x = ctx.local(&self.x)?;
            let buf = ctx.local_mut(&mut self.xbuf)?;
            for &(dst, src, len) in &l.own_x {
                let (dst, src, len) = (dst as usize, src as usize, len as usize);
                buf[dst..dst + len].copy_from_slice(&x[src..src + len]);
            }
        }
        for f in &l.fetches {
            let (src, len) = (f.src as usize, f.len as usize);
            ctx.get(
                f.from as usize,
                &self.x,
                src..src + len,
                &self.xbuf,
                f.dst as usize,
            )?;
        }
        ctx.sync()?;
        // Local multiply; own rows straight into y, others packed for their owners.
        y.fill(0.0);
        {
            let xb = ctx.local(&self.xbuf)?;
            for (r, dest) in l.row_dest.iter().enumerate() {
                let (a, b) = (l.row_ptr[r] as usize, l.row_ptr[r + 1] as usize);
                let mut sum = 0.0;
                for (v, &c) in l.val[a..b].iter().zip(&l.col[a..b]) {
                    sum += v * xb[c as usize];
                }
                match *dest {
                    RowDest::Own(q) => y[q as usize] += sum,
                    RowDest::Send(q) => self.send[q as usize] = sum,
                }
            }
        }
        // Fan-in.
        for &(t, start, len, offset) in &l.puts {
            let (start, len) = (start as usize, len as usize);
            ctx.put(
                t as usize,
                &self.send[start..start + len],
                &self.recv,
                offset as usize,
            )?;
        }
        ctx.sync()?;
        let recv = ctx.local(&self.recv)?;
        for (slot, &q) in l.recv_to_y.iter().enumerate() {
            y[q as usize] += recv[slot];
        }
        Ok(())
    }
}
