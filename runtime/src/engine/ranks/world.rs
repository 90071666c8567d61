//! Asking for ranks: MPI initialised explicitly ([`World::init`]), runs over ranks started
//! from the world handle ([`World::run`], [`World::run_profiled`], [`World::begin`]), each
//! returning this rank's part ([`RankResult`]); and the C ABI's BSPlib convention
//! ([`launched_by_mpi`]).

use super::active::Active;
use super::net::Net;
use super::share::{ShareSpec, rank_share};
use crate::ctx::{Ctx, RunRef, RunShared};
use crate::engine::state::{ProcEngine, RunEngine};
use crate::error::{Error, ErrorKind, Result};
use crate::place::{Procs, default_affinity};
use crate::process::{BOUND, leave};
use crate::profile::Profile;
use crate::profile::record::Sink;
use crate::run::{Run, Spmd, TopProfile};
use crate::tree::Tree;
use crate::wait::WaitPolicy;
use mbsp_topology::{Binding, Domain, NotBound, Policy};
use mpi::collective::CommunicatorCollectives;
use mpi::ffi;
use mpi::topology::{Communicator, SimpleCommunicator};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

/// The environment variable of the C ABI's BSPlib convention ([`launched_by_mpi`]): `1` puts
/// a C program's top-level SPMD section over MPI ranks, `0` keeps it on threads, whatever the
/// launcher.
pub const MPI_ENV: &str = "MBSP_MPI";

/// Whether BSPlib's convention puts this program over MPI ranks: it was started by an MPI
/// launcher (its environment has `PMI_SIZE`, `PMI_RANK`, `OMPI_COMM_WORLD_SIZE` or
/// `PMIX_RANK`), unless [`MPI_ENV`] says otherwise (`0`: no, `1`: yes). [`bsplib_world`] is
/// the world when it does.
///
/// This is how the C ABI decides (a BSPlib program does not ask for ranks: started by
/// `mpiexec`, it runs over them). Rust programs ask explicitly with [`World::init`]; nothing
/// in the runtime consults this function.
///
/// ```
/// let launcher = ["PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"]
///     .iter()
///     .any(|v| std::env::var_os(v).is_some());
/// if std::env::var_os(mbsp::ranks::MPI_ENV).is_none() {
///     assert_eq!(mbsp::ranks::launched_by_mpi(), launcher);
/// }
/// ```
pub fn launched_by_mpi() -> bool {
    match std::env::var(MPI_ENV).as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => ["PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"]
            .iter()
            .any(|v| std::env::var_os(v).is_some()),
    }
}

/// The world, MPI initialised, when BSPlib's convention puts this program over MPI ranks
/// ([`launched_by_mpi`]); `None` otherwise, or when MPI cannot be initialised.
///
/// ```
/// if !mbsp::ranks::launched_by_mpi() {
///     assert!(mbsp::ranks::bsplib_world().is_none());
/// }
/// ```
pub fn bsplib_world() -> Option<&'static World> {
    if launched_by_mpi() {
        World::init().ok()
    } else {
        None
    }
}

