//! The rank engine (feature `mpi`): the top level of a run over MPI ranks, one process per
//! rank, with the same [`Ctx`](crate::Ctx) API as the thread engine; runs nested inside a rank are thread
//! runs, as on one machine. A program asks for it explicitly: [`World::init`] initialises MPI,
//! [`World::run`] starts a run over the ranks and returns this rank's part ([`RankResult`]).
//! Plain [`run`](fn@crate::run) and [`Run::run`](crate::Run::run) are thread runs whatever the
//! environment; only the C ABI follows BSPlib's convention of running over the ranks of an
//! MPI launcher ([`launched_by_mpi`]).
//!
//! ## Modules
//!
//! `world` (asking for ranks, starting runs), `engine` (this engine's side of the seam),
//! `net` (the connection: MPI window, exchanges, one-sided transfers), `exchange` (a sync),
//! `lazy` (a sync with declared counts: point to point, no header all-to-all) and
//! `lazy_state` (what lazy syncs keep), `collective` (registration changes), `immediate`
//! (`hpput`, `hpget`, `direct_get`), `shm` (large puts through node-shared segments), `wire`
//! (what travels between ranks, and MPI's C-int counts), `watchdog` (a rank waiting too
//! long), `profile` (a profile over ranks).
//!
//! ## What a rank keeps
//!
//! A run over ranks has the engine-independent run state (`RunShared`, without an engine part
//! of its own: `RunEngine::Ranks`) on every rank, with one real process (this rank's) and
//! `p - 1` mirrors. A mirror holds what this rank knows of another rank: its registration table
//! (addresses and sizes, exchanged when registrations take effect, so `put`/`get` are
//! bounds-checked at the call exactly as on threads) and, during a superstep, the messages that
//! rank sent here. Puts and messages are written into this rank's outboxes by the primitives'
//! code unchanged; records carry the destination's address in the destination's address space
//! (from the mirrored table). The rank's own engine state is its `Net` (`net.rs`), in its
//! context (`ProcEngine::Ranks`).
//!
//! ## One superstep's sync
//!
//! ```text
//! hpsend payloads into outboxes; one-sided hpputs completed (MPI_Win_flush_all)
//! stream to each other rank: [outbox words][get requests][large-put records]
//! all-to-all of headers (state, stream words, flags, and the stream itself if it is short)
//!                                                             <- an empty sync stops here
//! any rank failed / ended while others sync -> every rank stops with the same error
//! REGS|TAGS: all-gather of every rank's requests (+ areas of its pushes); the thread
//!            runtime's agreement check; own table, mirrors and the window updated
//! all-to-all-v of the long streams (only if some rank sends one)
//! get requests served from this rank's memory, before any put lands; replies all-to-all-v
//! puts delivered, messages into the mirrors' outboxes (as with threads, which of several puts
//! writing the same bytes in one superstep wins is left open: here large ones land first)
//! get replies written; superstep counted done (published in the window for one-sided reads)
//! ```
//!
//! Every header word also carries the rank's superstep, so that a full sync meeting the full
//! sync of another superstep (ranks whose lazy syncs completed went on) fails on every rank;
//! after a lazy superstep a full sync gathers every rank's counts of lazy streams sent and
//! received, so that one never received fails on every rank too (`lazy`).
//!
//! ## Lazy syncs
//!
//! A superstep whose processes declared their counts (`Ctx::declare_incoming`) ends without the header
//! all-to-all: each rank sends its streams (`MPI_Issend`, tagged by superstep parity) only to
//! the ranks it wrote to and receives until its declared number of records has arrived; a
//! rank with nothing to receive does not wait. Its waits read the other ranks' windows now and
//! then (a failed rank, a full sync among lazy ones, a count nothing more can meet) and end in
//! the failure exchange above, so every rank reports the same error. The protocol and why it
//! never delivers a stream into another superstep are in `lazy.rs`.
//!
//! Puts and gets of at least `BIG_PUT` (32 KiB) bytes do not go through the streams (whose copies
//! cost more than the data): their records travel in the streams, their data apart — a large
//! get is sent from the owner's memory and received in place (through the get buffer when
//! another get reads the destination), before any put lands; a large put to a rank of the
//! same node is copied at the call into the sender's shared-memory segment (`Shm`) and copied
//! into place by the receiver, one to another node travels as a message received in place.
//!
//! ## One-sided primitives
//!
//! Registered memory is attached to one dynamic MPI window per run (`MPI_Win_attach` when a
//! push takes effect), opened for passive access with `MPI_Win_lock_all`. `hpput` is an
//! `MPI_Put`, completed at the next sync (one of at least `BIG_PUT` (32 KiB) bytes goes the way of a
//! large buffered put, copied at the call, which MPICH does several times faster than a put
//! into a dynamic window); `hpget` and `direct_get` are an `MPI_Get` plus
//! `MPI_Win_flush`, after checking (atomically, in the window) that the target has finished
//! the previous sync, as the thread runtime's immediate primitives wait for it.
//!
//! ## Failure
//!
//! Every exchange begins with each rank's state. A rank whose process failed (abort, panic,
//! misuse, an error returned) makes one last exchange with the state "failed" and its error;
//! every rank then reports that error (kind, pid, superstep and message preserved) and stops.
//! Before that exchange the failed rank publishes the failure where others read its completed
//! syncs, so that a rank waiting in an `hpput`, `hpget` or `direct_get` for it to complete a
//! sync stops waiting (with the stopped error) and joins the exchange; when several ranks
//! failed, the first root cause among their errors is reported.
//! A rank that is killed is the MPI launcher's business: MPICH's `mpiexec` ends the others.
//!
//! Trust: a rank writes where another rank's put record says and reads where its get request
//! says; both were checked by the sender against the mirrored table, as one process of the
//! thread runtime trusts another's checks.

mod active;
mod collective;
pub(crate) mod engine;
mod exchange;
mod immediate;
mod lazy;
mod lazy_state;
pub(crate) mod net;
mod profile;
mod protocol;
mod share;
mod shm;
mod watchdog;
pub(crate) mod wire;
mod world;

pub use watchdog::TIMEOUT_ENV;
pub use world::{MPI_ENV, RankResult, World, bsplib_world, launched_by_mpi};
