//! Starting runs: the caller becomes pid 0, `p - 1` scoped threads become the others.

use crate::ctx::{Ctx, RunShared};
use crate::engine::state::RunEngine;
use crate::engine::threads::state::{RunState, Shape};
use crate::error::{Error, ErrorKind, Result};
use crate::place::{Layout, OFF_BY_ENV, OFF_BY_FORCE, OFF_BY_RUN, Procs, default_affinity};
use crate::process::{enter, leave, process, spawn_failed};
use crate::team::{Launch, SpmdFn, Team};
use crate::tree::Tree;
use crate::wait::WaitPolicy;
use mbsp_topology::{Binding, Domain, Level, Loaded, Machine, NotBound, PlanError, Policy};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// The number of hardware threads available to this program (as the standard library reports
/// it when first asked): what `bsp_nprocs()` returns outside a run (over MPI ranks, the C ABI
/// answers the number of ranks instead).
///
/// ```
/// assert!(mbsp::nprocs() >= 1);
/// ```
pub fn nprocs() -> usize {
    crate::place::hardware_threads()
}

/// Start an SPMD run of `p` processes, each executing `f`; return each process's result, in
/// pid order.
///
/// The calling thread becomes process 0 (so `f` may borrow the caller's data), and `p - 1`
/// threads are started for the others; all are joined before `run` returns. If any process
/// fails — misuse of a primitive, [`Ctx::abort`], a panic, or returning an error — every process
/// stops at its next primitive (at once if it waits in a sync) and `run` returns the first
/// error.
///
/// A run asking for more processes than the machine can hold ([`max_procs`](crate::max_procs):
/// its thread limits and memory) is refused with a misuse error naming both numbers, before
/// anything is allocated.
///
/// # Performance
///
/// Loops written inline in `f` compile to the same code as in a separate function (see
/// "Loops inside the SPMD closure" in docs/semantics.md): the views of
/// [`Ctx::local_mut`](crate::Ctx::local_mut) are plain slices. To compare variants of a kernel,
/// time them alternately in one program over several rounds (`runtime/examples/inline_loop.rs`).
///
/// ```
/// // The inner product of two distributed vectors (MulticoreBSP paper, Algorithm 2).
/// let n = 1000;
/// let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
/// let sums = mbsp::run(4, |ctx| {
///     let (p, s) = (ctx.nprocs(), ctx.pid());
///     let mine: f64 = x.iter().skip(s).step_by(p).map(|v| v * v).sum();
///     let partial = ctx.push_reg(vec![0.0f64; p])?;
///     ctx.sync()?;
///     for q in 0..p {
///         ctx.put(q, &[mine], &partial, s)?;
///     }
///     ctx.sync()?;
///     Ok(ctx.local(&partial)?.iter().sum::<f64>())
/// }).unwrap();
/// let want: f64 = x.iter().map(|v| v * v).sum();
/// assert!(sums.iter().all(|&v| (v - want).abs() < 1e-6));
/// ```
pub fn run<R, F>(p: usize, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(&mut Ctx) -> Result<R> + Sync,
{
    Run::new(p).run(f)
}

/// A run about to start, with its options: how many processes, where they go, how they wait.
///
/// ```
/// use mbsp::{Level, Policy, Run};
/// // One process per package of the machine, placed compactly, with an 8 MiB stack each.
/// let r = Run::per(Level::Package)
///     .policy(Policy::Compact)
///     .stack_size(8 << 20)
///     .run(|ctx| Ok(ctx.placement().packages.clone()))
///     .unwrap();
/// assert_eq!(r.len(), mbsp::Machine::current().unwrap().machine.packages().len());
/// ```
#[derive(Clone, Debug)]
pub struct Run {
    pub(crate) procs: Procs,
    pub(crate) policy: Option<Policy>,
    pub(crate) bind: Option<bool>,
    pub(crate) machine: Option<Loaded>,
    pub(crate) wait: Option<WaitPolicy>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) reuse: Option<bool>,
    pub(crate) profile: Option<bool>,
    /// Whether the run's barrier is a tree (default: for more than twice as many processes as
    /// cores);
    /// set by tests through `internals::tree_barrier`.
    pub(crate) tree_barrier: Option<bool>,
    /// Whether the run's lazy syncs announce through lanes (default: for at most `LANE_P`
    /// processes); set by tests through `internals::lanes`.
    pub(crate) lanes: Option<bool>,
    /// Whether declared syncs of a run of two or of coroutines take the barrier (default: yes);
    /// set by tests through `internals::declared_at_barrier`.
    pub(crate) declared_at_barrier: Option<bool>,
    /// The sets of outboxes the processes use in turn (default: `outbox::SLOTS` for more
    /// processes than cores, else 2); set by tests through `internals::slots`.
    pub(crate) slots: Option<usize>,
    /// Where and when a top-level run checkpoints (`checkpoint/`).
    pub(crate) checkpoints: Option<crate::Checkpoints>,
    /// Whether the processes run as coroutines, one thread per core (`coroutines.rs`).
    pub(crate) coroutines: bool,
}

impl Run {
    /// A run of `p` processes with default options.
    pub fn new(p: usize) -> Self {
        Run {
            procs: Procs::Count(p),
            policy: None,
            bind: None,
            machine: None,
            wait: None,
            stack_size: None,
            reuse: None,
            profile: None,
            tree_barrier: None,
            lanes: None,
            declared_at_barrier: None,
            slots: None,
            checkpoints: None,
            coroutines: false,
        }
    }

    /// Record a superstep profile of this run (see [`crate::profile`]): per superstep and
    /// process the compute and sync time and the words, bytes and messages sent and received.
    /// Default: on when `MBSP_PROFILE` is set (then a top-level run prints its report when it
    /// ends), and for a nested run, on when its parent run is profiled (its profile is attached
    /// to the parent's). Get the profile with [`Run::run_profiled`].
    pub fn profile(mut self, on: bool) -> Self {
        self.profile = Some(on);
        self
    }