unsafe extern "C" {
    fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn finalize() {
    let mut done = 0;
    // SAFETY: plain MPI calls on an initialised MPI (registered only after initialisation).
    unsafe {
        ffi::MPI_Finalized(&mut done);
        if done == 0 {
            ffi::MPI_Finalize();
        }
    }
}

/// The ranks of this program (`MPI_COMM_WORLD`), MPI initialised: the handle that starts runs
/// over them. Obtained from [`World::init`]; one per program.
///
/// A run over ranks has one process per rank at its top level (the rank's own thread), with
/// the same [`Ctx`] API as a thread run; runs nested in it are thread runs inside the rank.
///
/// ```no_run
/// // Started with `mpiexec -n 4 ./program`.
/// let world = mbsp::ranks::World::init()?;
/// let mine = world.run(mbsp::Run::new(world.size()), |ctx| {
///     let partial = ctx.push_reg(vec![0u64; ctx.nprocs()])?;
///     ctx.sync()?;
///     for q in 0..ctx.nprocs() {
///         ctx.put(q, &[ctx.pid() as u64], &partial, ctx.pid())?;
///     }
///     ctx.sync()?;
///     Ok(ctx.local(&partial)?.iter().sum::<u64>())
/// })?;
/// assert_eq!(mine.rank, world.rank());
/// assert_eq!(mine.value, Some((0..world.size() as u64).sum()));
/// # Ok::<(), mbsp::Error>(())
/// ```
#[derive(Debug)]
pub struct World {
    rank: usize,
    size: usize,
}

/// This rank's part of a run over ranks ([`World::run`]): the other ranks hold theirs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankResult<R> {
    /// This rank (its process's pid in the run, when it took part).
    pub rank: usize,
    /// The number of processes of the run.
    pub nprocs: usize,
    /// What this rank's process returned, or `None` when the run had fewer processes than
    /// there are ranks and this rank took no part.
    pub value: Option<R>,
}

/// This rank's process of a run over ranks, the thread's binding to restore at its end, and
/// the run's communicator.
type Started = (Ctx, Option<Vec<u32>>, SimpleCommunicator);

