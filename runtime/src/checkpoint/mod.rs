//! Checkpoint and restart at superstep boundaries (docs/checkpoint-design.md).
//!
//! Right after a sync nothing is in flight: a process's state is its registered areas, its
//! message queue and tag size, the superstep count, and the program's own variables, which the
//! program hands over as one serde value. [`Ctx::sync_checkpoint`] is a sync after which, when
//! the run's [`Checkpoints`] policy says so, every process writes that state to its part of a
//! new checkpoint folder and process 0 then writes the manifest that makes it complete;
//! [`Ctx::resume`], in a later run of the same program, finds the newest complete checkpoint,
//! checks it against this run (processes, program, registrations, state type) and puts it all
//! back.
//!
//! ## One checkpoint
//!
//! ```text
//! superstep s:  any process may ask (request_checkpoint); process 0 looks at its clock
//!               -> an ask raises FLAG_CHECKPOINT in the process's flags
//! sync          a full sync: the engines OR every process's flags (threads at the barrier,
//!               ranks in the header exchange), so every process sees every ask
//! decide        the ORed flags, or the superstep count a multiple of k: all decide alike
//! each process  part-<pid>: state, areas, queue, written to a temporary file, synced, renamed;
//!               reports its length and CRC-32 (or its error) to the run's `Progress`
//! process 0     waits for the p reports; MANIFEST (temporary, synced, renamed, folder
//!               synced); older checkpoints pruned to `keep`. A failed part: no manifest,
//!               the folder removed, a warning (an error with `required(true)`).
//! ```
//!
//! Checkpoints are numbered by a sequence that starts above every checkpoint in the folder when
//! the run starts, so that a fresh run's checkpoints are newer than an old run's.
//!
//! Only the top level checkpoints (a nested run has ended at every top-level superstep
//! boundary). Over MPI ranks the processes share no memory: the parts' reports, the list of
//! checkpoints and the verdicts of a restart travel in all-gathers (`Engine::all_gather`),
//! which every rank makes whatever happened to its own part (none is left waiting); rank 0
//! writes the manifest, and parts are written in the foreground.

mod files;
mod format;
mod resume;
mod take;
pub(crate) mod words;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

pub(crate) use format::Msg;

/// Where and how often a run checkpoints ([`Run::checkpoints`](crate::Run::checkpoints)).
///
/// Checkpoints are taken at [`Ctx::sync_checkpoint`](crate::Ctx::sync_checkpoint) calls: every
/// `k` supersteps, every `t` seconds (as process 0's clock says), when a process asks
/// ([`Ctx::request_checkpoint`](crate::Ctx::request_checkpoint)), or always at
/// [`Ctx::checkpoint`](crate::Ctx::checkpoint).
///
/// ```
/// use std::time::Duration;
/// let policy = mbsp::Checkpoints::in_folder("ckpt")
///     .every_supersteps(100)
///     .every(Duration::from_secs(600))
///     .keep(2);
/// assert_eq!(policy.folder(), std::path::Path::new("ckpt"));
/// ```
#[derive(Clone, Debug)]
pub struct Checkpoints {
    pub(crate) dir: PathBuf,
    pub(crate) every_supersteps: Option<u64>,
    pub(crate) every: Option<Duration>,
    pub(crate) keep: usize,
    pub(crate) required: bool,
    pub(crate) background: bool,
}

/// The environment variables that give a run a checkpoint policy
/// ([`Checkpoints::from_env`]).
pub const CHECKPOINT_ENV: [&str; 4] = [
    "MBSP_CHECKPOINT_DIR",
    "MBSP_CHECKPOINT_EVERY",
    "MBSP_CHECKPOINT_SECONDS",
    "MBSP_CHECKPOINT_KEEP",
];

impl Checkpoints {
    /// Checkpoints in folder `dir` (made when the first one is written), only when asked for,
    /// keeping the newest 2.
    pub fn in_folder(dir: impl Into<PathBuf>) -> Self {
        Checkpoints {
            dir: dir.into(),
            every_supersteps: None,
            every: None,
            keep: 2,
            required: false,
            background: false,
        }
    }