    /// [`Run::run`], returning the run's [`Profile`](crate::profile::Profile) beside the
    /// results (profiling is on for this run whatever [`Run::profile`] says).
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(3).run_profiled(|ctx| {
    ///     ctx.send((ctx.pid() + 1) % 3, &[], &[0u8; 16])?; // 2 words to the next process
    ///     ctx.sync()
    /// })?;
    /// let first = &profile.supersteps[0];
    /// assert_eq!((first.procs[0].words_sent, first.procs[0].messages_received), (2, 1));
    /// assert_eq!(first.h(), 2);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn run_profiled<R, F>(self, f: F) -> Result<(Vec<R>, crate::profile::Profile)>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        let sink = Arc::new(crate::profile::record::Sink::default());
        let (results, profile) = self.run_top(Some(sink), &f)?;
        Ok((results, profile.expect("a profiled run has a profile")))
    }

    /// A top-level run handing its processes' records to `sink` (if any); the profile is
    /// reported as `MBSP_PROFILE` asks and returned.
    ///
    /// `f` is type-erased from here on (as in [`Run::launch`]): the run's machinery is compiled
    /// once per result type, not once per closure (it was a tenth of the code of a test binary
    /// with many runs).
    fn run_top<R: Send>(
        mut self,
        sink: Option<Arc<crate::profile::record::Sink>>,
        f: &SpmdFn<'_, R>,
    ) -> Result<(Vec<R>, Option<crate::profile::Profile>)> {
        self.resolve_checkpoints()?;
        if self.checkpoints.is_some() {
            self.refuse_coroutines(
                "checkpoints (Run::checkpoints or MBSP_CHECKPOINT_DIR): a checkpoint's \
                 processes wait for each other outside the coroutines' turns",
            )?;
        }
        let layout = self.top_layout()?;
        let p = layout.domains.len();
        let tree = Tree::new();
        let results = self.launch(&tree, &[], layout, None, sink.clone(), f);
        let results = results.collect(&tree)?;
        let profile = sink.map(|sink| sink.take(p, Vec::new()));
        if let Some(profile) = &profile {
            crate::profile::emit(profile);
        }
        Ok((results, profile))
    }

    /// The sink of a top-level run's profile, if it is profiled.
    pub(crate) fn top_sink(&self) -> Option<Arc<crate::profile::record::Sink>> {
        self.profile
            .unwrap_or_else(crate::profile::env_on)
            .then(|| Arc::new(crate::profile::record::Sink::default()))
    }

    /// A run of one process per object of `level` (package, NUMA node, core, PU) in the part of
    /// the machine it is placed on; each process owns its object.
    pub fn per(level: Level) -> Self {
        Run {
            procs: Procs::Per(level),
            ..Run::new(1)
        }
    }

    /// The placement policy (default: from `MBSP_AFFINITY`, else scattered; a nested run
    /// inherits its parent's policy, manual excepted). Ignored when the environment forces
    /// one (`MBSP_AFFINITY=force:<policy>`, [`forced_affinity`](crate::forced_affinity)).
    ///
    /// ```
    /// use mbsp::{Machine, Policy, Run};
    /// // Place 4 processes compactly on a (synthetic) 2-socket machine: all on package 0.
    /// let m = Machine::synthetic("package:2 core:4 pu:1").unwrap();
    /// let packages = Run::new(4)
    ///     .machine(m)
    ///     .policy(Policy::Compact)
    ///     .run(|ctx| Ok(ctx.placement().packages))
    ///     .unwrap();
    /// assert!(packages.iter().all(|p| p == &[0]));
    /// ```
    pub fn policy(mut self, policy: Policy) -> Self {
        if crate::place::forced_affinity().is_none() {
            self.policy = Some(policy);
        }
        self
    }

    /// Whether to bind each process's thread (and registered memory) to its placement on the
    /// real machine (default: yes, unless `MBSP_AFFINITY=none`; nested runs inherit). The plan
    /// is made either way; it tells processes what they own. Ignored under
    /// `MBSP_AFFINITY=force:none`, which turns binding off everywhere.
    pub fn bind(mut self, bind: bool) -> Self {
        if !matches!(crate::place::forced_affinity(), Some((_, false))) {
            self.bind = Some(bind);
        }
        self
    }

    /// Place the run on this machine tree instead of [`Machine::current`] (top-level runs only;
    /// a nested run is always placed in its parent's machine). On a loaded (synthetic or XML)
    /// tree nothing is bound.
    pub fn machine(mut self, loaded: Loaded) -> Self {
        self.machine = Some(loaded);
        self
    }

    /// How waiting processes spin, yield and sleep (default: [`WaitPolicy::for_load`] for the
    /// run's processes on the hardware threads they are placed on).
    pub fn wait_policy(mut self, policy: WaitPolicy) -> Self {
        self.wait = Some(policy);
        self
    }

    /// Stack size of the threads started for pids 1.. (default: Rust's default for spawned
    /// threads). Process 0 runs on the caller's stack.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Whether the threads of processes 1.. come from the calling thread's team of parked
    /// workers, reused from run to run (default: yes, unless `MBSP_TEAMS=off`), or are started
    /// for this run and joined at its end.
    ///
    /// A warm team starts a run with a wake-up per worker instead of a thread creation, keeps
    /// its threads bound where they were (no binding system call when the placement repeats),
    /// and reuses the run state (barrier, outboxes, arenas) of the previous run of the same
    /// size. Idle workers spin for about 20 µs, then sleep: they cost no CPU. They are joined
    /// when the thread that owns them ends, or by [`crate::release_threads`].
    ///
    /// ```
    /// // Many short nested runs: each one wakes the same parked threads.
    /// let sums = mbsp::run(2, |ctx| {
    ///     let mut total = 0;
    ///     for i in 0..100 {
    ///         total += ctx.run(2, |n| Ok(n.pid() + i))?.iter().sum::<usize>();
    ///     }
    ///     Ok(total)
    /// }).unwrap();
    /// assert_eq!(sums, vec![2 * 4950 + 100; 2]);
    /// // The same with threads started per run (the behaviour of most BSPlib implementations).
    /// let r = mbsp::Run::new(2).reuse_threads(false).run(|ctx| Ok(ctx.pid())).unwrap();
    /// assert_eq!(r, vec![0, 1]);
    /// ```
    pub fn reuse_threads(mut self, reuse: bool) -> Self {
        self.reuse = Some(reuse);
        self
    }

    /// Run the processes as coroutines: one thread per core the run is placed on, each taking
    /// that core's processes in turns, a process running until it waits (in a sync, for a
    /// message, for a nested run) and then handing the thread to the next one in user space
    /// instead of yielding it to the kernel or sleeping (default: off, a thread per process).
    ///
    /// For runs with more processes than cores (16 or 64 processes on a laptop, BSPk-style
    /// fine-grained programs): there a thread per process pays a kernel context switch at
    /// nearly every wait, and a coroutine switch costs a hundredth of it (`mbsp-bench lazy`
    /// and `mbsp-bench wait` print both). The threads of the other cores are the calling
    /// thread's parked workers, as for runs on threads ([`Run::reuse_threads`] is not
    /// consulted), and each thread keeps its coroutines' stacks for the next run. Where no
    /// two processes would share a thread (at most one per core), the run goes as without it.
    ///
    /// What changes for the program: processes of one core share its thread, so thread-locals
    /// are shared by them, and code that blocks the thread until another process acts (a
    /// channel or a lock between processes, a `std::sync::Barrier`) holds up that core's
    /// processes, or deadlocks: communicate through the BSP primitives. Each process has a
    /// stack of [`stack_size`](Self::stack_size) bytes (default 2 MiB, reserved, not committed).
    /// Checkpoints ([`Run::checkpoints`]) and [`Run::begin`] (whose process 0 is the caller's
    /// own thread) are refused with such runs. Declared syncs ([`Ctx::declare_incoming`]) keep
    /// their checks but take the barrier, which costs such a run less than waiting for each
    /// process's senders.
    ///
    /// [`Ctx::declare_incoming`]: crate::Ctx::declare_incoming
    ///
    /// ```
    /// // 32 processes pass tokens round a ring 100 times, every superstep declared (lazy).
    /// let r = mbsp::Run::new(32).coroutines(true).run(|ctx| {
    ///     let (p, me) = (ctx.nprocs(), ctx.pid());
    ///     let slot = ctx.push_reg(vec![me])?;
    ///     ctx.sync()?;
    ///     for _ in 0..100 {
    ///         let token = ctx.local(&slot)?[0];
    ///         ctx.put((me + 1) % p, &[token], &slot, 0)?;
    ///         ctx.declare_incoming(1)?;
    ///         ctx.sync()?;
    ///     }
    ///     Ok(ctx.local(&slot)?[0])
    /// })?;
    /// // Process 0 holds the token that started 100 places before it: (0 - 100) mod 32.
    /// assert_eq!(r[0], 28);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn coroutines(mut self, on: bool) -> Self {
        self.coroutines = on;
        self
    }

