//! Starting runs: the caller becomes pid 0, `p - 1` scoped threads become the others.

use crate::ctx::{Ctx, RunShared};
use crate::error::{Error, ErrorKind, Result};
use crate::place::{Layout, Procs, default_affinity};
use crate::team::{Launch, SpmdFn, Team};
use crate::tree::Tree;
use crate::wait::WaitPolicy;
use mbsp_topology::{Binding, Domain, Level, Loaded, Machine, Policy};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// The number of hardware threads available to this program (as the standard library reports
/// it when first asked): what `bsp_nprocs()` returns outside a run. Under `mpiexec` (feature
/// `mpi`), outside a run over ranks: the number of ranks, one process each.
///
/// ```
/// assert!(mbsp::nprocs() >= 1);
/// ```
pub fn nprocs() -> usize {
    // Under mpiexec, a top-level run has one process per rank.
    #[cfg(feature = "mpi")]
    if let Some(world) = crate::ranks::world_for_top_level() {
        use mpi::topology::Communicator;
        return world.size() as usize;
    }
    // Asked once: the standard library reads cgroup files to answer, which costs tens of
    // microseconds — more than starting a run with a warm team.
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
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
    procs: Procs,
    policy: Option<Policy>,
    bind: Option<bool>,
    machine: Option<Loaded>,
    wait: Option<WaitPolicy>,
    stack_size: Option<usize>,
    reuse: Option<bool>,
    profile: Option<bool>,
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
        let sink = Arc::new(crate::profile::Sink::default());
        let (results, profile) = self.run_top(Some(sink), &f)?;
        Ok((results, profile.expect("a profiled run has a profile")))
    }

    /// A top-level run handing its processes' records to `sink` (if any); the profile is
    /// reported as `MBSP_PROFILE` asks and returned.
    fn run_top<R, F>(
        self,
        sink: Option<Arc<crate::profile::Sink>>,
        f: &F,
    ) -> Result<(Vec<R>, Option<crate::profile::Profile>)>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        let layout = self.top_layout()?;
        let p = layout.domains.len();
        let tree = Tree::new();
        let results = self.launch(tree.clone(), Vec::new(), layout, None, sink.clone(), f);
        let results = collect(results, &tree)?;
        let profile = sink.map(|sink| sink.take(p, Vec::new()));
        if let Some(profile) = &profile
            && *crate::profile::env_request() != crate::profile::EnvRequest::Off
        {
            crate::profile::emit(profile);
        }
        Ok((results, profile))
    }

    /// The sink of a top-level run's profile, if it is profiled.
    fn top_sink(&self) -> Option<Arc<crate::profile::Sink>> {
        let env = *crate::profile::env_request() != crate::profile::EnvRequest::Off;
        self.profile
            .unwrap_or(env)
            .then(|| Arc::new(crate::profile::Sink::default()))
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
    /// inherits its parent's policy, manual excepted).
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
        self.policy = Some(policy);
        self
    }

    /// Whether to bind each process's thread (and registered memory) to its placement on the
    /// real machine (default: yes, unless `MBSP_AFFINITY=none`; nested runs inherit). The plan
    /// is made either way; it tells processes what they own.
    pub fn bind(mut self, bind: bool) -> Self {
        self.bind = Some(bind);
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

    /// Start the run; see [`run`].
    pub fn run<R, F>(self, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        #[cfg(feature = "mpi")]
        if let Some(world) = crate::ranks::world_for_top_level() {
            let _active = crate::ranks::Active::enter();
            let Some((mut ctx, saved)) = self.rank_start(world)? else {
                return Ok(Vec::new());
            };
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let r = f(&mut ctx)?;
                ctx.end()?;
                Ok(r)
            }));
            return leave_rank(ctx, saved, outcome).map(|r| vec![r]);
        }
        let sink = self.top_sink();
        Ok(self.run_top(sink, &f)?.0)
    }

    /// This rank's process of a top-level run over MPI ranks, or `None` if the run has fewer
    /// processes than there are ranks and this rank takes no part. Collective over the ranks.
    #[cfg(feature = "mpi")]
    fn rank_start(
        &self,
        world: mpi::topology::SimpleCommunicator,
    ) -> Result<Option<(Ctx, Option<Vec<u32>>)>> {
        use mpi::topology::Communicator;
        let size = world.size() as usize;
        let p = match self.procs {
            Procs::Count(0) => {
                return Err(Error::outside(
                    ErrorKind::Misuse,
                    "run",
                    "a run needs at least 1 process, but p = 0 was requested",
                ));
            }
            Procs::Count(n) => n,
            Procs::Per(_) => size,
        };
        if p > size {
            return Err(Error::outside(
                ErrorKind::Misuse,
                "run",
                format!(
                    "the top level runs over MPI ranks, one process per rank: p = {p} \
                     processes were requested but the program runs on {size} rank(s) \
                     (start it with mpiexec -n {p}, or ask for at most {size})"
                ),
            ));
        }
        // Everything that can fail on one rank alone comes before the first collective, and the
        // ranks agree on it (a rank returning early would leave the others waiting).
        let layout = Run {
            procs: Procs::Count(1),
            ..self.clone()
        }
        .top_layout();
        crate::ranks::agree_start(&world, layout.as_ref().err())?;
        let mut layout = layout?;
        let Some(comm) = crate::ranks::comm_for(world, p) else {
            return Ok(None);
        };
        let rank = comm.rank() as usize;
        // The rank's domain: the PUs the MPI launcher left this thread (all of them when it
        // does not bind), so that nested runs are placed and bound inside the rank's cpuset.
        let saved = layout.binder.thread_cpus();
        let m = layout.machine().clone();
        let mine = Domain::from_pus(&m, saved.iter().flatten().filter_map(|&os| m.pu_by_os(os)));
        let domain = if mine.pus().is_empty() {
            m.whole()
        } else {
            mine
        };
        layout.domains = vec![domain; p];
        let binding = match &saved {
            Some(cpus) if layout.binder.applies() => {
                BOUND.with(|c| *c.borrow_mut() = Some(cpus.clone()));
                Binding::Applied(cpus.clone())
            }
            _ => Binding::NotApplied(
                "the top level runs over MPI ranks: this rank's thread stays where the MPI \
                 launcher put it"
                    .into(),
            ),
        };
        let mut shared =
            RunShared::new(Vec::new(), Tree::new(), WaitPolicy::for_load(1, 1), layout);
        crate::ranks::adapt(&mut shared);
        let mut ctx = Ctx::new(Arc::new(shared), rank, binding);
        ctx.net = Some(Box::new(crate::ranks::Net::new(comm)));
        Ok(Some((ctx, saved)))
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
    pub fn begin<F>(self, f: F) -> Result<Spmd<'static>>
    where
        F: Fn(&mut Ctx) -> Result<()> + Send + Sync + 'static,
    {
        #[cfg(feature = "mpi")]
        if let Some(world) = crate::ranks::world_for_top_level() {
            let active = crate::ranks::Active::enter();
            let Some((ctx, saved)) = self.rank_start(world)? else {
                return Err(Error::outside(
                    ErrorKind::Misuse,
                    "begin",
                    "this MPI rank takes no part in the run: it asked for fewer processes than \
                     there are ranks (use Run::run, which returns no results on such ranks)",
                ));
            };
            return Ok(Spmd {
                tree: ctx.run.tree.clone(),
                ctx: Some(ctx),
                saved,
                workers: None,
                profile: None,
                active: Some(active),
                _parent: PhantomData,
            });
        }
        let layout = self.top_layout()?;
        let sink = self.top_sink();
        Ok(self.start(Tree::new(), Vec::new(), layout, None, sink, Arc::new(f)))
    }

    /// The placement of a top-level run: on the given or current machine, with the given or
    /// default (`MBSP_AFFINITY`) policy.
    fn top_layout(&self) -> Result<Layout> {
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
        Layout::plan(
            loaded,
            &whole,
            self.procs,
            self.policy.clone().unwrap_or(def_policy),
            self.bind.unwrap_or(def_bind),
        )
        .map_err(|e| Error::outside(ErrorKind::Misuse, "run", e.to_string()).with_source(e))
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
            .then(|| Arc::new(crate::profile::Sink::default()));
        Ok(self.start(
            parent.run.tree.clone(),
            parent.path.clone(),
            layout,
            Some(parent.binding.clone()),
            sink,
            Arc::new(f),
        ))
    }

    fn nested_layout(&self, parent: &Ctx) -> Result<Layout> {
        if let Procs::Count(p) = self.procs {
            crate::limits::check_procs(p).map_err(|m| parent.misuse("run", m))?;
        }
        let up = &parent.run.layout;
        let policy = self.policy.clone().unwrap_or_else(|| match &up.policy {
            Policy::Manual(_) => Policy::Scattered,
            p => p.clone(),
        });
        let bind = self.bind.unwrap_or(up.bind);
        Layout::plan(up.loaded.clone(), parent.domain(), self.procs, policy, bind).map_err(|e| {
            let err = parent.error(ErrorKind::Misuse, "run", format!("nested run: {e}"));
            parent.fail_with(err.with_source(e))
        })
    }

    fn start<'a, F>(
        &self,
        tree: Arc<Tree>,
        parent_path: Vec<usize>,
        layout: Layout,
        inherited: Option<Binding>,
        sink: Option<Arc<crate::profile::Sink>>,
        f: Arc<F>,
    ) -> Spmd<'a>
    where
        F: Fn(&mut Ctx) -> Result<()> + Send + Sync + 'static,
    {
        let top = parent_path.is_empty();
        let (shared, workers) = if self.reuse.unwrap_or_else(crate::team::reuse_by_default) {
            let mut team = Team::take(self.stack_size);
            let shared = self.shared_from(
                &mut team,
                tree.clone(),
                parent_path,
                layout,
                inherited,
                sink.clone(),
            );
            let f: Arc<BegunFn> = f;
            // SAFETY: the `Spmd` keeps `f` and waits for the launch (in `finish`, or when the
            // launch is dropped) before it drops `f`.
            let launch = Box::new(unsafe { Launch::new(shared.clone(), &*f, process_dyn) });
            launch.dispatch(&mut team);
            let w = Workers::Team {
                launch,
                team,
                _f: f,
            };
            (shared, w)
        } else {
            let shared = Arc::new(self.new_shared(
                tree.clone(),
                parent_path,
                layout,
                inherited,
                sink.clone(),
            ));
            let mut threads = Vec::with_capacity(shared.p - 1);
            for pid in 1..shared.p {
                let (mine, f) = (shared.clone(), f.clone());
                match self
                    .thread(&shared, pid)
                    .spawn(move || process(mine, pid, &*f))
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
        let (ctx, saved) = enter(&shared, 0);
        Spmd {
            ctx: Some(ctx),
            saved,
            workers: Some(workers),
            tree,
            profile: sink.filter(|_| top).map(|s| (s, shared.p)),
            #[cfg(feature = "mpi")]
            active: None,
            _parent: PhantomData,
        }
    }

    /// Start a run nested in the process owning `parent`, placed in what it owns.
    pub(crate) fn run_nested<R, F>(self, parent: &Ctx, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        parent.live("run")?;
        if self.procs == Procs::Count(0) {
            return Err(parent.misuse(
                "run",
                "a nested run needs at least 1 process, but p = 0 was requested".into(),
            ));
        }
        let layout = self.nested_layout(parent)?;
        let p = layout.domains.len();
        let tree = parent.run.tree.clone();
        let inherited = Some(parent.binding.clone());
        // Profiled with its parent (unless told otherwise), and attached to the parent's.
        let sink = self
            .profile
            .unwrap_or(parent.prof.is_some())
            .then(|| Arc::new(crate::profile::Sink::default()));
        let path = parent.path.clone();
        let results = self.launch(
            tree.clone(),
            path.clone(),
            layout,
            inherited,
            sink.clone(),
            &f,
        );
        let results = collect(results, &tree)?;
        if let (Some(sink), Some(rec)) = (sink, &parent.prof) {
            rec.borrow_mut().add_nested(sink.take(p, path));
        }
        Ok(results)
    }

    fn launch<R, F>(
        &self,
        tree: Arc<Tree>,
        parent_path: Vec<usize>,
        layout: Layout,
        inherited: Option<Binding>,
        sink: Option<Arc<crate::profile::Sink>>,
        f: &F,
    ) -> Vec<Result<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        if !self.reuse.unwrap_or_else(crate::team::reuse_by_default) {
            let shared = Arc::new(self.new_shared(tree, parent_path, layout, inherited, sink));
            return self.launch_spawned(shared, f);
        }
        let mut team = Team::take(self.stack_size);
        let shared = self.shared_from(&mut team, tree, parent_path, layout, inherited, sink);
        let results = {
            // SAFETY: `launch` lives in this frame and waits for every worker, when dropped at
            // the latest, before `f` (borrowed by this call) can go away.
            let launch = unsafe { Launch::new(shared.clone(), f, process_dyn) };
            launch.dispatch(&mut team);
            let mut results = Vec::with_capacity(shared.p);
            results.push(process(shared.clone(), 0, f));
            launch.wait();
            results.extend(launch.take_results());
            results
        };
        team.keep(shared);
        team.give_back();
        results
    }

    /// [`Run::launch`] with threads started for this run and joined at its end.
    fn launch_spawned<R, F>(&self, shared: Arc<RunShared>, f: &F) -> Vec<Result<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        let p = shared.p;
        std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(p - 1);
            for pid in 1..p {
                let mine = shared.clone();
                match self
                    .thread(&shared, pid)
                    .spawn_scoped(scope, move || process(mine, pid, f))
                {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        spawn_failed(&shared, pid, e);
                        break;
                    }
                }
            }
            let mut results = Vec::with_capacity(p);
            results.push(process(shared.clone(), 0, f));
            for h in handles {
                results.push(h.join().unwrap_or_else(|_| {
                    Err(Error::outside(
                        ErrorKind::Panic,
                        "run",
                        "a process thread panicked outside its SPMD function",
                    ))
                }));
            }
            results
        })
    }
}

