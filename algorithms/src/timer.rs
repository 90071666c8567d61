//! A synchronised region timer: the time of the slowest process over a region of supersteps.
//!
//! In BSP the time of a region is set by the slowest process, so timing one process says
//! little. [`RegionTimer::start`] lines the processes up with a sync and notes the time;
//! [`RegionTimer::stop`] takes each process's elapsed time and returns the maximum over the
//! processes, on every process. Cost: one superstep to start, one all-reduce of one word
//! (one superstep, `h = p - 1`) to stop; neither is part of the measured time.

use crate::collectives::allreduce_value;
use mbsp::{Ctx, Result};

/// A timed region; see the [module docs](self).
///
/// ```
/// use mbsp_algorithms::timer::RegionTimer;
/// let t = mbsp::run(2, |ctx| {
///     let timer = RegionTimer::start(ctx)?;
///     if ctx.pid() == 1 {
///         std::thread::sleep(std::time::Duration::from_millis(20));
///     }
///     ctx.sync()?;
///     timer.stop(ctx)
/// })?;
/// assert_eq!(t[0], t[1]);     // every process gets the same, slowest time
/// assert!(t[0] >= 0.020);
/// # Ok::<(), mbsp::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RegionTimer {
    start: f64,
}

impl RegionTimer {
    /// Sync (so that every process starts together), then start timing.
    pub fn start(ctx: &mut Ctx) -> Result<Self> {
        ctx.sync()?;
        Ok(RegionTimer { start: ctx.time() })
    }

    /// Start timing now, without lining the processes up (each measures from its own start).
    pub fn start_unsynced(ctx: &Ctx) -> Self {
        RegionTimer { start: ctx.time() }
    }

    /// Seconds since [`start`](Self::start) on this process alone (no communication).
    pub fn local(&self, ctx: &Ctx) -> f64 {
        ctx.time() - self.start
    }

    /// The maximum over all processes of their seconds since the start; collective.
    pub fn stop(self, ctx: &mut Ctx) -> Result<f64> {
        let mine = self.local(ctx);
        allreduce_value(ctx, mine, f64::max)
    }
}