    /// The misuse of asking for coroutines where they cannot be had (`what`).
    fn refuse_coroutines(&self, what: &str) -> Result<()> {
        if !self.coroutines {
            return Ok(());
        }
        Err(Error::outside(
            ErrorKind::Misuse,
            "run",
            format!("Run::coroutines(true) cannot be combined with {what}"),
        ))
    }

    /// Checkpoint this run as `policy` says, and let it resume from the folder's newest
    /// complete checkpoint ([`Ctx::sync_checkpoint`], [`Ctx::resume`]). Without this, the
    /// policy comes from the environment ([`Checkpoints::from_env`](crate::Checkpoints::from_env)),
    /// if any. Top-level runs only (a nested run never checkpoints), on threads or over MPI
    /// ranks ([`World::run`](crate::ranks::World::run): every rank writes its part to the
    /// folder, which the ranks must share; always in the foreground).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("mbsp-doc-run-ckpt-{}", std::process::id()));
    /// let run = mbsp::Run::new(2).checkpoints(mbsp::Checkpoints::in_folder(&dir).every_supersteps(10));
    /// let r = run.run(|ctx| {
    ///     let mut it: u32 = ctx.resume()?.unwrap_or(0);
    ///     while it < 25 {
    ///         it += 1;
    ///         ctx.sync_checkpoint(&it)?; // checkpoints at supersteps 10 and 20
    ///     }
    ///     Ok(it)
    /// })?;
    /// assert_eq!(r, vec![25, 25]);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn checkpoints(mut self, policy: crate::Checkpoints) -> Self {
        self.checkpoints = Some(policy);
        self
    }

    /// The explicit checkpoint policy, else the environment's; a malformed environment is an
    /// error of the run.
    pub(crate) fn resolve_checkpoints(&mut self) -> Result<()> {
        self.checkpoints = self.checkpoint_policy()?;
        Ok(())
    }

    /// The explicit checkpoint policy, else the environment's (an error if malformed).
    pub(crate) fn checkpoint_policy(&self) -> Result<Option<crate::Checkpoints>> {
        match (&self.checkpoints, crate::Checkpoints::from_env()) {
            (Some(c), _) => Ok(Some(c.clone())),
            (None, Some(Ok(c))) => Ok(Some(c)),
            (None, Some(Err(e))) => Err(Error::outside(ErrorKind::Misuse, "run", e)),
            (None, None) => Ok(None),
        }
    }

    /// The checkpointing of a run of `p` processes started from `parent_path` (top-level
    /// runs with a policy only).
    pub(crate) fn checkpointer(
        &self,
        parent_path: &[usize],
        p: usize,
    ) -> Option<Arc<crate::checkpoint::Checkpointer>> {
        let policy = self
            .checkpoints
            .clone()
            .filter(|_| parent_path.is_empty())?;
        Some(Arc::new(crate::checkpoint::Checkpointer::new(policy, p)))
    }

    /// Start the run; see [`run`].
    pub fn run<R, F>(self, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        let sink = self.top_sink();
        Ok(self.run_top(sink, &f)?.0)
    }

    /// Start the run without blocking: the calling thread becomes process 0 and gets its
    /// context in the returned [`Spmd`]; processes 1.. run `f` on new threads. Call
    /// [`Spmd::end`] when process 0 is done; it waits for the others. This is the shape of
    /// BSPlib's `bsp_begin`/`bsp_end`, for foreign callers (the C ABI); Rust code should prefer
    /// [`Run::run`].
    ///
    /// ```
    /// let mut spmd = mbsp::Run::new(3).begin(|ctx| {
    ///     ctx.sync()?;
    ///     Ok(())
    /// }).unwrap();
    /// let ctx = spmd.ctx();
    /// assert_eq!((ctx.pid(), ctx.nprocs()), (0, 3));
    /// ctx.sync().unwrap();
    /// spmd.end().unwrap();
    /// ```
    pub fn begin<F>(mut self, f: F) -> Result<Spmd<'static>>
    where
        F: Fn(&mut Ctx) -> Result<()> + Send + Sync + 'static,
    {
        self.refuse_coroutines("Run::begin: its process 0 is the caller's own thread")?;
        self.resolve_checkpoints()?;
        let layout = self.top_layout()?;
        let sink = self.top_sink();
        Ok(self.start(Tree::new(), Vec::new(), layout, None, sink, Arc::new(f)))
    }

    /// The placement of a top-level run: on the given or current machine, with the given or
    /// default (`MBSP_AFFINITY`) policy (under `MBSP_AFFINITY=force:...` the builder kept no
    /// policy, so the environment's applies); the plan this thread made for the same inputs
    /// before, if it did ([`Layout::cached`]).
    pub(crate) fn top_layout(&self) -> Result<Arc<Layout>> {
        let (loaded, whole, policy, off) = self.top_inputs()?;
        Layout::cached(&loaded, &whole, self.procs, policy, off, |_| {}).map_err(top_plan_error)
    }

    /// What a top-level run is planned from: the machine, the domain (all of it), the policy
    /// and why binding is off, if it is; or the misuse that prevents planning.
    fn top_inputs(&self) -> Result<(Loaded, Domain, Policy, Option<NotBound>)> {
        if self.procs == Procs::Count(0) {
            return Err(Error::outside(
                ErrorKind::Misuse,
                "run",
                "a run needs at least 1 process, but p = 0 was requested",
            ));
        }
        if let Procs::Count(p) = self.procs {
            crate::limits::check_top_procs(p)?;
        }
        let (def_policy, def_bind) = default_affinity()?;
        let loaded = match self.machine.clone() {
            Some(l) => l,
            None => Machine::current().map_err(|e| {
                Error::outside(ErrorKind::System, "run", e.to_string()).with_source(e)
            })?,
        };
        let whole = loaded.machine.whole();
        let off = match self.bind {
            Some(true) => None,
            Some(false) => Some(OFF_BY_RUN),
            None if def_bind => None,
            None if crate::place::forced_affinity().is_some() => Some(OFF_BY_FORCE),
            None => Some(OFF_BY_ENV),
        };
        Ok((
            loaded,
            whole,
            self.policy.clone().unwrap_or(def_policy),
            off,
        ))
    }

    /// [`Run::begin`] for a run nested in the process owning `parent` (which becomes its
    /// process 0). The nested run borrows `parent` exclusively until [`Spmd::end`].
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     let mut inner = mbsp::Run::new(2).begin_nested(ctx, |n| n.sync())?;
    ///     inner.ctx().sync()?; // `ctx` cannot be used until `end`
    ///     inner.end()?;
    ///     ctx.sync()
    /// }).unwrap();
    /// ```
    pub fn begin_nested<'a, F>(self, parent: &'a mut Ctx, f: F) -> Result<Spmd<'a>>
    where
        F: Fn(&mut Ctx) -> Result<()> + Send + Sync + 'static,
    {
        parent.live("run")?;
        if self.coroutines {
            return Err(parent.misuse(
                "run",
                "Run::coroutines(true) cannot be combined with Run::begin_nested: its process 0 \
                 is the parent's own thread"
                    .into(),
            ));
        }
        if self.procs == Procs::Count(0) {
            return Err(parent.misuse(
                "run",
                "a nested run needs at least 1 process, but p = 0 was requested".into(),
            ));
        }
        let layout = self.nested_layout(parent)?;
        // A begun nested run is profiled only when asked; its profile is not attached.
        let sink = self
            .profile
            .unwrap_or(false)
            .then(|| Arc::new(crate::profile::record::Sink::default()));
        Ok(self.start(
            parent.run.tree.clone(),
            parent.path.clone(),
            layout,
            Some(&parent.binding),
            sink,
            Arc::new(f),
        ))
    }

    fn nested_layout(&self, parent: &Ctx) -> Result<Arc<Layout>> {
        if let Procs::Count(p) = self.procs {
            crate::limits::check_procs(p).map_err(|m| parent.misuse("run", m))?;
        }
        let up = &parent.run.layout;
        let policy = self.policy.clone().unwrap_or_else(|| match &up.policy {
            Policy::Manual(_) => Policy::Scattered,
            p => p.clone(),
        });
        let off = match self.bind {
            Some(true) => None,
            Some(false) => Some(OFF_BY_RUN),
            None => up.off.clone(),
        };
        let procs = self.procs;
        Layout::cached(&up.loaded, parent.domain(), procs, policy, off, |layout| {
            crate::place::warn_stacking(&parent.path, procs, layout)
        })
        .map_err(|e| {
            let err = parent.error(ErrorKind::Misuse, "run", format!("nested run: {e}"));
            parent.fail_with(err.with_source(e))
        })
    }

    fn start<'a, F>(
        &self,
        tree: Arc<Tree>,
        parent_path: Vec<usize>,
        layout: Arc<Layout>,
        inherited: Option<&Binding>,
        sink: Option<Arc<crate::profile::record::Sink>>,
        f: Arc<F>,
    ) -> Spmd<'a>
    where
        F: Fn(&mut Ctx) -> Result<()> + Send + Sync + 'static,
    {
        let top = parent_path.is_empty();
        crate::place::report_run(&parent_path, &layout);
        let (shared, workers) = if self.reuse.unwrap_or_else(crate::team::reuse_by_default) {
            let mut team = Team::take(self.stack_size);
            let shared = self.shared_from(
                &mut team,
                &tree,
                &parent_path,
                layout,
                inherited,
                sink.clone(),
            );
            let f: Arc<BegunFn> = f;
            // SAFETY: the `Spmd` keeps `f` and waits for the launch (in `finish`, or when the
            // launch is dropped) before it drops `f`.
            let launch = Box::new(unsafe { Launch::new(shared.clone(), &*f, process_dyn, &team) });
            launch.dispatch(&mut team);
            let w = Workers::Team {
                launch,
                team,
                _f: f,
            };
            (shared, w)
        } else {
            let shared =
                Arc::new(self.new_shared(&tree, &parent_path, layout, inherited, sink.clone()));
            let mut threads = Vec::with_capacity(shared.p - 1);
            for pid in 1..shared.p {
                let (mine, f, id) = (shared.clone(), f.clone(), *shared.id);
                match self
                    .thread(&shared, pid)
                    .spawn(move || process(&mine, id, pid, &*f))
                {
                    Ok(h) => threads.push(h),
                    Err(e) => {
                        spawn_failed(&shared, pid, e);
                        break;
                    }
                }
            }
            (shared, Workers::Spawned(threads))
        };
        // SAFETY: the `Spmd` keeps `shared` (`_shared`) until its context has been dropped.
        let (ctx, saved) = unsafe { enter(&shared, *shared.id, 0) };
        Spmd {
            ckpt: shared.ckpt.clone(),
            ctx: Some(ctx),
            saved,
            workers: Some(workers),
            tree,
            profile: sink.filter(|_| top).map(|s| {
                let p = shared.p;
                Box::new(move || Some(s.take(p, Vec::new()))) as TopProfile
            }),
            _shared: Some(shared),
            _parent: PhantomData,
        }
    }

    /// Start a run nested in the process owning `parent`, placed in what it owns.
    pub(crate) fn run_nested<R: Send>(self, parent: &Ctx, f: &SpmdFn<'_, R>) -> Result<Vec<R>> {
        parent.live("run")?;
        if self.procs == Procs::Count(0) {
            return Err(parent.misuse(
                "run",
                "a nested run needs at least 1 process, but p = 0 was requested".into(),
            ));
        }
        let layout = self.nested_layout(parent)?;
        let p = layout.domains.len();
        let tree = &parent.run.tree;
        let inherited = Some(&parent.binding);
        // Profiled with its parent (unless told otherwise), and attached to the parent's.
        let sink = self
            .profile
            .unwrap_or(parent.prof.is_some())
            .then(|| Arc::new(crate::profile::record::Sink::default()));
        let results = self.launch(tree, &parent.path, layout, inherited, sink.clone(), f);
        let results = results.collect(tree)?;
        if let (Some(sink), Some(rec)) = (sink, &parent.prof) {
            rec.borrow_mut()
                .add_nested(sink.take(p, parent.path.clone()));
        }
        Ok(results)
    }

    fn launch<R: Send>(
        &self,
        tree: &Arc<Tree>,
        parent_path: &[usize],
        layout: Arc<Layout>,
        inherited: Option<&Binding>,
        sink: Option<Arc<crate::profile::record::Sink>>,
        f: &SpmdFn<'_, R>,
    ) -> Results<R> {
        crate::place::report_run(parent_path, &layout);
        if self.shares_threads(&layout) {
            // The coroutines' stack size is not the workers' (`launch_coroutines`).
            let mut team = Team::take(None);
            let shared = self.shared_from(&mut team, tree, parent_path, layout, inherited, sink);
            let results = self.launch_coroutines(&mut team, &shared, f);
            team.keep(shared, results.ended_well());
            team.give_back();
            return results;
        }
        if !self.reuse.unwrap_or_else(crate::team::reuse_by_default) {
            let shared = Arc::new(self.new_shared(tree, parent_path, layout, inherited, sink));
            return self.launch_spawned(shared, f);
        }
        let mut team = Team::take(self.stack_size);
        let shared = self.shared_from(&mut team, tree, parent_path, layout, inherited, sink);
        let results = {
            // SAFETY: `launch` lives in this frame and waits for every worker, when dropped at
            // the latest, before `f` (borrowed by this call) can go away.
            let launch = unsafe { Launch::new(shared.clone(), f, process_dyn, &team) };
            launch.dispatch(&mut team);
            let mut results = Results::with_capacity(shared.p);
            results.push(process(&shared, *shared.id, 0, f));
            launch.wait();
            results.extend(launch.take_results());
            results
        };
        let results = finish_checkpoints(&shared, results);
        team.keep(shared, results.ended_well());
        team.give_back();
        results
    }

    /// [`Run::launch`] with threads started for this run and joined at its end.
    fn launch_spawned<R: Send>(&self, shared: Arc<RunShared>, f: &SpmdFn<'_, R>) -> Results<R> {
        let p = shared.p;
        std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(p - 1);
            for pid in 1..p {
                let (mine, id) = (shared.clone(), *shared.id);
                match self
                    .thread(&shared, pid)
                    .spawn_scoped(scope, move || process(&mine, id, pid, f))
                {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        spawn_failed(&shared, pid, e);
                        break;
                    }
                }
            }
            let mut results = Results::with_capacity(p);
            results.push(process(&shared, *shared.id, 0, f));
            for h in handles {
                results.push(h.join().unwrap_or_else(|_| {
                    Err(Error::outside(
                        ErrorKind::Panic,
                        "run",
                        "a process thread panicked outside its SPMD function",
                    ))
                }));
            }
            finish_checkpoints(&shared, results)
        })
    }
}

