//! One test body, either engine: the semantic test files start their runs through [`run`] (or
//! [`run_local`]), which runs them on the thread engine, or, when the launching script sets
//! [`ENGINE_ENV`]`=ranks` (feature `mpi`), as a run over this program's MPI ranks
//! (`mbsp::ranks::World::run`).
//!
//! Over ranks every rank runs the same tests in the same order (`--test-threads=1`) and each
//! run is collective. After the run the ranks exchange their outcomes over MPI (not through the
//! engine under test), so that every rank returns what the thread engine returns from the same
//! body: all processes' results in pid order ([`run`]; they travel encoded, [`Wire`]), or the
//! run's error. The harness checks on the way that every rank taking part got the same error
//! (kind, operation, path, superstep, message): the rank engine's promise. A run of fewer
//! processes than there are ranks leaves the last ranks out (they take no part but learn the
//! outcome); a test whose run needs more processes than there are ranks, or that tests what only
//! threads have (the calling thread, shared memory between processes, the thread engine's fault
//! points), skips itself over ranks ([`skip_test`], [`procs`]) with a printed reason.

use mbsp::{Ctx, ErrorKind};
use std::fmt;
use std::sync::OnceLock;

/// The environment variable that selects the engine: `threads` (the default) or `ranks`.
pub const ENGINE_ENV: &str = "MBSP_TEST_ENGINE";

/// The engine the tests of this program run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Threads,
    /// The thread engine with its processes as coroutines (`Run::coroutines`).
    Coroutines,
    Ranks,
}

/// The engine [`ENGINE_ENV`] selects (read once).
pub fn engine() -> Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    *ENGINE.get_or_init(|| match std::env::var(ENGINE_ENV).as_deref() {
        Err(_) | Ok("" | "threads") => Engine::Threads,
        Ok("coroutines") => Engine::Coroutines,
        Ok("ranks") if cfg!(feature = "mpi") => Engine::Ranks,
        Ok("ranks") => panic!("{ENGINE_ENV}=ranks needs the runtime's feature `mpi`"),
        Ok(other) => {
            panic!("{ENGINE_ENV}={other:?}: expected `threads`, `coroutines` or `ranks`")
        }
    })
}

/// Whether the tests run over MPI ranks.
pub fn over_ranks() -> bool {
    engine() == Engine::Ranks
}

/// The most processes a run can have here: unlimited on threads, the rank count over ranks.
pub fn max_procs() -> usize {
    match engine() {
        Engine::Threads | Engine::Coroutines => usize::MAX,
        Engine::Ranks => ranks::size(),
    }
}

/// Print a note of the harness: once (by rank 0 over ranks), and past libtest's capture of
/// `println!` (scripts/test-ranks counts the notes of passing tests).
fn note(line: String) {
    let speaks = match engine() {
        Engine::Threads | Engine::Coroutines => true,
        Engine::Ranks => ranks::rank() == 0,
    };
    if speaks {
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), "{line}");
    }
}

/// The name of the running test (libtest names the thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("(unnamed test thread)")
        .to_string()
}

/// Print that the whole test is skipped on this machine and why (on either engine): for tests
/// whose subject this machine or environment cannot offer (a real binding, an allocation
/// that fails). The test returns at once after it; scripts/test counts these lines.
pub fn skip_here(why: &str) {
    note(format!("SKIP-TEST on this machine: {}: {why}", test_name()));
}

/// Over ranks: print that the whole test is skipped and why, and return `true` (the test
/// returns at once); on threads `false`. For tests of what only the thread engine has.
pub fn skip_test(why: &str) -> bool {
    if !over_ranks() {
        return false;
    }
    note(format!(
        "SKIP-TEST over {} ranks: {}: {why}",
        max_procs(),
        test_name()
    ));
    true
}

