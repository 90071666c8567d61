//! The machine's state over one benchmark ([`mbsp_tools::machine_state`]): other processes'
//! CPU time, stolen time, the clock, and a cache line's round trip between two CPUs probed at
//! the start, at the end of every round of the benchmarks that take their figures in rounds,
//! and at the end. `main` prints it on stderr after the benchmark (every one but `mpi`, whose
//! ranks would each watch their own machine), so that every table says whether its machine
//! was quiet, busy or unsteady, whatever its format.

use mbsp_tools::machine_state::{MachineState, Watch};
use std::sync::Mutex;

static WATCH: Mutex<Option<Watch>> = Mutex::new(None);

/// Starts watching (a probe).
pub(crate) fn start() {
    *WATCH.lock().unwrap_or_else(|e| e.into_inner()) = Some(Watch::start());
}

/// Ends a round: call it between rounds, while no run of the benchmark is going (the probe
/// spins two threads for a millisecond or two). Nothing when not watching.
pub(crate) fn mark() {
    if let Some(w) = WATCH.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        w.mark();
    }
}

/// Ends the watch (a last probe) and returns the state.
pub(crate) fn finish() -> Option<MachineState> {
    let mut w = WATCH.lock().unwrap_or_else(|e| e.into_inner()).take()?;
    w.mark();
    Some(w.state())
}
