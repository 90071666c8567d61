//! # mbsp — bulk synchronous parallel programming on shared-memory machines
//!
//! The BSPlib programming model (Hill et al. 1998) with the MulticoreBSP additions (Yzelman et
//! al. 2014), in safe Rust. A program is a sequence of *supersteps* run by `p` processes (OS
//! threads); communication requested in a superstep — remote writes ([`Ctx::put`]), remote reads
//! ([`Ctx::get`]) and messages ([`Ctx::send`]) — takes effect at the next [`Ctx::sync`].
//!
//! ```
//! // Every process puts its pid into the next process's registered buffer.
//! let got = mbsp::run(4, |ctx| {
//!     let inbox = ctx.push_reg(vec![0usize; 1])?;   // registration: valid after the next sync
//!     ctx.sync()?;
//!     let next = (ctx.pid() + 1) % ctx.nprocs();
//!     ctx.put(next, &[ctx.pid()], &inbox, 0)?;      // copied now, delivered at the sync
//!     ctx.sync()?;
//!     Ok(ctx.local(&inbox)?[0])
//! })?;
//! assert_eq!(got, vec![3, 0, 1, 2]);
//! # Ok::<(), mbsp::Error>(())
//! ```
//!
//! ## The primitives
//!
//! | BSPlib / MulticoreBSP | mbsp |
//! |---|---|
//! | `bsp_begin`/`bsp_end`, `bsp_init` | [`run()`], [`Run`], nested: [`Ctx::run`] |
//! | `bsp_nprocs`, `bsp_pid`, `bsp_time` | [`nprocs`] (outside a run), [`Ctx::nprocs`], [`Ctx::pid`], [`Ctx::time`] |
//! | `bsp_sync`, `bsp_abort` | [`Ctx::sync`], [`Ctx::abort`] |
//! | `bsp_push_reg`, `bsp_pop_reg` | [`Ctx::push_reg`] (→ [`Reg`]), [`Ctx::push_reg_empty`], [`Ctx::pop_reg`] |
//! | `bsp_put`, `bsp_get` | [`Ctx::put`], [`Ctx::get`] (+ `_bytes` forms) |
//! | `bsp_hpput`, `bsp_hpget`, `bsp_direct_get` | `unsafe` [`Ctx::hpput`], [`Ctx::hpget`], [`Ctx::direct_get`] |
//! | `bsp_set_tagsize`, `bsp_send`, `bsp_hpsend` | [`Ctx::set_tagsize`], [`Ctx::send`], `unsafe` [`Ctx::hpsend`] |
//! | `bsp_qsize`, `bsp_get_tag`, `bsp_move`, `bsp_hpmove` | [`Ctx::qsize`], [`Ctx::get_tag`], [`Ctx::move_message`], [`Ctx::hpmove`] |
//!
//! The `*_raw` methods name registered memory by address, as BSPlib does, for the C ABI.
//!
//! ## Communicable memory
//!
//! BSPk's zero-copy messages, as ownership: [`Ctx::send_owned`] gives a `Vec<T>` (of a
//! [`bytemuck::Pod`] type) to another process, whose [`Ctx::move_owned`] gets that very buffer
//! after the sync, and [`Ctx::buffer`] / [`Ctx::recycle`] keep buffers in a per-process pool, so
//! that a steady loop allocates nothing. (Over MPI ranks the bytes travel instead, and arrive in
//! a buffer of the receiver's pool.) Owned messages are messages: they sit in the queue with the
//! others — each sender's messages in the order it sent them, senders in pid order — count in
//! [`Ctx::qsize`] and in profiles as their payload bytes, and the byte accessors
//! ([`Ctx::peek`], [`Ctx::hpmove`], [`Ctx::move_message`]) read their bytes; moving an ordinary
//! message with `move_owned` copies it into a pooled `Vec`. A buffer nobody moves out is freed
//! at the receiver's next sync (or with the run state, if the run failed first): each exactly
//! once.
//!
//! ## Safety model
//!
//! Registered memory is owned by the runtime ([`Reg`]) and accessed locally only through
//! [`Ctx::local`] / [`Ctx::local_mut`], whose borrows end before the next `sync` (it takes
//! `&mut self`). Every remote write is performed by the *receiving* process inside its sync, into
//! its own memory, so buffered communication can never race with local code. The primitives that
//! BSPlib defines as unbuffered (`hpput`, `hpget`, `hpsend`, `direct_get`) are `unsafe`: their
//! correctness rests on the caller's promise not to touch the memory involved in the superstep.
//! Memory the caller owns and lends to the other processes (registered with the unsafe
//! `*_raw` forms) is lent inside [`Ctx::lending`], which never unwinds or returns while another
//! process may still touch it.
//!
//! ## Errors
//!
//! Every primitive returns [`Result`]. Misuse (bad pid, unregistered area, out-of-bounds offset,
//! registrations or tag sizes that differ between processes, a process ending while others
//! sync...) yields an [`Error`] naming the primitive, the process, the superstep and the values,
//! *and* ends the run: all processes stop promptly and [`run()`] returns that error. Panics and
//! [`Ctx::abort`] behave the same way.
//!
//! ## Cost
//!
//! A superstep without communication costs one barrier. Puts and messages cost one copy at the
//! sender and one at the receiver (messages are then read in place; owned messages are not
//! copied); a superstep with puts and
//! messages costs one barrier plus the copies, with gets or registration changes two barriers.

