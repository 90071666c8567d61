//! What the C interface needs of MPI itself, beyond the runtime's runs over ranks: BSPlib's
//! convention that the process count of the top-level `bsp_begin` is rank 0's (the other
//! ranks enter the SPMD function from `bsp_init` without running main's sequential part,
//! where the count is usually read).

/// Rank 0's `p`, on every rank. Collective over all ranks: called by each at its top-level
/// `bsp_begin`, only when the program runs over MPI ranks (MPI is then initialised).
#[cfg(feature = "mpi")]
pub(crate) fn root_procs(p: i64) -> i64 {
    use mpi::topology::{Communicator, SimpleCommunicator};
    use mpi::traits::Root;
    let mut root = p;
    SimpleCommunicator::world()
        .process_at_rank(0)
        .broadcast_into(&mut root);
    root
}

/// Without MPI there are no ranks: never called.
#[cfg(not(feature = "mpi"))]
pub(crate) fn root_procs(p: i64) -> i64 {
    p
}
