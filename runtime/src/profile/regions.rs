//! Regions of a profile, named by the program: the primitives of [`Ctx`] that open and close
//! them (module documentation of `profile`, "Regions").

use crate::ctx::Ctx;

impl Ctx {
    /// Run `f` as the region `name` of the profile: the supersteps whose sync begins inside
    /// it are counted for it (and for the regions around it) in the profile's report. Regions
    /// nest; see the [profile module](crate::profile) for how supersteps are attributed. Not
    /// profiled, it just runs `f`. The region ends when `f` returns, also regions `f` began
    /// and did not end.
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| {
    ///     ctx.region("solve", |ctx| {
    ///         for _ in 0..3 {
    ///             ctx.region("halo", |ctx| ctx.sync())?;
    ///         }
    ///         ctx.sync()
    ///     })
    /// })?;
    /// let report = profile.report(&mbsp::params::Params::DEFAULT);
    /// let names: Vec<_> = report.regions.iter().map(|t| (t.name.as_str(), t.supersteps)).collect();
    /// assert_eq!(names, [("solve", 4), ("solve/halo", 3), ("(outside regions)", 1)]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn region<R>(&mut self, name: &str, f: impl FnOnce(&mut Ctx) -> R) -> R {
        let depth = self.regions_open;
        self.open_region(name);
        let r = f(self);
        self.regions_open = depth;
        if let Some(rec) = &self.prof {
            rec.borrow_mut().close_to(depth);
        }
        r
    }

    /// Begin the region `name` (see [`Ctx::region`](crate::Ctx::region), which ends it for you); end it with
    /// [`Ctx::region_end`](crate::Ctx::region_end). For code whose regions do not fit a closure (the C ABI's
    /// `mbsp_region_begin`). Regions still open when the process ends are closed then.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     ctx.region_begin("step");
    ///     ctx.sync()?;
    ///     ctx.region_end()
    /// })?;
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn region_begin(&mut self, name: &str) {
        self.open_region(name);
    }

    fn open_region(&mut self, name: &str) {
        self.regions_open += 1;
        if let Some(rec) = &self.prof {
            rec.borrow_mut().region_begin(name);
        }
    }

    /// End the innermost region begun by [`Ctx::region_begin`](crate::Ctx::region_begin). Ending a region when none is
    /// open is a misuse (the run fails with an error naming this process and superstep).
    ///
    /// ```
    /// let e = mbsp::run(1, |ctx| ctx.region_end()).unwrap_err();
    /// assert!(e.to_string().contains("no region is open"), "{e}");
    /// ```
    pub fn region_end(&mut self) -> crate::Result<()> {
        if self.regions_open == 0 {
            return Err(self.misuse(
                "region_end",
                "no region is open (every region_end needs a region_begin before it)".into(),
            ));
        }
        self.regions_open -= 1;
        if let Some(rec) = &self.prof {
            rec.borrow_mut().region_end();
        }
        Ok(())
    }
}