impl Run {
    /// [`Run::launch`] with the processes as coroutines (`coroutines.rs`): the processes placed
    /// on the same PUs share a thread (on an unbound run: pid modulo the cores); the group of
    /// process 0 runs on the calling thread, each other group on a worker of its team.
    fn launch_coroutines<R: Send>(
        &self,
        team: &mut Team,
        shared: &Arc<RunShared>,
        f: &SpmdFn<'_, R>,
    ) -> Results<R> {
        let p = shared.p;
        let groups = shared.layout.thread_groups();
        let stack = self.stack_size.unwrap_or(crate::coroutines::DEFAULT_STACK);
        // Written once per process and run: no need for anything but a lock.
        let slots: Vec<std::sync::Mutex<Option<Result<R>>>> =
            (0..p).map(|_| std::sync::Mutex::new(None)).collect();
        let run_group = |pids: &[usize]| {
            let bodies = pids
                .iter()
                .map(|&pid| {
                    let slots = &slots;
                    Box::new(move || {
                        let r =
                            catch_unwind(AssertUnwindSafe(|| process(shared, *shared.id, pid, f)))
                                .unwrap_or_else(|_| Err(outside_panic()));
                        *slots[pid].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                    }) as Box<dyn FnOnce() + '_>
                })
                .collect();
            if let Err(e) = crate::coroutines::run_all(bodies, stack) {
                // No stack: none of the group ran (their slots stay empty).
                group_failed(shared, pids, "a coroutine stack", e);
            }
        };
        // The other groups run on the calling thread's team of parked workers (warm from run to
        // run, each keeping its coroutines' stacks); they wait for their next job as an
        // oversubscribed run's processes do, and the caller, whose group is done, for them as
        // a run of a process per core does.
        let n = groups.len();
        team.fan_out(
            n,
            WaitPolicy::for_load(p, shared.layout.cores),
            WaitPolicy::for_load(n, n),
            &|g| run_group(&groups[g]),
            |g, e| {
                let e = std::io::Error::new(e.kind(), e.to_string());
                group_failed(shared, &groups[g], "the thread", e);
            },
        );
        let mut results = Results::with_capacity(p);
        results.extend(slots.into_iter().map(|s| {
            let r = s.into_inner().unwrap_or_else(|e| e.into_inner());
            r.unwrap_or_else(|| {
                Err(Error::outside(
                    ErrorKind::System,
                    "run",
                    "the process could not be started",
                ))
            })
        }));
        finish_checkpoints(shared, results)
    }