    /// Also checkpoint at a `sync_checkpoint` whose superstep count (after the sync) is a
    /// multiple of `k` (0: never).
    pub fn every_supersteps(mut self, k: u64) -> Self {
        self.every_supersteps = (k > 0).then_some(k);
        self
    }

    /// Also checkpoint at the first `sync_checkpoint` after `t` has passed since the run
    /// started or the last checkpoint (process 0's clock decides for all).
    pub fn every(mut self, t: Duration) -> Self {
        self.every = Some(t);
        self
    }

    /// Keep the newest `k` complete checkpoints (at least 1); older ones are removed only after
    /// a newer one is complete.
    pub fn keep(mut self, k: usize) -> Self {
        self.keep = k.max(1);
        self
    }

    /// Whether a checkpoint that cannot be written (a full disk, say) fails the run. By
    /// default it does not: the run warns once per failed checkpoint and goes on, and the
    /// previous complete checkpoint stays the one a restart uses.
    pub fn required(mut self, yes: bool) -> Self {
        self.required = yes;
        self
    }

    /// Whether the files are written in the background (default: no). In the background, each
    /// process copies its part at the checkpoint's sync and goes on computing while a writer
    /// thread of its own writes it (the last writer to finish writes the manifest); a
    /// checkpoint is complete some time after its sync (until then a restart uses the previous
    /// one), a process holds at most three parts in memory (one being written, one queued, one
    /// waiting to be queued) and keeps the buffers of its last written copy for its next one
    /// (a copy into them costs a memcpy, into fresh ones mostly page faults), and the run's end
    /// waits for the writers. A
    /// checkpoint that cannot be written is reported at the next `sync_checkpoint` (an error
    /// there with [`required`](Self::required)) or, for the last ones, when the run ends.
    /// Over MPI ranks the parts are written in the foreground whatever this says (the ranks
    /// gather their reports in a collective call, which the writer thread cannot make).
    pub fn background(mut self, yes: bool) -> Self {
        self.background = yes;
        self
    }

    /// The folder the checkpoints go to.
    pub fn folder(&self) -> &Path {
        &self.dir
    }

    /// The policy the environment gives ([`CHECKPOINT_ENV`]): `MBSP_CHECKPOINT_DIR` (the
    /// folder; unset: no policy), `MBSP_CHECKPOINT_EVERY` (supersteps),
    /// `MBSP_CHECKPOINT_SECONDS` and `MBSP_CHECKPOINT_KEEP`. A value that is not a number is an
    /// error naming the variable.
    ///
    /// ```standalone_crate
    /// // SAFETY (of set_var): no other thread of this example reads the environment (the
    /// // example runs in a process of its own).
    /// unsafe {
    ///     std::env::set_var("MBSP_CHECKPOINT_DIR", "ckpt");
    ///     std::env::set_var("MBSP_CHECKPOINT_EVERY", "10");
    /// }
    /// let policy = mbsp::Checkpoints::from_env().unwrap().unwrap();
    /// assert_eq!(policy.folder(), std::path::Path::new("ckpt"));
    /// unsafe { std::env::set_var("MBSP_CHECKPOINT_KEEP", "two") };
    /// let e = mbsp::Checkpoints::from_env().unwrap().unwrap_err();
    /// assert_eq!(e, "MBSP_CHECKPOINT_KEEP=two is not a whole number");
    /// # for name in mbsp::CHECKPOINT_ENV { unsafe { std::env::remove_var(name) } }
    /// ```
    pub fn from_env() -> Option<std::result::Result<Self, String>> {
        let dir = std::env::var_os(CHECKPOINT_ENV[0]).filter(|d| !d.is_empty())?;
        let number = |name: &str| -> std::result::Result<Option<u64>, String> {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("{name}={v} is not a whole number")),
                Err(_) => Ok(None),
            }
        };
        let policy = (|| {
            let mut c = Checkpoints::in_folder(dir);
            if let Some(k) = number(CHECKPOINT_ENV[1])? {
                c = c.every_supersteps(k);
            }
            if let Some(t) = number(CHECKPOINT_ENV[2])? {
                c = c.every(Duration::from_secs(t));
            }
            if let Some(k) = number(CHECKPOINT_ENV[3])? {
                c = c.keep(usize::try_from(k).unwrap_or(usize::MAX));
            }
            Ok(c)
        })();
        Some(policy)
    }
}

