//! Making an [`SpmvPlan`]: a matrix and its distribution cut into one [`LocalSpmv`] per process.
//!
//! The plan is made process after process, each in four phases: its nonzeros are *ordered*
//! (the rows it owns first, the others grouped by owner), its *columns* are numbered locally
//! (the fan-out's fetches planned with them), its *rows* are laid out in CRS (and stored in
//! SELL-C-σ), and its *fan-in* is planned (the slots its partial sums take in each owner's
//! receive buffer). What the owners learn from the processes built before them (where their
//! received sums go, who reads their `x`) is handed to each owner at the end.

use super::{Fetch, LocalSpmv, Out, SpmvError, SpmvPlan, guard, sell, share};
use crate::sparse::{CooMatrix, Distribution};

impl SpmvPlan {
    /// With `shared_x`, no fan-out is planned: the processes read a shared `x` of `a.cols`
    /// entries and a zero after them in place (the nested level of
    /// [`HierSpmv`](super::HierSpmv), whose `x` is its package's local buffer): local columns
    /// are the matrix's columns.
    pub(super) fn build(
        a: &CooMatrix,
        d: &Distribution,
        shared_x: bool,
    ) -> Result<Self, SpmvError> {
        Self::build_ordered(a, d, shared_x, None)
    }

    /// [`SpmvPlan::build`] with each process's owned `y` and `x` entries in the order of
    /// `keys` (per global row, per global column; ties by index) instead of ascending index:
    /// [`HierPlan::partition`](super::HierPlan::partition) groups a package's entries by the
    /// core that uses them, so that each core reads and writes stretches of its own.
    pub(super) fn build_ordered(
        a: &CooMatrix,
        d: &Distribution,
        shared_x: bool,
        keys: Option<(&[u32], &[u32])>,
    ) -> Result<Self, SpmvError> {
        check(a, d)?;
        let p = d.p;
        let mut builder = Builder::new(a, d, shared_x, keys);
        let procs: Vec<LocalSpmv> = nonzeros_by_process(d)
            .into_iter()
            .enumerate()
            .map(|(s, nz)| builder.process(s, nz))
            .collect();
        Ok(SpmvPlan {
            rows: a.rows,
            cols: a.cols,
            procs: builder.hand_to_owners(procs),
            guard: guard::HpGuard::new(p),
            shares: share::Shares::new(p),
            shared_x,
        })
    }
}

/// Checks that `d` is a distribution of `a` over at least one process.
fn check(a: &CooMatrix, d: &Distribution) -> Result<(), SpmvError> {
    a.validate()?;
    let p = d.p;
    if p == 0 {
        return Err(SpmvError::NoProcesses);
    }
    if d.nz_part.len() != a.nnz() || d.x_owner.len() != a.cols || d.y_owner.len() != a.rows {
        return Err(SpmvError::OtherMatrix {
            nz_parts: d.nz_part.len(),
            x_owners: d.x_owner.len(),
            y_owners: d.y_owner.len(),
            rows: a.rows,
            cols: a.cols,
            nnz: a.nnz(),
        });
    }
    if let Some(&s) = d
        .nz_part
        .iter()
        .chain(&d.x_owner)
        .chain(&d.y_owner)
        .find(|&&s| s as usize >= p)
    {
        return Err(SpmvError::PartTooLarge { part: s, p });
    }
    Ok(())
}

/// Each owner's list of owned indices, ascending (by `key`, then index, when given), and the
/// position of each global index in its owner's list.
fn positions(owner: &[u32], p: usize, key: Option<&[u32]>) -> (Vec<Vec<u32>>, Vec<u32>) {
    let mut owned: Vec<Vec<u32>> = vec![Vec::new(); p];
    for (i, &s) in owner.iter().enumerate() {
        owned[s as usize].push(i as u32);
    }
    if let Some(key) = key {
        for list in &mut owned {
            list.sort_unstable_by_key(|&i| (key[i as usize], i));
        }
    }
    let mut pos = vec![0u32; owner.len()];
    for list in &owned {
        for (q, &i) in list.iter().enumerate() {
            pos[i as usize] = q as u32;
        }
    }
    (owned, pos)
}

/// The nonzeros (indices into the matrix) of each process, in matrix order.
fn nonzeros_by_process(d: &Distribution) -> Vec<Vec<u32>> {
    let mut mine: Vec<Vec<u32>> = vec![Vec::new(); d.p];
    for (k, &s) in d.nz_part.iter().enumerate() {
        mine[s as usize].push(k as u32);
    }
    mine
}

/// The local columns of one process: the matrix's columns it reads, in the order they are
/// numbered locally, how many local columns there are, and the fan-out's fetches.
struct Columns {
    cols: Vec<u32>,
    local_cols: usize,
    fetches: Vec<Fetch>,
}

/// The local rows of one process (the matrix's rows with a nonzero there, owned ones first) in
/// CRS over local columns.
struct Rows {
    rows: Vec<u32>,
    row_ptr: Vec<u32>,
    col: Vec<u32>,
    val: Vec<f64>,
}