#![warn(missing_docs)]

// The modules form layers, each using only those of the layers before it (tests/source.rs
// checks that no module imports one that imports it back; docs/design.md draws the layers):
// 1. leaves: shim, arena, error, wait, registry, params, rng, limits, place, shape, stream;
// 2. records and pools: flags, pool, outbox, requests, queue, tree; profile (its types, the
//    recorder, the report, JSON and timeline: all but its regions); checkpoint (its policy,
//    files, format and writer thread: all but take and resume);
// 3. the engines' state: engine::threads::{barrier, lane, inbox, state},
//    engine::ranks::{protocol, active, watchdog, shm, wire, lazy_state, net, profile},
//    engine::state (the enums the context holds);
// 4. ctx (the context and the run state) and superstep (what every engine's sync shares);
// 5. the engines: engine (the seam's trait), engine::threads::{sync, lazy, lane_sync} and its
//    mod.rs, engine::ranks::{engine, exchange, lazy, collective, immediate}, engine::dispatch;
// 6. the primitives (`impl Ctx`): drma, reg, bsmp, owned, lazy, sync, profile::regions,
//    checkpoint::{take, resume};
// 7. processes and runs: process, team, run, lend, engine::ranks::world (and the folders'
//    mod.rs files that re-export from it).
mod arena;
mod bsmp;
mod checkpoint;
mod coroutines;
mod ctx;
mod done;
mod drma;
mod engine;
mod error;
mod flags;
mod isolated;
mod lazy;
mod lend;
mod limits;
mod outbox;
mod owned;
pub mod params;
mod place;
mod pool;
mod process;
pub mod profile;
mod queue;
mod reg;
mod registry;
mod requests;
pub mod rng;

/// Copies larger than the caches, stored past them as the runtime's own copies of that size
/// are (its puts, gets and deliveries): for algorithms and programs that assemble results of
/// hundreds of MiB.
pub mod copies {
    pub use crate::stream::{STREAM_FROM, append_all};
}
mod run;
mod shape;
mod shim;
mod stream;
mod superstep;
mod sync;
mod team;
mod tree;
mod wait;

pub use bsmp::{Message, QueueSize};
pub use checkpoint::{CHECKPOINT_ENV, CheckpointInfo, Checkpoints};
pub use ctx::Ctx;
pub use error::{Error, ErrorKind, Result};
pub use lend::Lent;
pub use limits::{MAX_MESSAGE, MAX_TAGSIZE, max_procs};
pub use owned::OwnedMessage;
pub use place::{
    AFFINITY_ENV, AffinityError, PLACEMENT_ENV, Placement, Procs, RANK_SHARE_ENV, forced_affinity,
    parse_affinity, parse_cpu_sets,
};
pub use reg::{Reg, RegId, Registration};
pub use run::{Run, Spmd, nprocs, run};
pub use shape::{SHAPE_ENV, shape_from_env};
pub use wait::WaitPolicy;

/// Runs over MPI ranks (feature `mpi`): see the rank engine's documentation.
#[cfg(feature = "mpi")]
pub use engine::ranks;