/// Over ranks: print that the whole test is skipped because it needs `p` processes, when there
/// are fewer ranks, and return `true`; otherwise `false`.
pub fn needs_procs(p: usize) -> bool {
    if p <= max_procs() {
        return false;
    }
    skip_test(&format!("needs a run of {p} processes"))
}

/// Whether a run of `p` processes can be had here; over ranks, when it cannot, prints that
/// this part of the test is skipped.
pub fn can(p: usize) -> bool {
    !procs([p]).is_empty()
}

/// Over ranks: print that a part of the test is skipped and why, and return `true`; on threads
/// `false`. For parts of a test that only the thread engine can pass (say why at the call).
pub fn skip_part(why: &str) -> bool {
    if !over_ranks() {
        return false;
    }
    note(format!(
        "SKIP-PART over {} ranks: {}: {why}",
        max_procs(),
        test_name()
    ));
    true
}

/// The process counts of `ps` a run can have here (all on threads); over ranks, prints the
/// others as skipped parts of the test.
pub fn procs<const N: usize>(ps: [usize; N]) -> Vec<usize> {
    let (ok, skipped): (Vec<usize>, Vec<usize>) = ps.into_iter().partition(|&p| p <= max_procs());
    if !skipped.is_empty() {
        note(format!(
            "SKIP-PART over {} ranks: {}: runs of {skipped:?} processes",
            max_procs(),
            test_name()
        ));
    }
    ok
}

/// `n` on threads, `min(n, ranks_n)` over ranks: a repetition or case count, kept small over
/// ranks, where 3 ranks on 2 cores each wait for the others by polling and a sync costs
/// milliseconds.
pub fn limit<T: Ord>(n: T, ranks_n: T) -> T {
    match engine() {
        Engine::Threads | Engine::Coroutines => n,
        Engine::Ranks => n.min(ranks_n),
    }
}

/// Run `f` on `p` processes of the selected engine, as `mbsp::run` does: every process's
/// result in pid order, or the run's error. Over ranks the results are gathered from every
/// rank (so every rank checks all of them).
pub fn run<R, F>(p: usize, f: F) -> Result<Vec<R>, Failure>
where
    R: Send + Wire,
    F: Fn(&mut Ctx) -> mbsp::Result<R> + Sync,
{
    match engine() {
        Engine::Threads => mbsp::run(p, f).map_err(Failure::from),
        Engine::Coroutines => mbsp::Run::new(p)
            .coroutines(true)
            .run(f)
            .map_err(Failure::from),
        Engine::Ranks => ranks::run(p, f, |r: &R, out: &mut Vec<u8>| r.put(out))
            .map(|(_, all)| all.into_iter().map(|b| R::take(&mut &b[..])).collect()),
    }
}

/// Run `f` on `p` processes of the selected engine, returning the results this test program
/// holds, with their pids: all of them on threads, this rank's over ranks (none for a rank
/// that took no part). For results that cannot travel (registrations, this process's
/// addresses); gather what can with [`gather`].
pub fn run_local<R, F>(p: usize, f: F) -> Result<Vec<(usize, R)>, Failure>
where
    R: Send,
    F: Fn(&mut Ctx) -> mbsp::Result<R> + Sync,
{
    match engine() {
        Engine::Threads => mbsp::run(p, f)
            .map(|v| v.into_iter().enumerate().collect())
            .map_err(Failure::from),
        Engine::Coroutines => mbsp::Run::new(p)
            .coroutines(true)
            .run(f)
            .map(|v| v.into_iter().enumerate().collect())
            .map_err(Failure::from),
        Engine::Ranks => ranks::run(p, f, |_: &R, _: &mut Vec<u8>| {}).map(|(mine, _)| mine),
    }
}

/// All `p` processes' values from the ones [`run_local`] returned: over ranks every rank sends
/// its own (collective: every rank calls it after the same run).
pub fn gather<R: Wire>(p: usize, local: Vec<(usize, R)>) -> Vec<R> {
    match engine() {
        Engine::Threads | Engine::Coroutines => {
            assert_eq!(local.len(), p);
            local.into_iter().map(|(_, r)| r).collect()
        }
        Engine::Ranks => ranks::gather(p, local),
    }
}

