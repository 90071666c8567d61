//! Distributed vectors of a plan: gathering the parts of `x` or `y` (by `x_owned` / `y_owned`)
//! into one whole vector, at one process or at all, and handing a whole vector out.
//!
//! A process's part of `y` holds the entries `y_owned` (ascending global indices) in that order,
//! and likewise for `x`: the order of [`Spmv::x_mut`](super::Spmv::x_mut) and of the `y` that
//! [`Spmv::multiply`](super::Spmv::multiply) fills. Inside a run the plan, which every process
//! holds, says where each process's entries go, so only values travel.
//!
//! Cost: gather one superstep with `h = n` words at the root; all-gather one superstep, `h = n`
//! received per process; scatter one superstep, `h = n` sent by the root (`n` the vector's
//! length; messages, see [`collectives`](crate::collectives)). [`SpmvPlan::collect_y`] and
//! [`SpmvPlan::collect_x`], outside a run, copy `n` words.

use super::{LocalSpmv, SpmvError, SpmvPlan};
use crate::collectives;
use mbsp::Ctx;

/// Which of the two vectors of `y = A x`.
#[derive(Clone, Copy)]
enum Side {
    X,
    Y,
}

impl Side {
    fn owned(self, l: &LocalSpmv) -> &[u32] {
        match self {
            Side::X => &l.x_owned,
            Side::Y => &l.y_owned,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Side::X => "x",
            Side::Y => "y",
        }
    }
}

impl SpmvPlan {
    fn len_of(&self, side: Side) -> usize {
        match side {
            Side::X => self.cols,
            Side::Y => self.rows,
        }
    }

    /// The whole `y` from the per-process parts a run returned (`parts[s]` is process `s`'s
    /// part, in the order of its `y_owned`). No run needed: for results returned by
    /// [`mbsp::run`].
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// let a = CooMatrix::new(3, 3, (0..3).map(|i| (i, i, 1.0))).unwrap();
    /// // Process 0 owns y0 and y2, process 1 owns y1.
    /// let d = Distribution { p: 2, nz_part: vec![0, 1, 0], x_owner: vec![0, 1, 0], y_owner: vec![0, 1, 0] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// assert_eq!(plan.collect_y(&[vec![10.0, 12.0], vec![11.0]]).unwrap(), vec![10.0, 11.0, 12.0]);
    /// assert!(plan.collect_y(&[vec![10.0], vec![11.0]]).is_err()); // process 0 owns two
    /// ```
    pub fn collect_y<V: AsRef<[f64]>>(&self, parts: &[V]) -> Result<Vec<f64>, SpmvError> {
        self.collect(Side::Y, parts)
    }

    /// The whole `x` from the per-process parts a run returned, as [`collect_y`](Self::collect_y).
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// let a = CooMatrix::new(1, 2, vec![(0, 0, 1.0), (0, 1, 1.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![0, 1], x_owner: vec![1, 0], y_owner: vec![0] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// assert_eq!(plan.collect_x(&[[7.0], [6.0]]).unwrap(), vec![6.0, 7.0]);
    /// ```
    pub fn collect_x<V: AsRef<[f64]>>(&self, parts: &[V]) -> Result<Vec<f64>, SpmvError> {
        self.collect(Side::X, parts)
    }

    fn collect<V: AsRef<[f64]>>(&self, side: Side, parts: &[V]) -> Result<Vec<f64>, SpmvError> {
        if parts.len() != self.p() {
            return Err(SpmvError::Parts {
                given: parts.len(),
                p: self.p(),
            });
        }
        let mut whole = vec![0.0; self.len_of(side)];
        for (l, part) in self.procs.iter().zip(parts) {
            let (owned, part) = (side.owned(l), part.as_ref());
            if part.len() != owned.len() {
                return Err(SpmvError::PartLength {
                    pid: l.pid,
                    len: part.len(),
                    owned: owned.len(),
                });
            }
            for (&i, &v) in owned.iter().zip(part) {
                whole[i as usize] = v;
            }
        }
        Ok(whole)
    }