impl Run {
    /// This run's waiting policy for `layout`.
    fn wait_policy_for(&self, layout: &Layout) -> WaitPolicy {
        let p = layout.domains.len();
        self.wait
            .unwrap_or_else(|| WaitPolicy::for_load(p, layout.cores_for()))
    }

    /// New shared state of a run placed by `layout`.
    fn new_shared(
        &self,
        tree: Arc<Tree>,
        parent_path: Vec<usize>,
        layout: Layout,
        inherited: Option<Binding>,
        sink: Option<Arc<crate::profile::Sink>>,
    ) -> RunShared {
        let policy = self.wait_policy_for(&layout);
        let mut s = RunShared::new(parent_path, tree, policy, layout);
        s.inherited = inherited;
        s.prof = sink;
        s
    }

    /// The shared state of a run placed by `layout`: the team's last one when it fits (same
    /// size and waiting policy, nobody else holding it), else a new one.
    fn shared_from(
        &self,
        team: &mut Team,
        tree: Arc<Tree>,
        parent_path: Vec<usize>,
        layout: Layout,
        inherited: Option<Binding>,
        sink: Option<Arc<crate::profile::Sink>>,
    ) -> Arc<RunShared> {
        let policy = self.wait_policy_for(&layout);
        if let Some(mut last) = team.last.take() {
            if last.p == layout.domains.len()
                && last.barrier.policy() == policy
                && last.groups == layout.groups()
            {
                if let Some(s) = Arc::get_mut(&mut last) {
                    s.layout = layout;
                    s.inherited = inherited;
                    s.prof = sink;
                    s.reuse(parent_path, tree);
                    return last;
                }
            }
        }
        let mut s = RunShared::new(parent_path, tree, policy, layout);
        s.inherited = inherited;
        s.prof = sink;
        Arc::new(s)
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

/// Record that process `pid`'s thread could not be started (the run is aborted); processes
/// `pid..` never start, and count as stopped.
pub(crate) fn spawn_failed(shared: &RunShared, pid: usize, e: std::io::Error) {
    shared
        .stopped
        .fetch_add(shared.p - pid, crate::shim::Ordering::AcqRel);
    shared.tree.fail(&Error::new(
        ErrorKind::System,
        "run",
        shared.parent_path.clone(),
        None,
        format!(
            "could not start the thread for pid {pid} of {}: {e}",
            shared.p
        ),
    ));
}

fn thread_name(shared: &RunShared, pid: usize) -> String {
    let mut s = String::from("mbsp");
    for p in &shared.parent_path {
        s.push_str(&format!("-{p}"));
    }
    s.push_str(&format!("-{pid}"));
    s
}

/// Run `f` as process `pid`, then the final sync; any failure aborts the hierarchy.
pub(crate) fn process<R, F>(shared: Arc<RunShared>, pid: usize, f: &F) -> Result<R>
where
    F: Fn(&mut Ctx) -> Result<R> + Sync + ?Sized,
{
    let (mut ctx, saved) = enter(&shared, pid);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let r = f(&mut ctx)?;
        ctx.end()?;
        Ok(r)
    }));
    leave(ctx, saved, outcome)
}