impl World {
    /// Initialise MPI (thread level `MPI_THREAD_SERIALIZED`) and return the world; later calls
    /// return the same world without initialising again. MPI is finalised when the program
    /// exits. A program that initialised MPI itself gets the world of that initialisation.
    ///
    /// Fails (a system error) when MPI cannot be initialised.
    ///
    /// ```no_run
    /// let world = mbsp::ranks::World::init()?;
    /// println!("rank {} of {}", world.rank(), world.size());
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn init() -> Result<&'static World> {
        static WORLD: OnceLock<Option<World>> = OnceLock::new();
        WORLD
            .get_or_init(|| {
                if !mpi::environment::is_initialized() {
                    let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized)?;
                    // MPI stays up for every later run; it is finalised when the program exits.
                    std::mem::forget(universe);
                    // SAFETY: registering a plain function.
                    unsafe { atexit(finalize) };
                }
                let w = SimpleCommunicator::world();
                Some(World {
                    rank: w.rank() as usize,
                    size: w.size() as usize,
                })
            })
            .as_ref()
            .ok_or_else(|| {
                Error::outside(
                    ErrorKind::System,
                    "World::init",
                    "MPI could not be initialised",
                )
            })
    }

    /// This program's rank, in `0..size()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Start a run over the ranks with `options` (its process count at most
    /// [`size`](Self::size); [`Run::per`] means one process per rank), each rank's thread becoming the
    /// process whose pid is its rank, and return this rank's part once the run has ended.
    /// Collective: every rank calls it with the same options. If any process fails, every
    /// rank returns the same error (the root cause: its kind, pid, superstep and message).
    ///
    /// Only one run over ranks goes on at a time in a program: a second (from another thread,
    /// or inside the first) is refused with a misuse error.
    ///
    /// Profiled as on threads ([`Run::profile`], or `MBSP_PROFILE` on any rank): the ranks
    /// gather the profile when the run has ended well and rank 0 reports it as `MBSP_PROFILE`
    /// asks (text on its stderr, or the file).
    ///
    /// ```no_run
    /// let world = mbsp::ranks::World::init()?;
    /// let r = world.run(mbsp::Run::new(world.size()), |ctx| Ok(ctx.pid() * 10))?;
    /// assert_eq!(r.value, Some(world.rank() * 10));
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn run<R, F>(&self, options: Run, f: F) -> Result<RankResult<R>>
    where
        F: FnOnce(&mut Ctx) -> Result<R>,
    {
        let profiled = options.top_sink().is_some();
        let (r, profile) = self.run_with(options, profiled, f)?;
        self.report(profile.as_ref());
        Ok(r)
    }

    /// `MBSP_PROFILE`'s report of a run's profile, by rank 0.
    fn report(&self, profile: Option<&Profile>) {
        if let Some(p) = profile.filter(|_| self.rank == 0) {
            crate::profile::emit(p);
        }
    }

    /// [`World::run`], returning the run's [`Profile`] beside this rank's part: every rank
    /// gets the profile of the whole run (all processes' supersteps; a rank that took no part
    /// gets the run's process count and no supersteps). Rank 0 also reports it as
    /// `MBSP_PROFILE` asks, as [`Run::run_profiled`] does on threads.
    ///
    /// ```no_run
    /// let world = mbsp::ranks::World::init()?;
    /// let (_, profile) = world.run_profiled(mbsp::Run::new(world.size()), |ctx| ctx.sync())?;
    /// assert_eq!(profile.p, world.size());
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn run_profiled<R, F>(&self, options: Run, f: F) -> Result<(RankResult<R>, Profile)>
    where
        F: FnOnce(&mut Ctx) -> Result<R>,
    {
        let (r, profile) = self.run_with(options, true, f)?;
        self.report(profile.as_ref());
        let p = r.nprocs;
        Ok((
            r,
            profile.unwrap_or(Profile {
                p,
                path: Vec::new(),
                started_in: None,
                supersteps: Vec::new(),
                regions: Vec::new(),
                nested: Vec::new(),
                places: vec![String::new(); p],
                pus: Vec::new(),
                coroutines: false,
            }),
        ))
    }

    /// Start a run over the ranks without running a function: this rank's process gets its
    /// context in the returned [`Spmd`] and runs its part itself, then calls [`Spmd::end`].
    /// This is the shape of BSPlib's `bsp_begin`/`bsp_end` over MPI, for the C ABI; Rust code
    /// should prefer [`World::run`]. A rank beyond the run's process count gets a misuse
    /// error (after joining the collective start). Profiled as [`World::run`] is: the ranks
    /// gather the profile in [`Spmd::end`], and rank 0 reports it.
    ///
    /// ```no_run
    /// let world = mbsp::ranks::World::init()?;
    /// let mut spmd = world.begin(mbsp::Run::new(world.size()))?;
    /// spmd.ctx().sync()?;
    /// spmd.end()?;
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn begin(&self, options: Run) -> Result<Spmd<'static>> {
        let sink = options.top_sink();
        match self.start(&options, "begin", sink)? {
            Some((ctx, saved, comm)) => {
                // Profiled (`MBSP_PROFILE`): the ranks gather the profile at `Spmd::end`, over
                // the run's communicator, and rank 0 reports it.
                let rank = self.rank;
                let p = ctx.nprocs();
                let profile = ctx.run.prof.clone().map(|sink| {
                    Box::new(move || {
                        let profile = super::profile::gather(&comm, &sink, p);
                        (rank == 0).then_some(profile)
                    }) as TopProfile
                });
                Ok(Spmd {
                    tree: ctx.run.tree.clone(),
                    ctx: Some(ctx),
                    saved,
                    workers: None,
                    profile,
                    ckpt: None,
                    _shared: None,
                    _parent: std::marker::PhantomData,
                })
            }
            None => Err(Error::outside(
                ErrorKind::Misuse,
                "begin",
                format!(
                    "MPI rank {} takes no part in the run: it asked for fewer processes than \
                     there are ranks ({})",
                    self.rank, self.size
                ),
            )),
        }
    }

    /// A run over the ranks, profiled or not.
    fn run_with<R, F>(
        &self,
        options: Run,
        profiled: bool,
        f: F,
    ) -> Result<(RankResult<R>, Option<Profile>)>
    where
        F: FnOnce(&mut Ctx) -> Result<R>,
    {
        let sink = profiled.then(|| Arc::new(Sink::default()));
        let Some((mut ctx, saved, comm)) = self.start(&options, "run", sink)? else {
            let nprocs = match options.procs {
                Procs::Count(p) => p,
                Procs::Per(_) => self.size,
            };
            let value = RankResult {
                rank: self.rank,
                nprocs,
                value: None,
            };
            return Ok((value, None));
        };
        let p = ctx.nprocs();
        // Profiled when any rank asked (`start` agreed on it).
        let sink = ctx.run.prof.clone();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let r = f(&mut ctx)?;
            ctx.end()?;
            Ok(r)
        }));
        let value = leave(ctx, saved, outcome)?;
        // Every rank has ended the run successfully (a failure reaches every rank): the
        // profile's records are gathered over the run's ranks.
        let profile = sink.map(|s| super::profile::gather(&comm, &s, p));
        Ok((
            RankResult {
                rank: self.rank,
                nprocs: p,
                value: Some(value),
            },
            profile,
        ))
    }

    /// This rank's process of a run over ranks, its saved binding and the run's communicator;
    /// `None` if the run has fewer processes than there are ranks and this rank takes no part.
    /// Collective over the world.
    fn start(
        &self,
        options: &Run,
        op: &'static str,
        sink: Option<Arc<Sink>>,
    ) -> Result<Option<Started>> {
        if options.coroutines {
            return Err(Error::outside(
                ErrorKind::Misuse,
                op,
                "Run::coroutines(true) is for runs on threads: a run over MPI ranks has one \
                 process per rank (a run nested in a rank's process may have coroutines)",
            ));
        }
        let active = Active::claim(op)?;
        let world = SimpleCommunicator::world();
        let size = self.size;
        let p = match options.procs {
            Procs::Count(0) => {
                return Err(Error::outside(
                    ErrorKind::Misuse,
                    op,
                    "a run needs at least 1 process, but p = 0 was requested",
                ));
            }
            Procs::Count(n) => n,
            Procs::Per(_) => size,
        };
        if p > size {
            return Err(Error::outside(
                ErrorKind::Misuse,
                op,
                format!(
                    "a run over MPI ranks has one process per rank: p = {p} processes were \
                     requested but the program runs on {size} rank(s) (start it with mpiexec \
                     -n {p}, or ask for at most {size})"
                ),
            ));
        }
        // Everything that can fail on one rank alone comes before the first collective, and the
        // ranks agree on it (a rank returning early would leave the others waiting).
        let layout = rank_layout(options);
        agree_start(&world, layout.as_ref().err())?;
        let mut layout = layout?;
        let policy = options.checkpoint_policy();
        agree_start(&world, policy.as_ref().err())?;
        let policy = policy?;
        let Some(comm) = comm_for(world, p) else {
            return Ok(None);
        };
        let rank = comm.rank() as usize;
        // The rank's share of its node (the CPUs the launcher left it, split between the
        // node's ranks unless the launcher bound them apart): its top-level process is placed
        // there, and its nested runs inside it.
        let saved = layout.binder.thread_cpus();
        let m = layout.machine().clone();
        let node = comm.split_shared(comm.rank());
        let mine: Vec<u64> = saved.iter().flatten().map(|&c| u64::from(c)).collect();
        let sets: Vec<Vec<u32>> = super::wire::all_gather_words(&node, &mine)
            .into_iter()
            .map(|w| w.into_iter().map(|c| c as u32).collect())
            .collect();
        let local = node.rank() as usize;
        let decided = ShareSpec::from_env()
            .and_then(|spec| rank_share(&m, &sets, local, (rank, p), &spec, &layout.policy))
            .map_err(|msg| Error::outside(ErrorKind::Misuse, op, msg));
        agree_start(&comm, decided.as_ref().err())?;
        let (share, how) = decided?;
        place_all(&mut layout, &share, p);
        let binding = bind_rank(&layout, &share, saved.as_deref());
        super::share::report_rank(rank, p, (local, sets.len()), &m, &share, &how, &binding);
        let mut shared = RunShared::new(
            Vec::new(),
            Tree::new(),
            WaitPolicy::for_load(1, 1),
            Arc::new(layout),
            RunEngine::Ranks,
        );
        // The other processes are mirrors: a failed sync never waits for their threads (they
        // are not in this address space).
        for q in (0..p).filter(|&q| q != rank) {
            shared.proc(q).mark_stopped(u64::MAX);
        }
        shared.prof = agree_profiled(&comm, sink);
        // Each rank reads its own environment: the ranks must agree on the policy, or their
        // checkpoints' collective calls would not match.
        let prints = super::wire::all_gather_words(&comm, &policy_words(policy.as_ref()));
        if let Some(r) = (1..prints.len()).find(|&r| prints[r] != prints[0]) {
            return Err(Error::outside(
                ErrorKind::Misuse,
                op,
                format!(
                    "the ranks' checkpoint policies differ (Run::checkpoints or the \
                     MBSP_CHECKPOINT_* environment): rank 0 has {}, rank {r} {}",
                    describe_policy(&prints[0]),
                    describe_policy(&prints[r])
                ),
            ));
        }
        shared.ckpt = policy.map(|policy| {
            // The ranks number their checkpoints alike: above the newest any of them saw.
            let mut ck = crate::checkpoint::Checkpointer::new(policy, p);
            let bases = super::wire::all_gather_words(&comm, &[ck.base]);
            ck.base = bases.iter().flatten().copied().max().unwrap_or(ck.base);
            Arc::new(ck)
        });
        let net = Net::new(comm.duplicate(), active);
        let engine = ProcEngine::Ranks(Some(Box::new(net)));
        let id = *shared.id;
        let ctx = Ctx::new(RunRef::owned(Arc::new(shared)), id, rank, binding, engine);
        if let Some(rec) = &ctx.prof {
            // Where this rank ran: its node, then its placement there.
            let mut rec = rec.borrow_mut();
            rec.place = format!("node {}, {}", super::share::host(), rec.place);
        }
        Ok(Some((ctx, saved, comm)))
    }
}