    /// Gathers the distributed `y` whole at `root` (collective, one superstep): `Some` there,
    /// `None` elsewhere. Each process passes its part (in the order of its `y_owned`).
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::{Spmv, SpmvPlan}};
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (1, 1, 3.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![1, 0], x_owner: vec![1, 0], y_owner: vec![1, 0] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// let out = mbsp::run(2, |ctx| {
    ///     let mut spmv = Spmv::new(ctx, &plan)?;
    ///     spmv.x_mut(ctx)?.fill(1.0);
    ///     let mut y = vec![0.0; spmv.local().y_owned.len()];
    ///     spmv.multiply(ctx, &mut y)?;
    ///     plan.gather_y(ctx, 0, &y)
    /// })?;
    /// assert_eq!(out[0], Some(vec![2.0, 3.0]));
    /// assert_eq!(out[1], None);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn gather_y(
        &self,
        ctx: &mut Ctx,
        root: usize,
        part: &[f64],
    ) -> mbsp::Result<Option<Vec<f64>>> {
        self.gather(ctx, Side::Y, Some(root), part)
    }

    /// Gathers the distributed `x` whole at `root`, as [`gather_y`](Self::gather_y).
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (1, 1, 3.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![1, 0], x_owner: vec![1, 0], y_owner: vec![1, 0] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// let out = mbsp::run(2, |ctx| plan.gather_x(ctx, 1, &[ctx.pid() as f64]))?;
    /// assert_eq!(out[1], Some(vec![1.0, 0.0])); // x0 is owned by process 1
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn gather_x(
        &self,
        ctx: &mut Ctx,
        root: usize,
        part: &[f64],
    ) -> mbsp::Result<Option<Vec<f64>>> {
        self.gather(ctx, Side::X, Some(root), part)
    }

    /// Gathers the distributed `y` whole at every process (collective, one superstep).
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// let a = CooMatrix::new(3, 3, (0..3).map(|i| (i, i, 1.0))).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![0, 1, 0], x_owner: vec![0, 1, 0], y_owner: vec![0, 1, 0] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// let out = mbsp::run(2, |ctx| {
    ///     let mine: Vec<f64> = plan.procs[ctx.pid()].y_owned.iter().map(|&i| i as f64).collect();
    ///     plan.allgather_y(ctx, &mine)
    /// })?;
    /// assert!(out.iter().all(|y| y == &[0.0, 1.0, 2.0]));
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn allgather_y(&self, ctx: &mut Ctx, part: &[f64]) -> mbsp::Result<Vec<f64>> {
        Ok(self.gather(ctx, Side::Y, None, part)?.unwrap_or_default())
    }

    /// Gathers the distributed `x` whole at every process, as
    /// [`allgather_y`](Self::allgather_y).
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// let a = CooMatrix::new(1, 2, vec![(0, 0, 1.0), (0, 1, 1.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![0, 1], x_owner: vec![1, 0], y_owner: vec![0] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// let out = mbsp::run(2, |ctx| plan.allgather_x(ctx, &[10.0 + ctx.pid() as f64]))?;
    /// assert_eq!(out, vec![vec![11.0, 10.0]; 2]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn allgather_x(&self, ctx: &mut Ctx, part: &[f64]) -> mbsp::Result<Vec<f64>> {
        Ok(self.gather(ctx, Side::X, None, part)?.unwrap_or_default())
    }

    /// Hands out `root`'s whole `x` (length `cols`; other processes pass an empty slice):
    /// each process receives its part, in the order of its `x_owned`, ready for
    /// [`x_mut`](super::Spmv::x_mut). Collective, one superstep. (A process that holds the whole
    /// vector itself needs no communication: its part is `x_owned.iter().map(|&j| x[j])`.)
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::{Spmv, SpmvPlan}};
    /// let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (1, 1, 3.0)]).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![1, 0], x_owner: vec![1, 0], y_owner: vec![1, 0] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// let y = mbsp::run(2, |ctx| {
    ///     let whole = if ctx.pid() == 0 { vec![10.0, 20.0] } else { vec![] };
    ///     let mine = plan.scatter_x(ctx, 0, &whole)?;
    ///     let mut spmv = Spmv::new(ctx, &plan)?;
    ///     spmv.x_mut(ctx)?.copy_from_slice(&mine);
    ///     let mut y = vec![0.0; spmv.local().y_owned.len()];
    ///     spmv.multiply(ctx, &mut y)?;
    ///     Ok(y)
    /// })?;
    /// assert_eq!(plan.collect_y(&y).unwrap(), vec![20.0, 60.0]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn scatter_x(&self, ctx: &mut Ctx, root: usize, whole: &[f64]) -> mbsp::Result<Vec<f64>> {
        self.scatter(ctx, Side::X, root, whole)
    }

    /// Hands out `root`'s whole `y` (length `rows`), as [`scatter_x`](Self::scatter_x): each
    /// process receives its part in the order of its `y_owned`.
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::SpmvPlan};
    /// let a = CooMatrix::new(3, 3, (0..3).map(|i| (i, i, 1.0))).unwrap();
    /// let d = Distribution { p: 2, nz_part: vec![0, 1, 0], x_owner: vec![0, 1, 0], y_owner: vec![0, 1, 0] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// let parts = mbsp::run(2, |ctx| {
    ///     let whole = if ctx.pid() == 1 { vec![5.0, 6.0, 7.0] } else { vec![] };
    ///     plan.scatter_y(ctx, 1, &whole)
    /// })?;
    /// assert_eq!(parts, vec![vec![5.0, 7.0], vec![6.0]]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn scatter_y(&self, ctx: &mut Ctx, root: usize, whole: &[f64]) -> mbsp::Result<Vec<f64>> {
        self.scatter(ctx, Side::Y, root, whole)
    }

    /// Gather at `root`, or at every process with `None`.
    fn gather(
        &self,
        ctx: &mut Ctx,
        side: Side,
        root: Option<usize>,
        part: &[f64],
    ) -> mbsp::Result<Option<Vec<f64>>> {
        let op = match (side, root) {
            (Side::X, Some(_)) => "spmv gather_x",
            (Side::Y, Some(_)) => "spmv gather_y",
            (Side::X, None) => "spmv allgather_x",
            (Side::Y, None) => "spmv allgather_y",
        };
        self.check_run(ctx, op)?;
        let owned = side.owned(&self.procs[ctx.pid()]).len();
        if part.len() != owned {
            return Err(ctx.misuse_error(
                op,
                format!(
                    "the part of {} has {} entries; process {} owns {owned}",
                    side.name(),
                    part.len(),
                    ctx.pid()
                ),
            ));
        }
        let parts = match root {
            Some(root) => collectives::gather(ctx, root, part)?,
            None => Some(collectives::allgather(ctx, part)?),
        };
        let Some(parts) = parts else {
            return Ok(None);
        };
        // Every process checked its own length above, so the parts fit the plan.
        let parts: Vec<&[f64]> = (0..parts.parts()).map(|s| parts.part(s)).collect();
        self.collect(side, &parts)
            .map(Some)
            .map_err(|e| ctx.misuse_error(op, e.to_string()))
    }

    fn scatter(
        &self,
        ctx: &mut Ctx,
        side: Side,
        root: usize,
        whole: &[f64],
    ) -> mbsp::Result<Vec<f64>> {
        let op = match side {
            Side::X => "spmv scatter_x",
            Side::Y => "spmv scatter_y",
        };
        self.check_run(ctx, op)?;
        let (mut data, mut counts) = (Vec::new(), Vec::new());
        if ctx.pid() == root {
            let n = self.len_of(side);
            if whole.len() != n {
                return Err(ctx.misuse_error(
                    op,
                    format!(
                        "the whole {} has {} entries; the matrix needs {n}",
                        side.name(),
                        whole.len()
                    ),
                ));
            }
            data.reserve(n);
            for l in &self.procs {
                let owned = side.owned(l);
                data.extend(owned.iter().map(|&i| whole[i as usize]));
                counts.push(owned.len());
            }
        }
        collectives::scatterv(ctx, root, &data, &counts)
    }
}