    /// Whether the run's processes are coroutines sharing threads: asked for, and some thread
    /// would have more than one (where each would have its own, coroutines would only add a
    /// switch to every wait, and the run goes as without them).
    fn shares_threads(&self, layout: &Layout) -> bool {
        self.coroutines && layout.thread_groups().len() < layout.domains.len()
    }

    /// Whether the run's barrier is a tree: by default when the processes of `layout` are more
    /// than twice its cores (`engine/threads/barrier.rs`). At twice as many processes as cores
    /// both barriers cost about the same, and the dissemination barrier carries small puts;
    /// beyond, the tree is faster, the more so the more processes sleep (`mbsp-bench core`'s
    /// oversubscription table: docs/benchmarks.md).
    fn oversubscribed(&self, layout: &Layout) -> bool {
        self.tree_barrier
            .unwrap_or_else(|| layout.domains.len() > 2 * layout.cores)
    }

    /// This run's waiting policy for `layout`.
    fn wait_policy_for(&self, layout: &Layout) -> WaitPolicy {
        let p = layout.domains.len();
        // A process coroutine's waits hand its thread on at once (`coroutines.rs`): spinning
        // would only keep the core's other processes from running.
        self.wait.unwrap_or_else(|| {
            if self.shares_threads(layout) {
                WaitPolicy::new(0, 0)
            } else {
                WaitPolicy::for_load(p, layout.cores)
            }
        })
    }