/// The error of a failed run, as the test sees it on either engine: an `mbsp::Error`'s parts
/// (over ranks, a rank that took no part gets those of rank 0's error).
#[derive(Clone, PartialEq)]
pub struct Failure {
    kind: ErrorKind,
    op: String,
    path: Vec<usize>,
    superstep: Option<u64>,
    message: String,
    text: String,
}

impl Failure {
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    pub fn op(&self) -> &str {
        &self.op
    }
    pub fn pid(&self) -> Option<usize> {
        self.path.last().copied()
    }
    pub fn path(&self) -> &[usize] {
        &self.path
    }
    pub fn superstep(&self) -> Option<u64> {
        self.superstep
    }
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<mbsp::Error> for Failure {
    fn from(e: mbsp::Error) -> Self {
        Failure {
            kind: e.kind(),
            op: e.op().to_string(),
            path: e.path().to_vec(),
            superstep: e.superstep(),
            message: e.message().to_string(),
            text: e.to_string(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?})", self.text, self.kind)
    }
}

/// The kinds by name, for the exchange of errors between ranks.
const KINDS: [ErrorKind; 5] = [
    ErrorKind::Misuse,
    ErrorKind::Abort,
    ErrorKind::Panic,
    ErrorKind::Aborted,
    ErrorKind::System,
];

impl Wire for Failure {
    fn put(&self, out: &mut Vec<u8>) {
        let kind = KINDS
            .iter()
            .position(|k| *k == self.kind)
            .unwrap_or_else(|| panic!("the harness does not know error kind {:?}", self.kind));
        kind.put(out);
        self.op.put(out);
        self.path.put(out);
        self.superstep.put(out);
        self.message.put(out);
        self.text.put(out);
    }
    fn take(inp: &mut &[u8]) -> Self {
        Failure {
            kind: KINDS[usize::take(inp)],
            op: Wire::take(inp),
            path: Wire::take(inp),
            superstep: Wire::take(inp),
            message: Wire::take(inp),
            text: Wire::take(inp),
        }
    }
}

/// A value that travels between ranks: written to bytes and read back.
pub trait Wire: Sized {
    fn put(&self, out: &mut Vec<u8>);
    fn take(inp: &mut &[u8]) -> Self;
}

/// The first `n` bytes of `inp`, consumed.
fn split<'a>(inp: &mut &'a [u8], n: usize) -> &'a [u8] {
    assert!(inp.len() >= n, "wire: {} bytes left, {n} needed", inp.len());
    let (head, tail) = inp.split_at(n);
    *inp = tail;
    head
}

macro_rules! wire_numbers {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn take(inp: &mut &[u8]) -> Self {
                <$t>::from_le_bytes(split(inp, size_of::<$t>()).try_into().unwrap())
            }
        }
    )*};
}
wire_numbers!(u8, u16, u32, u64, usize, i8, i16, i32, i64, f32, f64);

impl Wire for bool {
    fn put(&self, out: &mut Vec<u8>) {
        (*self as u8).put(out);
    }
    fn take(inp: &mut &[u8]) -> Self {
        u8::take(inp) != 0
    }
}

impl Wire for () {
    fn put(&self, _: &mut Vec<u8>) {}
    fn take(_: &mut &[u8]) -> Self {}
}

impl<T: Wire> Wire for Vec<T> {
    fn put(&self, out: &mut Vec<u8>) {
        self.len().put(out);
        self.iter().for_each(|x| x.put(out));
    }
    fn take(inp: &mut &[u8]) -> Self {
        (0..usize::take(inp)).map(|_| T::take(inp)).collect()
    }
}