thread_local! {
    /// The OS CPUs mbsp last bound this thread to (`None` when unknown), so that a thread
    /// placed on the same PUs run after run is not bound again (a binding system call costs
    /// microseconds, tens of microseconds when it moves the thread).
    static BOUND: std::cell::RefCell<Option<Vec<u32>>> = const { std::cell::RefCell::new(None) };
}

/// [`process`] for a type-erased SPMD function (what team workers run).
fn process_dyn<'a, R>(shared: Arc<RunShared>, pid: usize, f: &'a SpmdFn<'a, R>) -> Result<R> {
    process(shared, pid, f)
}

/// Bind the calling thread for process `pid` and make its context. Returns the thread's
/// binding before the run when it may have to be restored (process 0 of a top-level run is
/// the caller's thread).
///
/// Process 0 of a nested run narrows its thread to its own placement when the parent's is
/// wider, and leaves it narrowed when the nested run ends (the parent's placement contains
/// it): a thread left on the parent's PUs shares them with its bound siblings, and the
/// scheduler was seen keeping it on a sibling's core for whole runs (two processes on one
/// core, half speed). Not restoring spares two binding system calls per nested run; the
/// narrowing is done once for a series of nested runs of one shape. The caller's binding is
/// restored when its top-level run ends, as always.
fn enter(shared: &Arc<RunShared>, pid: usize) -> (Ctx, Option<Vec<u32>>) {
    let layout = &shared.layout;
    let domain = &layout.domains[pid];
    let (binding, saved) = if !layout.bind {
        let b = if layout.binder.applies() {
            Binding::NotApplied(
                "binding disabled for this run (Run::bind(false) or MBSP_AFFINITY=none)".into(),
            )
        } else {
            layout.binder.bind_thread(domain)
        };
        (b, None)
    } else if pid == 0 {
        let want = domain.pu_os(layout.machine());
        match &shared.inherited {
            // Bound where it should be (the parent's PUs, or narrowed by an earlier nested run
            // of this shape): nothing to do; anywhere else (narrowed for another shape, or on
            // the parent's wider PUs): bind.
            Some(Binding::Applied(_)) if layout.binder.applies() => {
                if BOUND.with(|b| b.borrow().as_ref() == Some(&want)) {
                    (Binding::Applied(want), None)
                } else {
                    (bind_remembered(layout, domain), None)
                }
            }
            Some(parent) => (parent.clone(), None),
            None => {
                // `before` comes back at the end if the thread is elsewhere then (see `leave`).
                let before = layout.binder.thread_cpus();
                if before.as_ref() == Some(&want) {
                    BOUND.with(|c| *c.borrow_mut() = before.clone());
                    (Binding::Applied(want), before)
                } else {
                    (bind_remembered(layout, domain), before)
                }
            }
        }
    } else {
        let want = domain.pu_os(layout.machine());
        let cached = BOUND.with(|b| b.borrow().as_ref() == Some(&want));
        if cached && layout.binder.applies() {
            (Binding::Applied(want), None)
        } else {
            (bind_remembered(layout, domain), None)
        }
    };
    (Ctx::new(shared.clone(), pid, binding), saved)
}

