//! The flags of a superstep: what a process did in it (communicated, read, changed
//! registrations ...), ORed over all processes at the sync so that every process knows which
//! phases the sync needs. Both engines combine them (the thread engine in its barrier, the rank
//! engine in its header exchange); the primitives raise them.

/// Someone in this superstep issued a put, send, hpsend or hpput (a communication phase is
/// needed).
pub(crate) const FLAG_COMM: u32 = 1;
/// Someone issued a buffered get: reads need their own phase before the writes.
pub(crate) const FLAG_GETS: u32 = 2;
/// Someone pushed or popped a registration.
pub(crate) const FLAG_REGS: u32 = 4;
/// Someone called `set_tagsize`.
pub(crate) const FLAG_TAGS: u32 = 8;
/// Someone wrote to an outbox (puts that did not ride the barrier, messages): receivers must
/// look at the outboxes.
pub(crate) const FLAG_OUTBOX: u32 = 16;
/// Someone arrived from a superstep with an even number, or an odd one: both at one episode
/// means processes in different supersteps met at the barrier, which only a lazy sync where
/// others made a full one (a misuse) can cause. Every process of the episode sees it.
pub(crate) const FLAG_EVEN_STEP: u32 = 32;
/// See [`FLAG_EVEN_STEP`].
pub(crate) const FLAG_ODD_STEP: u32 = 64;
/// In a run whose declared syncs take the barrier (`RunState::declared_at_barrier`): someone
/// arrived at a sync of its superstep without declaring counts. A process that declared and sees it
/// knows that the processes did not all declare (`declare_incoming` is collective).
pub(crate) const FLAG_UNDECLARED: u32 = 128;
/// See [`FLAG_UNDECLARED`]: someone arrived having declared counts (a process that did not
/// declare and sees it knows the same).
pub(crate) const FLAG_DECLARED: u32 = 1 << 28;

/// Someone asked for a checkpoint at this sync (`checkpoint/`): every process learns it from
/// the ORed flags, so all checkpoint or none does.
pub(crate) const FLAG_CHECKPOINT: u32 = 1 << 29;

/// The flag of superstep `step`'s parity ([`FLAG_EVEN_STEP`]).
#[inline]
pub(crate) fn step_flag(step: u64) -> u32 {
    if step & 1 == 0 {
        FLAG_EVEN_STEP
    } else {
        FLAG_ODD_STEP
    }
}

// Flags ORed over all processes: bits 0..8, 28 and 29 (`FLAG_*`), and the get-source bits 14..28.
// Bits 8..14, 30 and 31 are the thread engine's barrier's own (`engine/threads/barrier.rs`).
/// Bits 14..28: which registration slots (modulo 14) are read by a buffered get in this
/// superstep, ORed over all processes — a get whose destination is in no such slot can be
/// written directly, without the get buffer (`engine/threads/sync.rs`).
const SOURCE_SHIFT: u32 = 14;
const SOURCE_BITS: u32 = 14;
const _: () = assert!(1 << (SOURCE_SHIFT + SOURCE_BITS) <= FLAG_DECLARED);

/// Bits 8..14, which no flag uses: an engine's own (the thread engine's barrier lines say
/// there how many words ride with them, and whether an outbox waits).
pub(crate) const ENGINE_BITS: u32 = ((1 << SOURCE_SHIFT) - 1) & !(FLAG_UNDECLARED * 2 - 1);
const _: () = assert!(FLAG_CHECKPOINT > FLAG_DECLARED && FLAG_CHECKPOINT < 1 << 30);

/// The get-source bit of registration slot `slot`.
#[inline]
pub(crate) fn source_bit(slot: u32) -> u32 {
    1 << (SOURCE_SHIFT + slot % SOURCE_BITS)
}
