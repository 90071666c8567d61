//! Starting runs: the caller becomes pid 0, `p - 1` scoped threads become the others.

use crate::barrier::WaitPolicy;
use crate::ctx::{Ctx, RunShared};
use crate::error::{Error, ErrorKind, Result};
use crate::tree::Tree;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// The number of hardware threads available to this program: what `bsp_nprocs()` returns
/// outside a run.
///
/// ```
/// assert!(mbsp::nprocs() >= 1);
/// ```
pub fn nprocs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
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
///     Ok(ctx.local(&partial).iter().sum::<f64>())
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

/// A run about to start, with its options.
///
/// ```
/// let r = mbsp::Run::new(2).stack_size(8 << 20).run(|ctx| Ok(ctx.nprocs())).unwrap();
/// assert_eq!(r, vec![2, 2]);
/// ```
#[derive(Clone, Debug)]
pub struct Run {
    p: usize,
    policy: Option<WaitPolicy>,
    stack_size: Option<usize>,
}

impl Run {
    /// A run of `p` processes with default options.
    pub fn new(p: usize) -> Self {
        Run {
            p,
            policy: None,
            stack_size: None,
        }
    }

    /// How waiting processes spin, yield and sleep (default: [`WaitPolicy::for_load`] for `p`
    /// processes on this machine's hardware threads).
    pub fn wait_policy(mut self, policy: WaitPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Stack size of the threads started for pids 1.. (default: Rust's default for spawned
    /// threads). Process 0 runs on the caller's stack.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Start the run; see [`run`].
    pub fn run<R, F>(self, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        if self.p == 0 {
            return Err(Error::outside(
                ErrorKind::Misuse,
                "run",
                "a run needs at least 1 process, but p = 0 was requested",
            ));
        }
        let tree = Tree::new();
        let results = self.launch(tree.clone(), Vec::new(), &f);
        collect(results, &tree)
    }

    /// Start a run nested in the process owning `parent`.
    pub(crate) fn run_nested<R, F>(self, parent: &Ctx, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        parent.live("run")?;
        if self.p == 0 {
            return Err(parent.misuse(
                "run",
                "a nested run needs at least 1 process, but p = 0 was requested".into(),
            ));
        }
        let tree = parent.run.tree.clone();
        let results = self.launch(tree.clone(), parent.path.clone(), &f);
        collect(results, &tree)
    }

    fn launch<R, F>(&self, tree: Arc<Tree>, parent_path: Vec<usize>, f: &F) -> Vec<Result<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        let p = self.p;
        let policy = self
            .policy
            .unwrap_or_else(|| WaitPolicy::for_load(p, nprocs()));
        let shared = RunShared::new(p, parent_path, tree.clone(), policy);
        std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(p - 1);
            for pid in 1..p {
                let mut b = std::thread::Builder::new().name(thread_name(&shared, pid));
                if let Some(s) = self.stack_size {
                    b = b.stack_size(s);
                }
                let mine = shared.clone();
                match b.spawn_scoped(scope, move || process(mine, pid, f)) {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        let err = Error::new(
                            ErrorKind::System,
                            "run",
                            shared.parent_path.clone(),
                            None,
                            format!("could not start the thread for pid {pid} of {p}: {e}"),
                        );
                        tree.fail(&err);
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

fn thread_name(shared: &RunShared, pid: usize) -> String {
    let mut s = String::from("mbsp");
    for p in &shared.parent_path {
        s.push_str(&format!("-{p}"));
    }
    s.push_str(&format!("-{pid}"));
    s
}

/// Run `f` as process `pid`, then the final sync; any failure aborts the hierarchy.
fn process<R, F>(shared: Arc<RunShared>, pid: usize, f: &F) -> Result<R>
where
    F: Fn(&mut Ctx) -> Result<R> + Sync,
{
    let tree = shared.tree.clone();
    let mut ctx = Ctx::new(shared, pid);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let r = f(&mut ctx)?;
        ctx.end()?;
        Ok(r)
    }));
    let result = match outcome {
        Ok(r) => r,
        Err(payload) => Err(ctx.error(ErrorKind::Panic, "spmd", panic_message(&*payload))),
    };
    if let Err(e) = &result {
        tree.fail(e);
    }
    result
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".into()
    }
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

    /// Start a nested run with options; see [`Ctx::run`].
    pub fn run_with<R, F>(&self, options: Run, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> Result<R> + Sync,
    {
        options.run_nested(self, f)
    }
}