/// Runs over MPI ranks: none in this build (without the feature `mpi`). The C ABI asks
/// [`ranks::bsplib_world`], which here always answers `None`.
#[cfg(not(feature = "mpi"))]
pub mod ranks {
    /// The ranks of this program: no value of this type exists in a build without the feature
    /// `mpi`.
    #[derive(Debug)]
    pub enum World {}

    impl World {
        /// This program's rank.
        pub fn rank(&self) -> usize {
            match *self {}
        }

        /// The number of ranks.
        pub fn size(&self) -> usize {
            match *self {}
        }

        /// Start a run over the ranks, this rank's process run by the caller.
        pub fn begin(&self, _options: crate::Run) -> crate::Result<crate::Spmd<'static>> {
            match *self {}
        }
    }

    /// The world when BSPlib's convention puts this program over MPI ranks: never, in a build
    /// without the feature `mpi`.
    ///
    /// ```
    /// assert!(mbsp::ranks::bsplib_world().is_none());
    /// ```
    pub fn bsplib_world() -> Option<&'static World> {
        None
    }
}
pub use team::{TEAMS_ENV, release_threads};

/// The topology crate: machine trees, placement plans, binding.
pub use mbsp_topology as topology;
pub use mbsp_topology::{Binding, Domain, Level, Machine, NotBound, Policy};

/// Re-export of `bytemuck`, whose [`Pod`](bytemuck::Pod) trait bounds the element types of
/// registered memory (derive it with `#[derive(bytemuck::Pod, bytemuck::Zeroable)]` on a
/// `#[repr(C)]` struct).
pub use bytemuck;

/// Internals exposed for the loom model checks and the benchmarks; not a stable API.
#[doc(hidden)]
pub mod internals {
    pub use crate::engine::threads::barrier::{Barrier, Member, Outcome};
    pub use crate::wait::Aborted;

    pub use crate::ctx::SyncPoint;

    /// Lower the largest count of one MPI call to `n` words or bytes (`None`: MPI's own,
    /// 2^31 - 1), so that tests reach the exchanges too large for one call at sizes they can
    /// afford. Every rank sets the same limit, between runs.
    #[cfg(feature = "mpi")]
    pub use crate::engine::ranks::wire::set_count_limit;

    /// `run` with a tree barrier (`true`) or a dissemination barrier over the packages
    /// (`false`) whatever the number of cores, e.g. to test the barrier a run would have on the
    /// synthetic machine it is planned on.
    pub fn tree_barrier(mut run: crate::Run, tree: bool) -> crate::Run {
        run.tree_barrier = Some(tree);
        run
    }

    /// `run` whose lazy syncs announce through lanes (`true`, the default for runs of at most
    /// 16 processes) or through the inboxes of larger runs (`false`), to test both paths.
    pub fn lanes(mut run: crate::Run, lanes: bool) -> crate::Run {
        run.lanes = Some(lanes);
        run
    }

    /// `run` whose syncs with declared counts take the barrier when it has two processes or
    /// its processes take turns as coroutines (`true`, the default), or always make the lazy
    /// protocol's sync (`false`), to test the protocol there.
    pub fn declared_at_barrier(mut run: crate::Run, on: bool) -> crate::Run {
        run.declared_at_barrier = Some(on);
        run
    }

    /// `run` whose processes use `slots` sets of outboxes in turn: 2, or 3 (the default for
    /// more processes than cores, where a lazy sender may run two supersteps ahead of its
    /// receivers), to test both on any machine.
    ///
    /// # Panics
    /// For any other count.
    pub fn slots(mut run: crate::Run, slots: usize) -> crate::Run {
        assert!(
            slots == 2 || slots == crate::outbox::SLOTS,
            "slots: 2 or {}, not {slots}",
            crate::outbox::SLOTS
        );
        run.slots = Some(slots);
        run
    }

    /// Make `ctx`'s process abort at `at` in its next sync that reaches that point, as if
    /// another process of the hierarchy had aborted then.
    pub fn fail_next_sync(ctx: &crate::Ctx, at: SyncPoint) {
        ctx.fault.set(Some(at));
    }