/// Bind the calling thread to `domain` and remember where (see [`BOUND`]).
fn bind_remembered(layout: &Layout, domain: &Domain) -> Binding {
    let b = layout.binder.bind_thread(domain);
    let now = match &b {
        Binding::Applied(cpus) => Some(cpus.clone()),
        _ => None,
    };
    BOUND.with(|c| *c.borrow_mut() = now);
    b
}

/// Turn the outcome of a process into its result (a panic becomes an error), record a failure,
/// and give the thread back its binding.
fn leave<R>(
    ctx: Ctx,
    saved: Option<Vec<u32>>,
    outcome: std::thread::Result<Result<R>>,
) -> Result<R> {
    let result = outcome_of(&ctx, outcome);
    if let Err(e) = &result {
        ctx.run.tree.fail(e);
    }
    let shared = ctx.run.clone();
    drop(ctx);
    if let Some(cpus) = saved {
        // Bound at the start, or narrowed by a nested run since: put it back.
        if BOUND.with(|c| c.borrow().as_ref() != Some(&cpus)) {
            shared.layout.binder.restore_thread(&cpus);
            BOUND.with(|c| *c.borrow_mut() = Some(cpus));
        }
    }
    result
}

/// A process's result, a panic made an error.
fn outcome_of<R>(ctx: &Ctx, outcome: std::thread::Result<Result<R>>) -> Result<R> {
    match outcome {
        Ok(r) => r,
        Err(payload) => Err(ctx.error(ErrorKind::Panic, "spmd", panic_message(&*payload))),
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".into()
    }
}