impl<T: Wire, const N: usize> Wire for [T; N] {
    fn put(&self, out: &mut Vec<u8>) {
        self.iter().for_each(|x| x.put(out));
    }
    fn take(inp: &mut &[u8]) -> Self {
        std::array::from_fn(|_| T::take(inp))
    }
}

impl Wire for String {
    fn put(&self, out: &mut Vec<u8>) {
        self.as_bytes().to_vec().put(out);
    }
    fn take(inp: &mut &[u8]) -> Self {
        String::from_utf8(Vec::take(inp)).expect("wire: a string")
    }
}

impl<T: Wire> Wire for Option<T> {
    fn put(&self, out: &mut Vec<u8>) {
        self.is_some().put(out);
        if let Some(x) = self {
            x.put(out);
        }
    }
    fn take(inp: &mut &[u8]) -> Self {
        bool::take(inp).then(|| T::take(inp))
    }
}

macro_rules! wire_tuples {
    ($(($($t:ident $i:tt),*)),*) => {$(
        impl<$($t: Wire),*> Wire for ($($t,)*) {
            fn put(&self, out: &mut Vec<u8>) {
                $(self.$i.put(out);)*
            }
            fn take(inp: &mut &[u8]) -> Self {
                ($($t::take(inp),)*)
            }
        }
    )*};
}
wire_tuples!((A 0, B 1), (A 0, B 1, C 2), (A 0, B 1, C 2, D 3));

/// Over ranks: the runs, the exchange of outcomes and values.
#[cfg(feature = "mpi")]
mod ranks {
    use super::{Failure, Wire};
    use mbsp::Ctx;
    use mbsp::ranks::World;
    use mpi::datatype::PartitionMut;
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;