    /// Whether every process of `ctx`'s run has stopped touching the run's shared memory (has
    /// seen the run fail, or ended).
    pub fn all_stopped(ctx: &crate::Ctx) -> bool {
        ctx.all_stopped()
    }

    /// The barrier group (first package) of each process of `ctx`'s run, and each process's
    /// source in every barrier round: the shape of the run's barrier.
    pub fn barrier_shape(ctx: &crate::Ctx) -> (Vec<usize>, Vec<Vec<u32>>) {
        let run = ctx.run.engine.threads();
        let sources = (0..ctx.run.p)
            .map(|q| run.barrier.sources(q).to_vec())
            .collect();
        (run.groups.clone(), sources)
    }

    /// Run `f` as an SPMD program of `p` processes on loom threads (inside `loom::model`),
    /// through the runtime's real run state, barrier and superstep code, so that the model
    /// checker explores their interleavings. Placement is planned on a small synthetic machine
    /// and not applied; waiting spins once and yields once.
    #[cfg(loom)]
    pub fn model_run<R, F>(p: usize, f: F) -> Vec<crate::Result<R>>
    where
        R: Send + 'static,
        F: Fn(&mut crate::Ctx) -> crate::Result<R> + Send + Sync + 'static,
    {
        model_run_with(p, crate::WaitPolicy::new(1, 1), f)
    }

    /// [`model_run`] with waits that follow `policy` (`WaitPolicy::new(0, 0)` sleeps at once,
    /// which exposes the sleep handshakes to the model checker).
    #[cfg(loom)]
    pub fn model_run_with<R, F>(p: usize, policy: crate::WaitPolicy, f: F) -> Vec<crate::Result<R>>
    where
        R: Send + 'static,
        F: Fn(&mut crate::Ctx) -> crate::Result<R> + Send + Sync + 'static,
    {
        model_run_lanes(p, policy, true, f)
    }

    /// [`model_run_with`] whose lazy syncs announce through lanes (`true`) or through the
    /// inboxes of larger runs (`false`).
    #[cfg(loom)]
    pub fn model_run_lanes<R, F>(
        p: usize,
        policy: crate::WaitPolicy,
        lanes: bool,
        f: F,
    ) -> Vec<crate::Result<R>>
    where
        R: Send + 'static,
        F: Fn(&mut crate::Ctx) -> crate::Result<R> + Send + Sync + 'static,
    {
        model_run_slots(p, policy, lanes, 2, f)
    }

    /// [`model_run_lanes`] whose processes use `slots` sets of outboxes in turn (2 or 3: see
    /// [`slots`]).
    #[cfg(loom)]
    pub fn model_run_slots<R, F>(
        p: usize,
        policy: crate::WaitPolicy,
        lanes: bool,
        slots: usize,
        f: F,
    ) -> Vec<crate::Result<R>>
    where
        R: Send + 'static,
        F: Fn(&mut crate::Ctx) -> crate::Result<R> + Send + Sync + 'static,
    {
        model_runs_on_one_state(p, policy, lanes, slots, 1, f)
            .pop()
            .expect("one run")
    }

    /// [`model_run_slots`] `runs` times on one run state, made ready between the runs as a
    /// worker team's starter makes a kept state ready (`RunShared::release`, then
    /// `RunState::reuse` and `RunShared::reuse`, the next run counting on from the last when
    /// every process of that one ended well). The results of each run.
    #[cfg(loom)]
    pub fn model_runs_on_one_state<R, F>(
        p: usize,
        policy: crate::WaitPolicy,
        lanes: bool,
        slots: usize,
        runs: usize,
        f: F,
    ) -> Vec<Vec<crate::Result<R>>>
    where
        R: Send + 'static,
        F: Fn(&mut crate::Ctx) -> crate::Result<R> + Send + Sync + 'static,
    {
        use std::sync::Arc;
        let mut shared = model_shared(p, policy, lanes, slots);
        let f = Arc::new(f);
        let mut all = Vec::with_capacity(runs);
        for run in 0..runs {
            if run > 0 {
                let ended_well = all
                    .last()
                    .is_some_and(|r: &Vec<crate::Result<R>>| r.iter().all(|x| x.is_ok()));
                let s = Arc::get_mut(&mut shared).expect("the processes have left");
                s.release();
                let shape = model_shape(policy, lanes, slots);
                s.engine.threads_mut().reuse(shape, ended_well);
                let tree = s.tree.clone();
                s.reuse(&[], &tree, ended_well);
            }
            let handles: Vec<_> = (1..p)
                .map(|pid| {
                    let (s, f) = (shared.clone(), f.clone());
                    loom::thread::spawn(move || crate::process::process(&s, *s.id, pid, &*f))
                })
                .collect();
            let mut out = vec![crate::process::process(&shared, *shared.id, 0, &*f)];
            out.extend(
                handles
                    .into_iter()
                    .map(|h| h.join().expect("process thread")),
            );
            all.push(out);
        }
        all
    }