/// [`leave`] for this rank's process of a run over MPI ranks: a failure travels to the other
/// ranks in one last exchange, the window is closed, and the error returned is the run's root
/// cause (the same on every rank).
#[cfg(feature = "mpi")]
fn leave_rank<R>(
    mut ctx: Ctx,
    saved: Option<Vec<u32>>,
    outcome: std::thread::Result<Result<R>>,
) -> Result<R> {
    let result = outcome_of(&ctx, outcome);
    let mut first = None;
    if let Err(e) = &result {
        ctx.run.tree.fail(e);
        // The last exchange reports the first failed rank's error, the same on every rank.
        first = ctx.rank_fail();
    }
    if let Some(net) = ctx.net.take() {
        net.close();
    }
    let tree = ctx.run.tree.clone();
    leave(ctx, saved, Ok(result)).map_err(|e| first.or_else(|| tree.error()).unwrap_or(e))
}

/// All results, or the root cause of the failure.
fn collect<R>(results: Vec<Result<R>>, tree: &Tree) -> Result<Vec<R>> {
    if results.iter().all(Result::is_ok) {
        return Ok(results.into_iter().map(|r| r.ok().unwrap()).collect());
    }
    if let Some(e) = tree.error() {
        return Err(e);
    }
    Err(results.into_iter().find_map(Result::err).unwrap())
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
        Run::new(p).run_nested(self, f)
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
        Run::per(level).run_nested(self, f)
    }

    /// Start a nested run with options; see [`Ctx::run`].
    pub fn run_with<R, F>(&self, options: Run, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        options.run_nested(self, f)
    }
}