/// The state of a plan being made, shared by the processes built one after the other.
struct Builder<'a> {
    a: &'a CooMatrix,
    d: &'a Distribution,
    shared_x: bool,
    x_owned: Vec<Vec<u32>>,
    x_pos: Vec<u32>,
    y_owned: Vec<Vec<u32>>,
    y_pos: Vec<u32>,
    /// Global column -> local column of the process being built (`u32::MAX` between them).
    local_col: Vec<u32>,
    /// Per owner: receive slots taken so far. Owner `t` gets, from each sender `s`
    /// (ascending), one slot per row of `s` that `t` owns, in row order.
    recv_len: Vec<u32>,
    /// Per owner: receive slot -> position in its `y_owned`.
    recv_to_y: Vec<Vec<u32>>,
    /// Per owner: (sender, offset in the receive buffer, length), by ascending sender.
    recv_from: Vec<Vec<(u32, u32, u32)>>,
    /// Per owner of `x` entries: the processes that read them, ascending.
    readers: Vec<Vec<u32>>,
}

impl<'a> Builder<'a> {
    fn new(
        a: &'a CooMatrix,
        d: &'a Distribution,
        shared_x: bool,
        keys: Option<(&[u32], &[u32])>,
    ) -> Self {
        let p = d.p;
        let (x_owned, x_pos) = positions(&d.x_owner, p, keys.map(|k| k.1));
        let (y_owned, y_pos) = positions(&d.y_owner, p, keys.map(|k| k.0));
        Builder {
            a,
            d,
            shared_x,
            x_owned,
            x_pos,
            y_owned,
            y_pos,
            local_col: vec![u32::MAX; a.cols],
            recv_len: vec![0u32; p],
            recv_to_y: vec![Vec::new(); p],
            recv_from: vec![Vec::new(); p],
            readers: vec![Vec::new(); p],
        }
    }

    /// Process `s`'s part of the plan, from its nonzeros `nz`; what it tells the owners it
    /// reads from and sends to is noted for [`Builder::hand_to_owners`].
    fn process(&mut self, s: usize, mut nz: Vec<u32>) -> LocalSpmv {
        self.order_nonzeros(s, &mut nz);
        let Columns {
            cols,
            local_cols,
            fetches,
        } = self.columns(s, &nz);
        let mut sources: Vec<u32> = fetches.iter().map(|f| f.from).collect();
        sources.dedup(); // fetches are grouped by owner
        for &o in &sources {
            self.readers[o as usize].push(s as u32);
        }
        let Rows {
            rows,
            row_ptr,
            col,
            val,
        } = self.rows(&nz);
        for &j in &cols {
            self.local_col[j as usize] = u32::MAX;
        }
        let own_rows = rows
            .iter()
            .take_while(|&&i| self.d.y_owner[i as usize] as usize == s)
            .count();
        let pad = local_cols as u32;
        let own = sell::Sell::new(0, &row_ptr[..=own_rows], &col, &val, pad);
        let other = sell::Sell::new(own_rows as u32, &row_ptr[own_rows..], &col, &val, pad);
        let (mut dest, y_empty) = self.owned_rows(s, &rows[..own_rows]);
        let (outs, send_len) = self.fan_in(s, &rows[own_rows..], &mut dest);
        LocalSpmv {
            pid: s,
            x_owned: self.x_owned[s].clone(),
            y_owned: self.y_owned[s].clone(),
            own,
            other,
            local_cols,
            fetches,
            own_rows,
            dest,
            y_empty,
            send_len,
            outs,
            recv_to_y: Vec::new(),
            recv_from: Vec::new(),
            sources,
            readers: Vec::new(),
        }
    }

    /// Phase *order*: the rows owned here first (by their position in `y_owned`, so `y` is
    /// written in order), then the others grouped by owner (and by position there, so the send
    /// buffer is written in order); within a row by column.
    ///
    /// Sorted as packed keys (owner, row's position at its owner, column, index), not as
    /// indices with a key function: the function's three lookups at every comparison were most
    /// of the plan's build time.
    fn order_nonzeros(&self, s: usize, nz: &mut Vec<u32>) {
        let (a, d) = (self.a, self.d);
        let (mut own, mut others): (Vec<u128>, Vec<u128>) = nz
            .iter()
            .map(|&k| {
                let (i, j) = (a.row_idx[k as usize], a.col_idx[k as usize]);
                let t = d.y_owner[i as usize];
                (u128::from(t) << 96)
                    | (u128::from(self.y_pos[i as usize]) << 64)
                    | (u128::from(j) << 32)
                    | u128::from(k)
            })
            .partition(|&e| (e >> 96) as usize == s);
        own.sort_unstable();
        others.sort_unstable();
        nz.clear();
        nz.extend(own.iter().chain(&others).map(|&e| e as u32));
    }