/// The newest complete checkpoint of a run's folder, as its manifest describes it
/// ([`Ctx::newest_checkpoint`](crate::Ctx::newest_checkpoint)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The checkpoint's folder.
    pub folder: PathBuf,
    /// The superstep the run was in right after the checkpoint's sync.
    pub superstep: u64,
    /// The processes of the run that wrote it.
    pub processes: usize,
    /// The registrations each process had.
    pub registrations: usize,
    /// The name of the program that wrote it.
    pub program: String,
}

/// The parts' reports of the checkpoints being written, by sequence number (in the background
/// the processes' writers may be at different checkpoints): per pid, its part's length and
/// CRC-32, or why it could not be written.
type Progress = std::collections::BTreeMap<u64, Vec<Option<format::Report>>>;

/// A process's verdict on its part of a checkpoint being resumed.
#[derive(Clone, Debug)]
enum Verdict {
    /// Usable; its saved queue (each message is sent again by its sender).
    Usable(Vec<Msg>),
    /// Missing, truncated or corrupted: the run tries the previous checkpoint.
    Damaged(String),
    /// Not this run's (another p, program, registrations, state type): an error.
    Foreign(String),
}

impl Verdict {
    /// As words, for an all-gather over ranks.
    fn words(&self) -> Vec<u64> {
        use words::put;
        let mut w = Vec::new();
        match self {
            Verdict::Usable(queue) => {
                w.extend([0, queue.len() as u64]);
                for m in queue {
                    w.push(u64::from(m.from));
                    put(&mut w, &m.tag);
                    put(&mut w, &m.payload);
                }
            }
            Verdict::Damaged(why) | Verdict::Foreign(why) => {
                w.push(if matches!(self, Verdict::Damaged(_)) {
                    1
                } else {
                    2
                });
                put(&mut w, why.as_bytes());
            }
        }
        w
    }

    /// From [`words`](Self::words).
    fn read(w: &[u64]) -> Verdict {
        use words::take;
        let mut at = 1;
        match w.first() {
            Some(0) => {
                let n = w.get(1).copied().unwrap_or(0) as usize;
                at = 2;
                let queue = (0..n)
                    .map(|_| {
                        let from = w.get(at).copied().unwrap_or(0) as u32;
                        at += 1;
                        let tag = take(w, &mut at);
                        Msg {
                            from,
                            tag,
                            payload: take(w, &mut at),
                        }
                    })
                    .collect();
                Verdict::Usable(queue)
            }
            Some(1) => Verdict::Damaged(String::from_utf8_lossy(&take(w, &mut at)).into_owned()),
            _ => Verdict::Foreign(String::from_utf8_lossy(&take(w, &mut at)).into_owned()),
        }
    }
}

/// What the processes of a resuming run share: process 0's list of checkpoints, and per
/// candidate tried (a round) every process's verdict on its part and its saved queue.
#[derive(Default)]
struct ResumeShared {
    candidates: Option<std::result::Result<Vec<(u64, PathBuf)>, String>>,
    /// `[round][pid]`: `Ok` with the saved queue, or why the part cannot be used.
    verdicts: Vec<Vec<Option<Verdict>>>,
}