/// A run started with [`Run::begin`]: process 0's context, and the other processes' threads.
/// A nested run ([`Run::begin_nested`]) borrows its parent's context for `'a`.
pub struct Spmd<'a> {
    ctx: Option<Ctx>,
    saved: Option<Vec<u32>>,
    workers: Option<Workers>,
    tree: Arc<Tree>,
    /// A profiled top-level run (`MBSP_PROFILE`): where its processes hand in, and p.
    profile: Option<(Arc<crate::profile::Sink>, usize)>,
    /// A run over MPI ranks: marks it going on.
    #[cfg(feature = "mpi")]
    active: Option<crate::ranks::Active>,
    _parent: PhantomData<&'a mut Ctx>,
}

/// The SPMD function of a begun run.
type BegunFn = dyn Fn(&mut Ctx) -> Result<()> + Send + Sync;

/// Who runs processes 1.. of a begun run.
enum Workers {
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
        #[cfg(feature = "mpi")]
        if ctx.net.is_some() {
            let r = leave_rank(ctx, self.saved.take(), outcome);
            self.active = None;
            return r;
        }
        let mut results = vec![leave(ctx, self.saved.take(), outcome)];
        match self.workers.take() {
            Some(Workers::Spawned(threads)) => {
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
            Some(Workers::Team {
                launch,
                mut team,
                _f,
            }) => {
                launch.wait();
                results.extend(launch.take_results());
                let shared = launch.shared.clone();
                drop(launch);
                team.keep(shared);
                team.give_back();
            }
            None => {}
        }
        collect(results, &self.tree)?;
        if let Some((sink, p)) = self.profile.take() {
            crate::profile::emit(&sink.take(p, Vec::new()));
        }
        Ok(())
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