    /// Phase *columns*: numbers the columns process `s` reads (in `local_col`) and plans the
    /// fan-out. Owned columns sit at their position in `x`; the others follow, sorted by (owner,
    /// position at owner), so that fetches of consecutive entries coalesce (packed keys, as in
    /// [`Builder::order_nonzeros`]). With a shared `x`, local columns are global ones.
    fn columns(&mut self, s: usize, nz: &[u32]) -> Columns {
        let (a, d) = (self.a, self.d);
        let mut cols: Vec<u32> = nz.iter().map(|&k| a.col_idx[k as usize]).collect();
        cols.sort_unstable();
        cols.dedup();
        let mut fetches: Vec<Fetch> = Vec::new();
        if self.shared_x {
            for &j in &cols {
                self.local_col[j as usize] = j;
            }
            return Columns {
                cols,
                local_cols: a.cols,
                fetches,
            };
        }
        let x_pos = &self.x_pos;
        let mut keyed: Vec<u128> = cols
            .iter()
            .map(|&j| {
                (u128::from(d.x_owner[j as usize]) << 64)
                    | (u128::from(x_pos[j as usize]) << 32)
                    | u128::from(j)
            })
            .collect();
        keyed.sort_unstable();
        cols.clear();
        cols.extend(keyed.iter().map(|&e| e as u32));
        let mut local_cols = self.x_owned[s].len();
        for &j in &cols {
            let (o, q) = (d.x_owner[j as usize], x_pos[j as usize]);
            if o as usize == s {
                self.local_col[j as usize] = q;
                continue;
            }
            let l = local_cols as u32;
            self.local_col[j as usize] = l;
            local_cols += 1;
            match fetches.last_mut() {
                Some(f) if f.from == o && f.src + f.len == q && f.dst + f.len == l => f.len += 1,
                _ => fetches.push(Fetch {
                    from: o,
                    src: q,
                    dst: l,
                    len: 1,
                }),
            }
        }
        Columns {
            cols,
            local_cols,
            fetches,
        }
    }

    /// Phase *rows*: the ordered nonzeros `nz` in CRS over the local rows and the local columns
    /// numbered by [`Builder::columns`].
    fn rows(&self, nz: &[u32]) -> Rows {
        let a = self.a;
        let mut row_ptr = vec![0u32];
        let mut col = Vec::with_capacity(nz.len());
        let mut val = Vec::with_capacity(nz.len());
        let mut rows: Vec<u32> = Vec::new();
        for &k in nz {
            let i = a.row_idx[k as usize];
            if rows.last() != Some(&i) {
                if !rows.is_empty() {
                    row_ptr.push(col.len() as u32);
                }
                rows.push(i);
            }
            let j = a.col_idx[k as usize];
            col.push(self.local_col[j as usize]);
            val.push(a.vals[k as usize]);
        }
        if !rows.is_empty() {
            row_ptr.push(col.len() as u32);
        }
        Rows {
            rows,
            row_ptr,
            col,
            val,
        }
    }

    /// Where the sums of the owned local rows `owned` of process `s` go (positions in its
    /// `y_owned`), and its owned rows without a nonzero here (zeroed before the fan-in).
    fn owned_rows(&self, s: usize, owned: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let dest: Vec<u32> = owned.iter().map(|&i| self.y_pos[i as usize]).collect();
        let mut present = vec![false; self.y_owned[s].len()];
        for &q in &dest {
            present[q as usize] = true;
        }
        let y_empty = (0..self.y_owned[s].len() as u32)
            .filter(|&q| !present[q as usize])
            .collect();
        (dest, y_empty)
    }

    /// Phase *fan-in*: the partial sums of `others`, the local rows of process `s` owned
    /// elsewhere, packed per owner (ascending owner, then row) in the send buffer, each owner's
    /// block preceded by a header word; appends each row's slot in the send buffer to `dest`
    /// and takes the rows' slots in the owners' receive buffers. Returns the sends and the
    /// send buffer's length.
    fn fan_in(&mut self, s: usize, others: &[u32], dest: &mut Vec<u32>) -> (Vec<Out>, usize) {
        let mut outs: Vec<Out> = Vec::new();
        let mut next = 0u32;
        for &i in others {
            let t = self.d.y_owner[i as usize];
            match outs.last_mut() {
                Some(o) if o.to == t => o.len += 1,
                _ => {
                    next += 1; // the header
                    outs.push(Out {
                        to: t,
                        start: next,
                        len: 1,
                        offset: self.recv_len[t as usize],
                    });
                }
            }
            dest.push(next);
            next += 1;
            self.recv_to_y[t as usize].push(self.y_pos[i as usize]);
        }
        for o in &outs {
            self.recv_from[o.to as usize].push((s as u32, o.offset, o.len));
            self.recv_len[o.to as usize] += o.len;
        }
        (outs, next as usize)
    }

    /// Hands each owner what the others noted for it: where its received sums go, who sends
    /// them, who reads its `x`.
    fn hand_to_owners(self, mut procs: Vec<LocalSpmv>) -> Vec<LocalSpmv> {
        let owners = self
            .recv_to_y
            .into_iter()
            .zip(self.recv_from)
            .zip(self.readers);
        for (l, ((recv_to_y, recv_from), readers)) in procs.iter_mut().zip(owners) {
            l.recv_to_y = recv_to_y;
            l.recv_from = recv_from;
            l.readers = readers;
        }
        procs
    }
}
