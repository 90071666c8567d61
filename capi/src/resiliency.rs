//! Checkpointing (mcbsp-resiliency.h), on the runtime's checkpoints (`Ctx::sync_checkpoint`).
//!
//! A C run checkpoints when `MBSP_CHECKPOINT_DIR` names a folder (the runtime reads it at
//! `bsp_begin`, with `MBSP_CHECKPOINT_EVERY`, `_SECONDS` and `_KEEP`). Then every `bsp_sync`
//! of the top level is a `sync_checkpoint`: a checkpoint is taken at `mcbsp_checkpoint`, every
//! `mcbsp_get_checkpoint_frequency()` syncs while automatic checkpoints are enabled, or as the
//! environment says. What is saved is what the library sees (registered areas, the message
//! queue and tag size, the superstep count) and the areas the program adds with
//! `mbsp_checkpoint_area`.
//!
//! A C program restarts from `main`, so the restore cannot happen where the checkpoint was
//! taken: it happens at the first `bsp_sync` after which the processes have as many
//! registrations as the checkpointed ones had (the manifest says how many) — the sync that
//! completes the program's registrations. There the registered areas, the queue, the tag size
//! and the superstep count come back, and the areas given to `mbsp_checkpoint_area` before that
//! sync are filled in the order they were given. `mbsp_restored()` tells the program, from
//! `bsp_begin` on, whether this happens (or happened). A program that keeps all of its state in
//! registered memory (its loop counter included) and sets its initial values before that sync
//! restarts with no other change.

use mbsp_rt::{Ctx, Result};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The automatic checkpoint frequency (in syncs) used unless set (MulticoreBSP's global; 0).
#[unsafe(no_mangle)]
pub static MCBSP_DEFAULT_CHECKPOINT_FREQUENCY: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone, Copy)]
struct Settings {
    enabled: bool,
    frequency: Option<usize>,
    safe_frequency: Option<usize>,
}

static SETTINGS: Mutex<Settings> = Mutex::new(Settings {
    enabled: true,
    frequency: None,
    safe_frequency: None,
});

fn with<R>(f: impl FnOnce(&mut Settings) -> R) -> R {
    f(&mut SETTINGS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// One process's checkpointing in a C run (kept in its frame).
#[derive(Default)]
pub(crate) struct CState {
    /// The program's own areas (`mbsp_checkpoint_area`), in the order given.
    areas: Vec<(usize, usize)>,
    /// Whether the folder was looked at (at the first sync or `mbsp_restored`).
    looked: bool,
    /// A restore to make: the registrations the checkpoint's processes had.
    pending: Option<usize>,
    /// This run was restored from a checkpoint.
    restored: bool,
}

/// The program's own areas: written from the program's memory, read back as bytes (one type,
/// so that the checkpoint's state type is the same both ways).
#[derive(Default)]
struct OwnAreas {
    from: Vec<(usize, usize)>,
    read: Vec<Vec<u8>>,
}

/// One area as serde bytes (postcard writes its length and then the bytes as they are).
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

impl Serialize for OwnAreas {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.from.len()))?;
        for &(ptr, len) in &self.from {
            // SAFETY: the program gave this area (`mbsp_checkpoint_area`) and keeps it valid
            // while the run lasts; it is read during a sync, when the program does not run.
            let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
            seq.serialize_element(&Bytes(bytes))?;
        }
        seq.end()
    }
}

/// Reads one area's bytes.
struct ByteVisitor;

impl serde::de::Visitor<'_> for ByteVisitor {
    type Value = Vec<u8>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the bytes of an area")
    }
    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> std::result::Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }
}

/// One area read back.
struct ByteBuf(Vec<u8>);

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_bytes(ByteVisitor).map(ByteBuf)
    }
}

impl<'de> Deserialize<'de> for OwnAreas {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let read: Vec<ByteBuf> = Vec::deserialize(d)?;
        Ok(OwnAreas {
            from: Vec::new(),
            read: read.into_iter().map(|b| b.0).collect(),
        })
    }
}

/// `bsp_sync` of a run that checkpoints (`ctx.checkpointing()`): restore when the
/// registrations are complete, else a `sync_checkpoint` with the program's own areas.
pub(crate) fn sync(ctx: &mut Ctx, state: &mut CState) -> Result<()> {
    look(ctx, state)?;
    if let Some(registrations) = state.pending {
        ctx.sync()?;
        let now = ctx.registrations();
        if now == registrations {
            restore(ctx, state)?;
        } else if now > registrations {
            return Err(ctx.misuse_error(
                "bsp_sync",
                format!(
                    "the checkpoint to restore was taken with {registrations} registration(s) \
                     per process; this run has {now} after this sync and has not been restored \
                     (the restore happens at the sync that completes the same registrations)"
                ),
            ));
        }
        return Ok(());
    }
    let (enabled, frequency) = with(|c| (c.enabled, c.frequency));
    let frequency =
        frequency.unwrap_or_else(|| MCBSP_DEFAULT_CHECKPOINT_FREQUENCY.load(Ordering::Relaxed));
    // The superstep this sync ends is the `frequency`-th, 2·`frequency`-th ... one.
    if enabled && frequency > 0 && (ctx.superstep() + 1) % frequency as u64 == 0 {
        ctx.request_checkpoint();
    }
    ctx.sync_checkpoint(&OwnAreas {
        from: state.areas.clone(),
        read: Vec::new(),
    })
}

/// Look for a checkpoint to restore, once per run (every process reads the folder).
fn look(ctx: &Ctx, state: &mut CState) -> Result<()> {
    if !state.looked {
        state.looked = true;
        if ctx.path().len() == 1 {
            state.pending = ctx.newest_checkpoint()?.map(|c| c.registrations);
        }
    }
    Ok(())
}