    fn world() -> &'static World {
        World::init().expect("MPI initialised for the rank engine's tests")
    }

    pub fn size() -> usize {
        world().size()
    }

    pub fn rank() -> usize {
        world().rank()
    }

    /// Every rank's `mine`, in rank order (collective over the world).
    fn all_gather(mine: &[u8]) -> Vec<Vec<u8>> {
        let comm = SimpleCommunicator::world();
        let n = comm.size() as usize;
        let len = i32::try_from(mine.len()).expect("a blob under 2 GiB");
        let mut lens = vec![0i32; n];
        comm.all_gather_into(&len, &mut lens[..]);
        let displs: Vec<i32> = lens
            .iter()
            .scan(0i32, |at, &l| {
                let d = *at;
                *at += l;
                Some(d)
            })
            .collect();
        let total = lens.iter().map(|&l| l as usize).sum();
        let mut buf = vec![0u8; total];
        {
            let mut part = PartitionMut::new(&mut buf[..], &lens[..], &displs[..]);
            comm.all_gather_varcount_into(mine, &mut part);
        }
        lens.iter()
            .zip(&displs)
            .map(|(&l, &d)| buf[d as usize..(d + l) as usize].to_vec())
            .collect()
    }

    /// What a rank reports after a run.
    enum Outcome {
        /// It took no part.
        Out,
        /// Its process returned (its value, encoded if asked for).
        Ok(Vec<u8>),
        /// The run failed.
        Err(Failure),
    }

    impl Wire for Outcome {
        fn put(&self, out: &mut Vec<u8>) {
            match self {
                Outcome::Out => 0u8.put(out),
                Outcome::Ok(v) => {
                    1u8.put(out);
                    v.put(out);
                }
                Outcome::Err(e) => {
                    2u8.put(out);
                    e.put(out);
                }
            }
        }
        fn take(inp: &mut &[u8]) -> Self {
            match u8::take(inp) {
                0 => Outcome::Out,
                1 => Outcome::Ok(Wire::take(inp)),
                _ => Outcome::Err(Wire::take(inp)),
            }
        }
    }

    /// `p` processes over the ranks: this rank's result with its pid (if it took part), and
    /// every process's result in pid order as `encode` wrote it; or the run's error, the same
    /// on every rank (checked).
    #[allow(clippy::type_complexity)]
    pub fn run<R, F>(
        p: usize,
        f: F,
        encode: impl Fn(&R, &mut Vec<u8>),
    ) -> Result<(Vec<(usize, R)>, Vec<Vec<u8>>), Failure>
    where
        F: Fn(&mut Ctx) -> mbsp::Result<R> + Sync,
    {
        let world = world();
        assert!(
            p <= world.size(),
            "a run of {p} processes over {} ranks: the test must skip it (common::procs, \
             common::needs_procs)",
            world.size()
        );
        let (mine, outcome) = match world.run(mbsp::Run::new(p), f) {
            Ok(r) => match r.value {
                None => (None, Outcome::Out),
                Some(v) => {
                    let mut bytes = Vec::new();
                    encode(&v, &mut bytes);
                    (Some((r.rank, v)), Outcome::Ok(bytes))
                }
            },
            Err(e) => (None, Outcome::Err(Failure::from(e))),
        };
        let mut blob = Vec::new();
        outcome.put(&mut blob);
        let outcomes: Vec<Outcome> = all_gather(&blob)
            .iter()
            .map(|b| Outcome::take(&mut &b[..]))
            .collect();
        let first_err = outcomes.iter().enumerate().find_map(|(k, o)| match o {
            Outcome::Err(e) => Some((k, e)),
            _ => None,
        });
        if let Some((k, e)) = first_err {
            for (j, o) in outcomes.iter().enumerate() {
                match o {
                    Outcome::Ok(_) => panic!(
                        "rank {j}'s process returned, while rank {k} reports the run's \
                         failure: {e}"
                    ),
                    Outcome::Err(f) => assert!(
                        f == e,
                        "ranks {k} and {j} report different errors of the run: {e:?} and {f:?}"
                    ),
                    Outcome::Out => {}
                }
            }
            return Err(match &outcomes[world.rank()] {
                Outcome::Err(own) => own.clone(),
                _ => e.clone(),
            });
        }
        let values: Vec<Vec<u8>> = outcomes
            .into_iter()
            .filter_map(|o| match o {
                Outcome::Ok(v) => Some(v),
                _ => None,
            })
            .collect();
        assert_eq!(values.len(), p, "every process of the run returned");
        Ok((mine.into_iter().collect(), values))
    }

    /// All `p` processes' values from each rank's own (collective over the world).
    pub fn gather<R: Wire>(p: usize, local: Vec<(usize, R)>) -> Vec<R> {
        let mut blob = Vec::new();
        local.put(&mut blob);
        let mut all: Vec<(usize, R)> = all_gather(&blob)
            .iter()
            .flat_map(|b| Vec::<(usize, R)>::take(&mut &b[..]))
            .collect();
        all.sort_by_key(|(pid, _)| *pid);
        assert!(
            all.iter().map(|(pid, _)| *pid).eq(0..p),
            "one value per process"
        );
        all.into_iter().map(|(_, r)| r).collect()
    }
}

/// Without the feature `mpi` there are no ranks (never reached: [`engine`] refuses).
#[cfg(not(feature = "mpi"))]
mod ranks {
    use super::{Failure, Wire};
    use mbsp::Ctx;

    pub fn size() -> usize {
        unreachable!()
    }
    pub fn rank() -> usize {
        unreachable!()
    }
    #[allow(clippy::type_complexity)]
    pub fn run<R, F>(
        _: usize,
        _: F,
        _: impl Fn(&R, &mut Vec<u8>),
    ) -> Result<(Vec<(usize, R)>, Vec<Vec<u8>>), Failure>
    where
        F: Fn(&mut Ctx) -> mbsp::Result<R> + Sync,
    {
        unreachable!()
    }
    pub fn gather<R: Wire>(_: usize, _: Vec<(usize, R)>) -> Vec<R> {
        unreachable!()
    }
}