    /// What the thread engine's state of a run placed by `layout` must be.
    fn shape(&self, layout: &Layout) -> Shape {
        let policy = self.wait_policy_for(layout);
        let more_than_cores = layout.domains.len() > layout.cores;
        Shape {
            policy,
            lazy_policy: policy.for_lazy_waits(more_than_cores),
            tree_barrier: self.oversubscribed(layout),
            lanes: self.lanes != Some(false),
            declared_at_barrier: self.declared_at_barrier != Some(false),
            slots: self.slots.unwrap_or(if more_than_cores {
                crate::outbox::SLOTS
            } else {
                2
            }),
            share: !more_than_cores,
            coroutines: self.shares_threads(layout),
        }
    }

    /// New shared state of a run placed by `layout`.
    fn new_shared(
        &self,
        tree: &Arc<Tree>,
        parent_path: &[usize],
        layout: Arc<Layout>,
        inherited: Option<&Binding>,
        sink: Option<Arc<crate::profile::record::Sink>>,
    ) -> RunShared {
        let shape = self.shape(&layout);
        let engine = RunEngine::Threads(RunState::new(&layout, shape));
        let ckpt = self.checkpointer(parent_path, layout.domains.len());
        let mut s = RunShared::new(
            parent_path.to_vec(),
            tree.clone(),
            shape.policy,
            layout,
            engine,
        );
        s.inherited = inherited.cloned();
        s.prof = sink;
        s.ckpt = ckpt;
        s
    }

