//! Checkpointing (mcbsp-resiliency.h). MulticoreBSP checkpoints through DMTCP when built with
//! it; mbsp has no checkpointing. The settings are stored and returned by the getters; the
//! first call that asks for a checkpoint or enables them prints one warning line on stderr;
//! `mcbsp_checkpoint` synchronises like `bsp_sync` (MulticoreBSP's checkpoint is a
//! synchronisation) without writing a checkpoint.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The automatic checkpoint frequency (in syncs) used unless set (MulticoreBSP's global; 0).
#[unsafe(no_mangle)]
pub static MCBSP_DEFAULT_CHECKPOINT_FREQUENCY: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone, Copy)]
struct Checkpoints {
    enabled: bool,
    frequency: Option<usize>,
    safe_frequency: Option<usize>,
}

static STATE: Mutex<Checkpoints> = Mutex::new(Checkpoints {
    enabled: true,
    frequency: None,
    safe_frequency: None,
});

fn with<R>(f: impl FnOnce(&mut Checkpoints) -> R) -> R {
    f(&mut STATE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Print the warning that checkpointing is not supported, once per program.
fn warn(what: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "mbsp: warning: {what}: checkpointing is not supported (no checkpoint is written; \
             the program runs on)"
        );
    }
}

/// A global checkpoint in MulticoreBSP with DMTCP; in mbsp a `bsp_sync` (and a warning).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_checkpoint() {
    crate::state::with_ctx("mcbsp_checkpoint", |_| Ok(()));
    warn("mcbsp_checkpoint");
    crate::spmd::bsp_sync()
}

/// Enable automatic checkpoints (recorded; none are written).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_enable_checkpoints() {
    warn("mcbsp_enable_checkpoints");
    with(|c| c.enabled = true);
}

/// Disable automatic checkpoints (recorded).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_disable_checkpoints() {
    with(|c| c.enabled = false);
}

/// Set the automatic checkpoint frequency (recorded and returned; none are written).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_checkpoint_frequency(frequency: usize) {
    if frequency > 0 {
        warn("mcbsp_set_checkpoint_frequency");
    }
    with(|c| c.frequency = Some(frequency));
}

/// The frequency set, else `MCBSP_DEFAULT_CHECKPOINT_FREQUENCY`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_checkpoint_frequency() -> usize {
    with(|c| c.frequency)
        .unwrap_or_else(|| MCBSP_DEFAULT_CHECKPOINT_FREQUENCY.load(Ordering::Relaxed))
}

/// Set the frequency used when hardware failure is imminent (recorded and returned).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_safe_checkpoint_frequency(frequency: usize) {
    with(|c| c.safe_frequency = Some(frequency));
}

/// The safe frequency set, else the checkpoint frequency.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_safe_checkpoint_frequency() -> usize {
    with(|c| c.safe_frequency).unwrap_or_else(|| mcbsp_get_checkpoint_frequency())
}
