//! The largest sizes the runtime accepts: tag size, message payload.
//!
//! Every size a caller hands to the runtime is checked against these limits (with arithmetic
//! that cannot overflow) before anything is allocated or copied; a size beyond them is a misuse
//! error naming the primitive and the value. A size within them that the machine cannot
//! allocate room for is an error too (kind [`System`](crate::ErrorKind::System)), never an
//! allocator abort.

use crate::ctx::Ctx;
use crate::error::{Error, ErrorKind};

/// The largest tag size, in bytes: 2^20 (1 MiB). A tag is a header copied with every message
/// (and kept beside every message in the receiver's queue), so it is meant to be small — an
/// index, a few numbers; larger data belongs in the payload.
///
/// ```
/// let e = mbsp::run(1, |ctx| ctx.set_tagsize(mbsp::MAX_TAGSIZE + 1).map(drop)).unwrap_err();
/// assert_eq!(e.op(), "set_tagsize");
/// assert!(e.message().contains("1048577 bytes"), "{e}");
/// ```
pub const MAX_TAGSIZE: usize = 1 << 20;

/// The largest message payload, in bytes: 2^47 (128 TiB, the user address space of x86-64 with
/// 4-level page tables), on 64-bit machines. [`Ctx::send`](crate::Ctx::send) and the other
/// sends refuse a larger payload; one within the limit that cannot be allocated ends the run
/// with an error of kind [`System`](crate::ErrorKind::System).
pub const MAX_MESSAGE: usize = if usize::BITS >= 64 {
    1 << 47
} else {
    isize::MAX as usize / 2
};

impl Ctx {
    /// Record that memory for `op` could not be allocated as the run's failure (kind
    /// [`System`](ErrorKind::System)) and return it.
    #[cold]
    #[inline(never)]
    pub(crate) fn out_of_memory(&self, op: &'static str, msg: String) -> Error {
        self.fail_with(self.error(ErrorKind::System, op, msg))
    }
}