    /// The shared state of a run placed by `layout`: the team's last one when it fits (same
    /// size and waiting policy, nobody else holding it), else a new one.
    fn shared_from(
        &self,
        team: &mut Team,
        tree: &Arc<Tree>,
        parent_path: &[usize],
        layout: Arc<Layout>,
        inherited: Option<&Binding>,
        sink: Option<Arc<crate::profile::record::Sink>>,
    ) -> Arc<RunShared> {
        let shape = self.shape(&layout);
        let continues = team.last_ended_well;
        if let Some(mut last) = team.last.take() {
            if last.engine.threads().fits(&layout, shape) {
                if let Some(s) = Arc::get_mut(&mut last) {
                    s.engine.threads_mut().reuse(shape, continues);
                    // Fields the processes read are written only when they change (each
                    // line written here crosses to the cores of the run's other processes).
                    if !Arc::ptr_eq(&s.layout, &layout) {
                        s.layout = layout;
                    }
                    if s.inherited.as_ref() != inherited {
                        s.inherited = inherited.cloned();
                    }
                    if s.prof.is_some() || sink.is_some() {
                        s.prof = sink;
                    }
                    let ckpt = self.checkpointer(parent_path, s.p);
                    if s.ckpt.is_some() || ckpt.is_some() {
                        s.ckpt = ckpt;
                    }
                    s.reuse(parent_path, tree, continues);
                    return last;
                }
            }
        }
        Arc::new(self.new_shared(tree, parent_path, layout, inherited, sink))
    }

    /// The builder of process `pid`'s thread: its name and stack size.
    fn thread(&self, shared: &RunShared, pid: usize) -> std::thread::Builder {
        let b = std::thread::Builder::new().name(thread_name(shared, pid));
        match self.stack_size {
            Some(s) => b.stack_size(s),
            None => b,
        }
    }
}

/// Record that the processes `pids` of a run with coroutines could not be started (`what`
/// could not be made): they count as stopped, and the run is aborted.
fn group_failed(shared: &RunShared, pids: &[usize], what: &str, e: std::io::Error) {
    for &pid in pids {
        shared.proc(pid).mark_stopped(*shared.id);
    }
    shared.tree.fail(&Error::new(
        ErrorKind::System,
        "run",
        shared.parent_path.clone(),
        None,
        format!(
            "could not make {what} for pids {pids:?} of {}: {e}",
            shared.p
        ),
    ));
}

/// The error of a process whose thread panicked outside its SPMD function.
fn outside_panic() -> Error {
    Error::outside(
        ErrorKind::Panic,
        "run",
        "a process thread panicked outside its SPMD function",
    )
}

/// A top-level run that cannot be planned: a misuse (more processes than the policy can
/// place, a manual list naming CPUs the machine lacks, ...).
fn top_plan_error(e: PlanError) -> Error {
    Error::outside(ErrorKind::Misuse, "run", e.to_string()).with_source(e)
}

fn thread_name(shared: &RunShared, pid: usize) -> String {
    let mut s = String::from("mbsp");
    for p in &shared.parent_path {
        s.push_str(&format!("-{p}"));
    }
    s.push_str(&format!("-{pid}"));
    s
}

/// [`process`] for a type-erased SPMD function (what team workers run).
fn process_dyn<'a, R>(
    shared: &Arc<RunShared>,
    id: u64,
    pid: usize,
    f: &'a SpmdFn<'a, R>,
) -> Result<R> {
    process(shared, id, pid, f)
}

/// All results, or the root cause of the failure.
/// The end of a run: wait for its background checkpoints to be written; one that could not
/// be, when the policy requires them, becomes process 0's result.
fn finish_checkpoints<R>(shared: &RunShared, mut results: Results<R>) -> Results<R> {
    if let Some(e) = shared.ckpt.as_ref().and_then(|ck| ck.finish_run()) {
        results.fail_first(e);
    }
    results
}

/// The processes' results, pushed in pid order: their values while every one succeeds, and
/// the first error (by pid) once one has failed. The values go straight where the caller gets
/// them: no vector of `Result`s is made and taken apart at every run.
struct Results<R> {
    values: Vec<R>,
    first_error: Option<Error>,
}

impl<R> Results<R> {
    fn with_capacity(p: usize) -> Self {
        Results {
            values: Vec::with_capacity(p),
            first_error: None,
        }
    }

    /// The next process's result.
    fn push(&mut self, r: Result<R>) {
        match r {
            Ok(v) => self.values.push(v),
            Err(e) => {
                self.first_error.get_or_insert(e);
            }
        }
    }

    /// Whether every process's result so far is a value.
    fn ended_well(&self) -> bool {
        self.first_error.is_none()
    }

    /// Process 0's result becomes `e` (the first by pid).
    fn fail_first(&mut self, e: Error) {
        self.first_error = Some(e);
    }

    /// All values, or the root cause of the failure: the hierarchy's error if it recorded
    /// one, else the first process's error.
    fn collect(self, tree: &Tree) -> Result<Vec<R>> {
        match self.first_error {
            None => Ok(self.values),
            Some(e) => Err(tree.error().unwrap_or(e)),
        }
    }
}

impl<R> Extend<Result<R>> for Results<R> {
    fn extend<I: IntoIterator<Item = Result<R>>>(&mut self, results: I) {
        results.into_iter().for_each(|r| self.push(r));
    }
}