/// The placement of a run over ranks, as far as one rank alone can plan it: its machine, the
/// run's policy (a manual one keeps its CPU list per rank: `rank_share` reads it) and whether
/// it binds; each rank's domain is decided with the node's other ranks.
fn rank_layout(options: &Run) -> Result<crate::place::Layout> {
    let policy = match &options.policy {
        Some(policy) => policy.clone(),
        None => default_affinity()?.0,
    };
    let planned = match &policy {
        Policy::Manual(_) => Policy::Scattered,
        other => other.clone(),
    };
    let kept = Run {
        procs: Procs::Count(1),
        policy: Some(planned),
        ..options.clone()
    }
    .top_layout()?;
    // A copy: the rank places its process in its share of the node.
    let mut layout = crate::place::Layout::clone(&kept);
    layout.policy = policy;
    Ok(layout)
}

/// Place all `p` processes of `layout` in `share` (each rank's process owns its share of the
/// node; the other ranks' processes are mirrors of it here).
fn place_all(layout: &mut crate::place::Layout, share: &Domain, p: usize) {
    let m = layout.loaded.machine.clone();
    layout.pus = vec![share.pu_os(&m); p];
    layout.groups = vec![share.packages(&m).first().copied().unwrap_or(0); p];
    layout.cores = share.pus().len();
    layout.domains = vec![share.clone(); p];
}

