//! The constants of the exchange between ranks (module documentation of `ranks`).

pub(super) const SYNCING: u64 = 0;
pub(super) const ENDED: u64 = 1;
pub(super) const FAILED: u64 = 2;

/// A rank's published count of completed syncs once its run has failed: a rank waiting for it
/// to complete a sync (`Net::wait_settled`) stops waiting instead of waiting forever.
pub(super) const DONE_FAILED: u64 = u64::MAX;

/// Words per pair in the header exchange: state, stream length, flags, and a stream of up to
/// [`INLINE`] words (a few small puts or messages), which then needs no second exchange.
pub(super) const SLOT: usize = 16;
pub(super) const INLINE: usize = SLOT - 3;

/// Header flag: the sender has a stream too long for its header slot for somebody.
pub(super) const STREAM: u64 = 1 << 32;
/// Header flag: the sender has large puts, which travel apart (received in place).
pub(super) const BIG: u64 = 1 << 33;
/// Header flag: the sender has large gets, whose data travels apart.
pub(super) const BIG_GETS: u64 = 1 << 34;

/// Puts to another rank of at least this many bytes travel as messages of their own, received
/// straight into the destination: two copies fewer than through the stream.
pub(super) const BIG_PUT: usize = 32 << 10;

/// MPI tag of the large puts (matched in order between each pair of ranks).
pub(super) const BIG_TAG: i32 = 0x6d62;
/// MPI tag of the large gets' data.
pub(super) const BIG_GET_TAG: i32 = 0x6d63;

/// A get request's length word: the data travels apart (sent from the owner's memory, received
/// in place when safe).
pub(super) const APART: u64 = 1 << 63;

/// Largest half of a shared segment (each rank has two): 256 MiB. Larger large puts travel
/// as messages.
pub(super) const MAX_SEGMENT: usize = 256 << 20;

/// A stream's large-put record word for data that travels as a message.
pub(super) const AS_MESSAGE: u64 = u64::MAX;

/// Header flag: some rank's large puts to ranks of its node did not fit its shared segment;
/// every node grows its segments at the end of this sync.
pub(super) const GROW: u64 = 1 << 35;

/// Header flag: the sender's last sync was lazy (every rank then checks that every stream of
/// it was received, `lazy.rs`).
pub(super) const PREV_LAZY: u64 = 1 << 36;

/// Header state word: the state in its low bits, the superstep above them.
pub(super) const STATE_BITS: u32 = 2;

/// Header flag: the sender's streams do not fit the counts of one MPI call, so every stream of
/// this exchange travels point to point, in pieces.
pub(super) const PIECES: u64 = 1 << 37;

/// MPI tag of the streams when they travel in pieces.
pub(super) const STREAM_TAG: i32 = 0x6d65;
/// MPI tag of the get replies when they travel in pieces.
pub(super) const REPLY_TAG: i32 = 0x6d66;
