//! One run over ranks at a time in a program: the claim a run holds while it goes on.

use crate::error::{Error, ErrorKind, Result};
use std::sync::atomic::{AtomicBool, Ordering};

/// A run over ranks is going on in this program (a second one is refused).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// This program's run over ranks, claimed while alive.
pub(super) struct Active(());

impl Active {
    /// Claim the program's run over ranks, or refuse (`op`) if one is going on.
    pub(super) fn claim(op: &'static str) -> Result<Active> {
        ACTIVE
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Active(()))
            .map_err(|_| {
                Error::outside(
                    ErrorKind::Misuse,
                    op,
                    "a run over MPI ranks is already going on in this program (one at a time: \
                     start thread runs inside it with Ctx::run, or wait for it to end)",
                )
            })
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        ACTIVE.store(false, Ordering::Release);
    }
}