/// Bind this rank's thread to its share (when the run binds and the share is not where the
/// launcher left it); its binding afterwards. `launcher`: the CPUs the launcher left it.
fn bind_rank(layout: &crate::place::Layout, share: &Domain, launcher: Option<&[u32]>) -> Binding {
    let want = share.pu_os(layout.machine());
    if layout.bind {
        if launcher == Some(&want[..]) {
            BOUND.with(|c| *c.borrow_mut() = Some(want.clone()));
            return Binding::Applied(want);
        }
        let b = layout.binder.bind_thread(share);
        let now = match &b {
            Binding::Applied(cpus) => Some(cpus.clone()),
            _ => None,
        };
        BOUND.with(|c| *c.borrow_mut() = now);
        return b;
    }
    match launcher {
        // Not bound by the run (MBSP_AFFINITY=none, Run::bind(false)): where the launcher left it.
        Some(cpus) if layout.binder.applies() => {
            BOUND.with(|c| *c.borrow_mut() = Some(cpus.to_vec()));
            Binding::Applied(cpus.to_vec())
        }
        // A loaded machine tree, or a binding that cannot be read.
        _ => Binding::NotApplied(layout.binder.not_applied().unwrap_or(NotBound::Launcher)),
    }
}

/// The communicator of a run of `p` processes: all ranks, or the first `p` (the others get
/// `None`: they take no part). Collective over the world.
fn comm_for(world: SimpleCommunicator, p: usize) -> Option<SimpleCommunicator> {
    if p == world.size() as usize {
        return Some(world);
    }
    let inside = (world.rank() as usize) < p;
    let color = mpi::topology::Color::with_value(if inside { 0 } else { 1 });
    let sub = world.split_by_color(color);
    if inside { sub } else { None }
}