/// A run's checkpointing: its policy and what its processes share to agree and report
/// (kept in the run state of a top-level run with a policy).
pub(crate) struct Checkpointer {
    policy: Checkpoints,
    /// The sequence number of a checkpoint taken at superstep `s` is `base + s`: above every
    /// checkpoint in the folder when the run started.
    pub(crate) base: u64,
    /// Per pid: the process asked for a checkpoint at the next `sync_checkpoint`.
    pending: Vec<AtomicBool>,
    /// Per pid: the process has called `resume`.
    resumed: Vec<AtomicBool>,
    /// When the last checkpoint was taken (process 0's clock).
    last: Mutex<Instant>,
    progress: Mutex<Progress>,
    /// Per checkpoint (threads): how many processes have their part written or copied.
    arrived: Mutex<std::collections::BTreeMap<u64, usize>>,
    arrivals: Condvar,
    resume: Mutex<ResumeShared>,
    /// Per pid: the writer thread of its background checkpoints (started at the first one).
    writers: Vec<Mutex<Option<Writer>>>,
    /// Per pid: the buffers of its last background copy, written and free again.
    spare: Vec<Mutex<Vec<Vec<u8>>>>,
    /// The first background checkpoint that could not be written, not yet reported.
    failure: Mutex<Option<String>>,
}

impl Checkpointer {
    /// The checkpointing of a run of `p` processes under `policy`.
    pub(crate) fn new(policy: Checkpoints, p: usize) -> Self {
        let newest = files::list(&policy.dir)
            .ok()
            .and_then(|found| found.first().map(|f| f.0));
        Checkpointer {
            base: newest.map_or(1, |s| s.saturating_add(1)),
            policy,
            pending: (0..p).map(|_| AtomicBool::new(false)).collect(),
            resumed: (0..p).map(|_| AtomicBool::new(false)).collect(),
            last: Mutex::new(Instant::now()),
            progress: Mutex::new(Progress::default()),
            arrived: Mutex::new(std::collections::BTreeMap::new()),
            arrivals: Condvar::new(),
            resume: Mutex::new(ResumeShared::default()),
            writers: (0..p).map(|_| Mutex::new(None)).collect(),
            spare: (0..p).map(|_| Mutex::new(Vec::new())).collect(),
            failure: Mutex::new(None),
        }
    }

    /// The name this program goes by in manifests (a checkpoint of another program is
    /// refused).
    fn program() -> String {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "unknown".into())
    }
}

/// The writer thread of a process's background checkpoints and the way to it (`writer.rs`).
struct Writer {
    to: std::sync::mpsc::SyncSender<format::Job>,
    thread: std::thread::JoinHandle<()>,
}

/// The name a state type is saved under: its type name without references, so that a state
/// handed over by reference (`&(&x, &r, it)`, serialised exactly as `(x, r, it)`) resumes as
/// the owned type.
pub(crate) fn state_type<S: ?Sized>() -> String {
    std::any::type_name::<S>()
        .replace("&mut ", "")
        .replace('&', "")
}

/// Lock `m`, ignoring poisoning (the data are reports and lists that a panicking process
/// leaves whole; the run fails anyway).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Relaxed is enough for the per-process flags: they are read by their own process, or after
/// a sync (whose barrier orders them).
const RELAXED: Ordering = Ordering::Relaxed;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_travel_as_words() {
        let queue = vec![
            Msg {
                from: 3,
                tag: vec![1, 2, 3],
                payload: (0..17).collect(),
            },
            Msg {
                from: 0,
                tag: vec![],
                payload: vec![],
            },
        ];
        match Verdict::read(&Verdict::Usable(queue.clone()).words()) {
            Verdict::Usable(q) => assert_eq!(q, queue),
            v => panic!("{v:?}"),
        }
        match Verdict::read(&Verdict::Damaged("part-1: 3 bytes".into()).words()) {
            Verdict::Damaged(why) => assert_eq!(why, "part-1: 3 bytes"),
            v => panic!("{v:?}"),
        }
        match Verdict::read(&Verdict::Foreign("another p".into()).words()) {
            Verdict::Foreign(why) => assert_eq!(why, "another p"),
            v => panic!("{v:?}"),
        }
    }
}