/// The sync completing the registrations: put the checkpoint back, own areas included.
fn restore(ctx: &mut Ctx, state: &mut CState) -> Result<()> {
    state.pending = None;
    let Some(saved) = ctx.resume::<OwnAreas>()? else {
        return Ok(());
    };
    if saved.read.len() != state.areas.len() {
        return Err(ctx.misuse_error(
            "mbsp_checkpoint_area",
            format!(
                "the checkpoint holds {} area(s) given to mbsp_checkpoint_area; this run gave {} \
                 before the sync that completed its registrations",
                saved.read.len(),
                state.areas.len()
            ),
        ));
    }
    for (i, (bytes, &(ptr, len))) in saved.read.iter().zip(&state.areas).enumerate() {
        if bytes.len() != len {
            return Err(ctx.misuse_error(
                "mbsp_checkpoint_area",
                format!(
                    "area {i} has {len} bytes; the checkpoint saved {} bytes for it",
                    bytes.len()
                ),
            ));
        }
        // SAFETY: the program's area of `len` bytes (`mbsp_checkpoint_area`), not read by the
        // program during this call.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr as *mut u8, len) };
    }
    state.restored = true;
    Ok(())
}

/// The calling process's checkpointing state and context (innermost run).
fn with_state<R>(op: &str, f: impl FnOnce(&mut Ctx, &mut CState) -> Result<R>) -> R {
    let state = crate::state::FRAMES.with(|frames| {
        frames
            .borrow_mut()
            .last_mut()
            .map(|frame| std::mem::take(&mut frame.ckpt))
    });
    let mut state = state.unwrap_or_default();
    let r = crate::state::with_ctx(op, |ctx| f(ctx, &mut state));
    crate::state::FRAMES.with(|frames| {
        if let Some(frame) = frames.borrow_mut().last_mut() {
            frame.ckpt = state;
        }
    });
    r
}

/// `bsp_sync` of a run with a checkpoint policy (see the module docs).
pub(crate) fn bsp_sync_checkpointing() {
    with_state("bsp_sync", sync);
}

/// Print, once per program, that checkpoints need a folder.
fn warn_no_folder(what: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "mbsp: warning: {what}: no checkpoint is written: set MBSP_CHECKPOINT_DIR to the \
             folder checkpoints go to (the program runs on)"
        );
    }
}

/// A checkpoint at this sync (collective: a `bsp_sync` that checkpoints).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_checkpoint() {
    let checkpointing = crate::state::with_ctx("mcbsp_checkpoint", |c| {
        c.request_checkpoint();
        Ok(c.checkpointing())
    });
    if !checkpointing {
        warn_no_folder("mcbsp_checkpoint");
    }
    crate::spmd::bsp_sync()
}

/// Enable automatic checkpoints (every `mcbsp_get_checkpoint_frequency()` syncs).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_enable_checkpoints() {
    with(|c| c.enabled = true);
}

/// Disable automatic checkpoints (`mcbsp_checkpoint` still takes one).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_disable_checkpoints() {
    with(|c| c.enabled = false);
}

/// Set the automatic checkpoint frequency in syncs (0: none).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_checkpoint_frequency(frequency: usize) {
    if frequency > 0 && std::env::var_os(mbsp_rt::CHECKPOINT_ENV[0]).is_none() {
        warn_no_folder("mcbsp_set_checkpoint_frequency");
    }
    with(|c| c.frequency = Some(frequency));
}

/// The frequency set, else `MCBSP_DEFAULT_CHECKPOINT_FREQUENCY`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_checkpoint_frequency() -> usize {
    with(|c| c.frequency)
        .unwrap_or_else(|| MCBSP_DEFAULT_CHECKPOINT_FREQUENCY.load(Ordering::Relaxed))
}

/// Set the frequency used when hardware failure is imminent (recorded and returned; mbsp does
/// not watch for imminent failures).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_safe_checkpoint_frequency(frequency: usize) {
    with(|c| c.safe_frequency = Some(frequency));
}

/// The safe frequency set, else the checkpoint frequency.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_safe_checkpoint_frequency() -> usize {
    with(|c| c.safe_frequency).unwrap_or_else(|| mcbsp_get_checkpoint_frequency())
}

/// Add `bytes` at `area` to what this process's checkpoints save (an mbsp extension): the
/// program's own variables that are not registered. In a restored run, areas given before the
/// sync that completes the registrations are filled from the checkpoint there, in the order
/// given.
///
/// # Safety
/// `area` is valid for reads and writes of `bytes` bytes for the rest of the run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mbsp_checkpoint_area(area: *mut std::ffi::c_void, bytes: usize) {
    with_state("mbsp_checkpoint_area", |ctx, state| {
        if area.is_null() && bytes > 0 {
            return Err(ctx.misuse_error(
                "mbsp_checkpoint_area",
                format!("a null area of {bytes} bytes"),
            ));
        }
        state.areas.push((area as usize, bytes));
        Ok(())
    })
}

/// Whether this run resumes from a checkpoint (an mbsp extension): 1 from `bsp_begin` on when
/// the checkpoint folder has a complete checkpoint, which the sync that completes the
/// registrations restores; 0 otherwise.
#[unsafe(no_mangle)]
pub extern "C" fn mbsp_restored() -> std::ffi::c_int {
    with_state("mbsp_restored", |ctx, state| {
        if !ctx.checkpointing() {
            return Ok(0);
        }
        look(ctx, state)?;
        Ok(std::ffi::c_int::from(
            state.restored || state.pending.is_some(),
        ))
    })
}