/// Collective over `comm` (the run's ranks): the run is profiled when any rank asked for it
/// (`MBSP_PROFILE` may differ between ranks: the profile's gather at the end must be made by
/// all or none of them).
fn agree_profiled(comm: &SimpleCommunicator, sink: Option<Arc<Sink>>) -> Option<Arc<Sink>> {
    let mine = u8::from(sink.is_some());
    let mut any = 0u8;
    comm.all_reduce_into(&mine, &mut any, mpi::collective::SystemOperation::max());
    (any != 0).then(|| sink.unwrap_or_default())
}

/// Collective over `world`: every rank learns whether all of them could prepare the run; a
/// rank that could not returns its own error, the others one naming it.
fn agree_start(world: &SimpleCommunicator, mine: Option<&Error>) -> Result<()> {
    let code = if mine.is_some() {
        world.rank()
    } else {
        i32::MAX
    };
    let mut first = 0i32;
    world.all_reduce_into(&code, &mut first, mpi::collective::SystemOperation::min());
    match (mine, first) {
        (Some(e), _) => Err(e.clone()),
        (None, i32::MAX) => Ok(()),
        (None, k) => Err(Error::outside(
            ErrorKind::Aborted,
            "run",
            format!("rank {k} could not start the run over MPI ranks (it reports why)"),
        )),
    }
}

/// `policy` as words, for ranks to check that they all run under the same one (each reads
/// its own environment).
fn policy_words(policy: Option<&crate::Checkpoints>) -> Vec<u64> {
    let Some(c) = policy else {
        return vec![0];
    };
    let mut w = vec![
        1,
        c.every_supersteps.unwrap_or(0),
        c.every.map_or(u64::MAX, |t| t.as_nanos() as u64),
        c.keep as u64,
        u64::from(c.required),
        u64::from(c.background),
    ];
    crate::checkpoint::words::put(&mut w, c.dir.as_os_str().as_encoded_bytes());
    w
}

/// What [`policy_words`] says, for an error.
fn describe_policy(words: &[u64]) -> String {
    match words {
        [0] => "no checkpoint policy".into(),
        [1, k, t, keep, ..] => {
            let mut at = 6;
            let dir = String::from_utf8_lossy(&crate::checkpoint::words::take(words, &mut at))
                .into_owned();
            format!(
                "checkpoints in {dir:?}, every {k} supersteps, every {} s, keep {keep}",
                if *t == u64::MAX {
                    "-".to_string()
                } else {
                    format!("{}", *t as f64 * 1e-9)
                }
            )
        }
        _ => "an unreadable policy".into(),
    }
}