impl Ctx {
    /// Start a run of `p` processes nested in this one (MulticoreBSP's nested `bsp_begin`):
    /// this process becomes pid 0 of the nested run, `p - 1` new threads the others. The nested
    /// run has its own pids, barrier, registrations, tag size and queue; this run's
    /// registrations are not visible inside and this process's pending requests stay queued for
    /// its next sync here. Failures anywhere end the whole hierarchy.
    ///
    /// ```
    /// // 2 processes, each running 3 nested processes: 6 leaves.
    /// let r = mbsp::run(2, |ctx| {
    ///     let outer = ctx.pid();
    ///     let inner = ctx.run(3, |nctx| {
    ///         nctx.sync()?; // involves only the 3 nested processes
    ///         Ok(nctx.path().to_vec())
    ///     })?;
    ///     ctx.sync()?;
    ///     Ok((outer, inner))
    /// }).unwrap();
    /// assert_eq!(r[1].1, vec![vec![1, 0], vec![1, 1], vec![1, 2]]);
    /// ```
    pub fn run<R, F>(&self, p: usize, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        Run::new(p).run_nested(self, &f)
    }

    /// Start a nested run of one process per object of `level` inside what this process owns
    /// (e.g. one per core of its package): see [`Run::per`].
    ///
    /// ```
    /// // One process per package, and inside each, one per core.
    /// let cores = mbsp::Run::per(mbsp::Level::Package).run(|ctx| {
    ///     let inner = ctx.run_per(mbsp::Level::Core, |c| Ok(c.placement().cores[0]))?;
    ///     Ok(inner)
    /// }).unwrap();
    /// let total: usize = cores.iter().map(Vec::len).sum();
    /// assert_eq!(total, mbsp::Machine::current().unwrap().machine.cores().len());
    /// ```
    pub fn run_per<R, F>(&self, level: Level, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        Run::per(level).run_nested(self, &f)
    }

    /// Start a nested run with options; see [`Ctx::run`].
    pub fn run_with<R, F>(&self, options: Run, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        options.run_nested(self, &f)
    }
}

/// A run started with [`Run::begin`]: process 0's context, and the other processes' threads.
/// A nested run ([`Run::begin_nested`]) borrows its parent's context for `'a`.
pub struct Spmd<'a> {
    pub(crate) ctx: Option<Ctx>,
    pub(crate) saved: Option<Vec<u32>>,
    pub(crate) workers: Option<Workers>,
    pub(crate) tree: Arc<Tree>,
    /// A profiled top-level run (`MBSP_PROFILE`): how its profile is put together when it
    /// has ended.
    pub(crate) profile: Option<TopProfile>,
    /// The run's checkpointing, whose writer the end waits for.
    pub(crate) ckpt: Option<Arc<crate::checkpoint::Checkpointer>>,
    /// The run's state, which process 0's context points to: kept until that context is
    /// dropped (in `finish`, or as the field before this one). `None` where the context keeps
    /// it (a run over ranks).
    pub(crate) _shared: Option<Arc<RunShared>>,
    pub(crate) _parent: PhantomData<&'a mut Ctx>,
}

/// How the profile of a begun top-level run is put together once the run has ended: from the
/// records its processes handed in (threads), or gathered from every rank (a collective of
/// the run's ranks); `None` on a process that does not report it (a rank other than 0).
pub(crate) type TopProfile = Box<dyn FnOnce() -> Option<crate::profile::Profile> + Send>;

/// The SPMD function of a begun run.
type BegunFn = dyn Fn(&mut Ctx) -> Result<()> + Send + Sync;

/// Who runs processes 1.. of a begun run.
pub(crate) enum Workers {
    /// Threads started for the run.
    Spawned(Vec<std::thread::JoinHandle<Result<()>>>),
    /// A team's workers (the launch before the function it lends: dropping it waits).
    Team {
        launch: Box<Launch<()>>,
        team: Team,
        _f: Arc<BegunFn>,
    },
}

impl Spmd<'_> {
    /// Process 0's context.
    pub fn ctx(&mut self) -> &mut Ctx {
        self.ctx.as_mut().expect("the run has ended")
    }

    /// End process 0 (its final sync), wait for the other processes, and return the run's
    /// outcome: the first error of any process, or `Ok`.
    pub fn end(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        let Some(mut ctx) = self.ctx.take() else {
            return Ok(());
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| ctx.end()));
        let mine = leave(ctx, self.saved.take(), outcome);
        let Some(workers) = self.workers.take() else {
            // This process alone (a run over ranks: the other processes are other ranks'),
            // with the run's error as its engine agreed it with them: every rank reports its
            // profile, or none does.
            if mine.is_ok() {
                self.report_profile();
            }
            return mine;
        };
        let mut results = Results::with_capacity(1);
        results.push(mine);
        match workers {
            Workers::Spawned(threads) => {
                for h in threads {
                    results.push(h.join().unwrap_or_else(|_| {
                        Err(Error::outside(
                            ErrorKind::Panic,
                            "run",
                            "a process thread panicked outside its SPMD function",
                        ))
                    }));
                }
            }
            Workers::Team {
                launch,
                mut team,
                _f,
            } => {
                launch.wait();
                results.extend(launch.take_results());
                let shared = launch.shared.clone();
                drop(launch);
                team.keep(shared, results.ended_well());
                team.give_back();
            }
        }
        if let Some(e) = self.ckpt.take().and_then(|ck| ck.finish_run()) {
            results.fail_first(e);
        }
        results.collect(&self.tree)?;
        self.report_profile();
        Ok(())
    }

    /// The run has ended well: its profile as `MBSP_PROFILE` asks, if it was profiled.
    fn report_profile(&mut self) {
        if let Some(profile) = self.profile.take().and_then(|assemble| assemble()) {
            crate::profile::emit(&profile);
        }
    }
}

impl Drop for Spmd<'_> {
    /// A run dropped without [`Spmd::end`] is aborted (so no thread waits forever) and joined.
    fn drop(&mut self) {
        if let Some(ctx) = &self.ctx {
            if !std::thread::panicking() || !self.tree.is_aborted() {
                let e = ctx.error(
                    ErrorKind::Misuse,
                    "end",
                    "the run was dropped before process 0 ended it",
                );
                self.tree.fail(&e);
            }
            let _ = self.finish();
        }
    }
}

impl std::fmt::Debug for Spmd<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spmd").field("ctx", &self.ctx).finish()
    }
}