    /// The thread engine's shape of the loom models' runs.
    #[cfg(loom)]
    fn model_shape(
        policy: crate::WaitPolicy,
        lanes: bool,
        slots: usize,
    ) -> crate::engine::threads::state::Shape {
        crate::engine::threads::state::Shape {
            policy,
            lazy_policy: policy,
            tree_barrier: false,
            lanes,
            declared_at_barrier: false,
            slots,
            share: true,
            coroutines: false,
        }
    }

    /// The shared state of a run of `p` processes for the loom models: placement planned on a
    /// small synthetic machine and not applied; waiting as `policy` says.
    #[cfg(loom)]
    fn model_shared(
        p: usize,
        policy: crate::WaitPolicy,
        lanes: bool,
        slots: usize,
    ) -> std::sync::Arc<crate::ctx::RunShared> {
        static MACHINE: std::sync::OnceLock<mbsp_topology::Loaded> = std::sync::OnceLock::new();
        let loaded = MACHINE
            .get_or_init(|| crate::Machine::synthetic("pu:4").expect("synthetic machine"))
            .clone();
        let whole = loaded.machine.whole();
        let layout = crate::place::Layout::plan(
            loaded,
            &whole,
            crate::Procs::Count(p),
            crate::Policy::Scattered,
            Some(crate::place::OFF_BY_RUN),
        )
        .expect("plan");
        let layout = std::sync::Arc::new(layout);
        let shape = model_shape(policy, lanes, slots);
        let engine = crate::engine::state::RunEngine::Threads(
            crate::engine::threads::state::RunState::new(&layout, shape),
        );
        let shared = crate::ctx::RunShared::new(
            Vec::new(),
            crate::tree::Tree::new(),
            policy,
            layout,
            engine,
        );
        std::sync::Arc::new(shared)
    }

    /// The claim protocol of shared deliveries alone (`engine/threads/share.rs`; inside
    /// `loom::model`): the owner of a desk copies `jobs` (each a first cell, a length and the
    /// byte it writes) in chunks of one cell into `cells` cells, checking each job's cells
    /// after it, while `helpers` threads help until it marks its deliveries done. Returns the
    /// cells at the end.
    #[cfg(loom)]
    pub fn model_share(cells: usize, jobs: &[(usize, usize, u8)], helpers: usize) -> Vec<u8> {
        crate::engine::threads::share::model(cells, jobs, helpers)
    }

    /// The fan-out of a run with coroutines to a worker team, alone (inside `loom::model`):
    /// `rounds` fan-outs of `n` pieces of work on one team whose workers start parked, piece
    /// `i` writing `round * 100 + i` into a plain cell. Returns each round's cells as the
    /// caller read them once `Team::fan_out` returned.
    #[cfg(loom)]
    pub fn model_fan_out(n: usize, rounds: usize) -> Vec<Vec<u64>> {
        crate::team::model_fan_out(n, rounds)
    }

    /// The hand-off of processes to a worker team, alone (inside `loom::model`): `runs`
    /// launches of `p` processes on one team whose workers start parked, each worker's process
    /// returning `pid * 1000 + ` the run's id, then the team's shutdown (its workers joined).
    /// Returns, per launch, the run's id and the results of processes 1.. as the starter read
    /// them.
    #[cfg(loom)]
    pub fn model_team(p: usize, runs: usize) -> Vec<(u64, Vec<crate::Result<u64>>)> {
        crate::team::model_launches(
            (0..runs)
                .map(|_| model_shared(p, crate::WaitPolicy::new(1, 1), true, 2))
                .collect(),
        )
    }
}
