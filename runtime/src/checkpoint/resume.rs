//! Restarting from a checkpoint: find the newest complete one, check it against this run, put
//! each process's state back.
//!
//! ```text
//! process 0   lists the folder's complete checkpoints, newest first
//! sync 1      (the program's registrations take effect; everyone sees the list)
//! round r     each process reads and checks its part of candidate r: a part that is missing,
//!             truncated or corrupted is a verdict (the run falls back to candidate r+1); a
//!             checkpoint that cannot be this run's (another p, program, registration or state
//!             type) is an error at once
//! sync        everyone reads every verdict of round r: all good -> restore, else next round
//! restore     areas copied in; the saved tag size set, a sync; each saved message sent again
//!             by its sender, a sync (the queue is as it was); the superstep count set
//! ```

use super::files;
use super::format::{Manifest, Msg, Part};
use super::words;
use super::{Checkpointer, RELAXED, Verdict, lock};
use crate::ctx::Ctx;
use crate::engine::state::Kind;
use crate::error::{ErrorKind, Result};
use crate::flags::FLAG_COMM;
use crate::registry::SlotState;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a candidate's part cannot be restored.
enum Unusable {
    /// Missing, truncated, corrupted: try the previous checkpoint.
    Damaged(String),
    /// Not this run's checkpoint: the restart is a misuse.
    Foreign(String),
}

impl Ctx {
    /// Restart from the newest complete checkpoint of the run's folder, if there is one:
    /// `Ok(Some(state))` with the registered areas, message queue, tag size and superstep
    /// count as they were at the checkpoint ([`Ctx::sync_checkpoint`]); `Ok(None)` in a fresh
    /// run (no checkpoint, or no policy). Collective, once per run: call it after the program's
    /// registrations (the same ones, in the same order, as the checkpointed run made) and
    /// before any communication.
    ///
    /// A checkpoint that is damaged (a truncated or corrupted part, a missing one) is skipped
    /// for the previous complete one, with a line on stderr; a checkpoint that cannot be this
    /// run's is an error naming the file and the difference: another number of processes,
    /// another program, other registrations, another state type.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("mbsp-doc-resume-{}", std::process::id()));
    /// let policy = mbsp::Checkpoints::in_folder(&dir);
    /// // A run that checkpoints at superstep 3, then fails.
    /// let err = mbsp::Run::new(2).checkpoints(policy.clone()).run(|ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as u32; 3])?;
    ///     ctx.sync()?;
    ///     assert!(ctx.resume::<String>()?.is_none());
    ///     ctx.checkpoint(&format!("pid {} was here", ctx.pid()))?;
    ///     Err::<(), _>(ctx.abort("killed"))
    /// }).unwrap_err();
    /// assert_eq!(err.message(), "killed");
    /// // The next run resumes there.
    /// let back = mbsp::Run::new(2).checkpoints(policy).run(|ctx| {
    ///     let x = ctx.push_reg(vec![0u32; 3])?;
    ///     ctx.sync()?;
    ///     let said: String = ctx.resume()?.expect("a checkpoint");
    ///     Ok((said, ctx.local(&x)?.to_vec(), ctx.superstep()))
    /// })?;
    /// assert_eq!(back[1], ("pid 1 was here".to_string(), vec![1, 1, 1], 3));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn resume<S: DeserializeOwned>(&mut self) -> Result<Option<S>> {
        self.live("resume")?;
        if self.path.len() > 1 {
            return Err(self.misuse(
                "resume",
                "a nested run cannot resume: checkpoints belong to the top-level run".into(),
            ));
        }
        let Some(ck) = self.run.ckpt.clone() else {
            return Ok(None);
        };
        self.check_resume_first(&ck)?;
        let candidates = self.candidates(&ck)?;
        let mut damaged = Vec::new();
        for (round, dir) in candidates.iter().enumerate() {
            let mine = self.read_part::<S>(dir);
            let verdicts = self.share_verdict(&ck, round, &mine)?;
            if let Some(why) = verdicts.iter().find_map(|v| match v {
                Verdict::Foreign(why) => Some(why.clone()),
                _ => None,
            }) {
                return Err(self.misuse("resume", why));
            }
            let problems: Vec<String> = verdicts
                .iter()
                .filter_map(|v| match v {
                    Verdict::Damaged(why) => Some(why.clone()),
                    _ => None,
                })
                .collect();
            match mine {
                Ok(part) if problems.is_empty() => {
                    let queues: Vec<Vec<Msg>> = verdicts
                        .into_iter()
                        .map(|v| match v {
                            Verdict::Usable(queue) => queue,
                            _ => Vec::new(),
                        })
                        .collect();
                    if self.pid == 0 {
                        set_aside(&candidates[..round]);
                    }
                    return self.restore(&ck, part, &queues).map(Some);
                }
                _ => {
                    if self.pid == 0 {
                        eprintln!(
                            "mbsp: checkpoint {} is not usable ({}); trying an older one",
                            dir.display(),
                            problems.join("; ")
                        );
                    }
                    damaged.push(format!("{}: {}", dir.display(), problems.join("; ")));
                }
            }
        }
        if damaged.is_empty() {
            return Ok(None);
        }
        let e = self.error(
            ErrorKind::System,
            "resume",
            format!(
                "no usable checkpoint in {}: {}",
                ck.policy.dir.display(),
                damaged.join("; ")
            ),
        );
        Err(self.fail_with(e))
    }

    /// Whether this run has a checkpoint policy ([`Run::checkpoints`](crate::Run::checkpoints)
    /// or the environment): its `sync_checkpoint` may checkpoint and its `resume` may find
    /// something.
    pub fn checkpointing(&self) -> bool {
        self.run.ckpt.is_some()
    }

    /// The newest complete checkpoint in the run's folder whose manifest reads (what
    /// [`Ctx::resume`] tries first), without checking its parts; `None` without a policy, in a nested
    /// run or when the folder has none. Not collective (every process reads the folder).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("mbsp-doc-newest-{}", std::process::id()));
    /// let policy = mbsp::Checkpoints::in_folder(&dir);
    /// mbsp::Run::new(2).checkpoints(policy.clone()).run(|ctx| {
    ///     assert_eq!(ctx.newest_checkpoint()?, None);
    ///     let _x = ctx.push_reg(vec![0u8; 4])?;
    ///     ctx.sync()?;
    ///     ctx.checkpoint(&())
    /// })?;
    /// let found = mbsp::Run::new(2).checkpoints(policy).run(|ctx| ctx.newest_checkpoint())?;
    /// let info = found[0].clone().unwrap();
    /// assert_eq!((info.superstep, info.processes, info.registrations), (2, 2, 1));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn newest_checkpoint(&self) -> Result<Option<super::CheckpointInfo>> {
        self.live("newest_checkpoint")?;
        let Some(ck) = self.run.ckpt.as_ref().filter(|_| self.path.len() == 1) else {
            return Ok(None);
        };
        let found = complete_checkpoints(&ck.policy.dir)
            .map_err(|e| self.fail_with(self.error(ErrorKind::System, "newest_checkpoint", e)))?;
        // The newest whose manifest reads (a damaged one `resume` would go past too).
        let Some((dir, manifest)) = found.into_iter().find_map(|(_, dir)| {
            let text = std::fs::read_to_string(dir.join(files::MANIFEST)).ok()?;
            Manifest::decode(&text).ok().map(|m| (dir, m))
        }) else {
            return Ok(None);
        };
        Ok(Some(super::CheckpointInfo {
            folder: dir,
            superstep: manifest.superstep,
            processes: manifest.p,
            registrations: manifest.areas,
            program: manifest.program,
        }))
    }

    /// The complete checkpoints process 0 found, newest first, as every process learns them:
    /// after a sync (through the run state on threads, an all-gather over ranks), which also
    /// makes the program's registrations take effect.
    fn candidates(&mut self, ck: &Checkpointer) -> Result<Vec<PathBuf>> {
        let listed = (self.pid == 0).then(|| complete_checkpoints(&ck.policy.dir));
        let listed = if matches!(self.engine.kind(), Kind::Threads) {
            if let Some(listed) = listed {
                lock(&ck.resume).candidates = Some(listed);
            }
            self.sync_step()?;
            lock(&ck.resume)
                .candidates
                .clone()
                .unwrap_or(Ok(Vec::new()))
        } else {
            self.sync_step()?;
            let mine = match &listed {
                Some(Ok(found)) => std::iter::once(0)
                    .chain(found.iter().map(|f| f.0))
                    .collect(),
                Some(Err(why)) => {
                    let mut w = vec![1];
                    words::put(&mut w, why.as_bytes());
                    w
                }
                None => Vec::new(),
            };
            let all = self.engine_all_gather(&mine).expect("ranks gather");
            match all[0].split_first() {
                Some((0, seqs)) => Ok(seqs
                    .iter()
                    .map(|&seq| (seq, files::checkpoint_dir(&ck.policy.dir, seq)))
                    .collect()),
                _ => {
                    let mut at = 1;
                    Err(String::from_utf8_lossy(&words::take(&all[0], &mut at)).into_owned())
                }
            }
        };
        let listed =
            listed.map_err(|e| self.fail_with(self.error(ErrorKind::System, "resume", e)))?;
        Ok(listed.into_iter().map(|(_, dir)| dir).collect())
    }

    /// Tell the others what this process found of its part of candidate `round`, and learn
    /// what they found (through the run state and a sync on threads, an all-gather over
    /// ranks): every process's verdict, in pid order.
    fn share_verdict(
        &mut self,
        ck: &Checkpointer,
        round: usize,
        mine: &std::result::Result<Part<'static>, Unusable>,
    ) -> Result<Vec<Verdict>> {
        let verdict = match mine {
            Ok(part) => Verdict::Usable(part.queue.clone()),
            Err(Unusable::Damaged(why)) => Verdict::Damaged(why.clone()),
            Err(Unusable::Foreign(why)) => Verdict::Foreign(why.clone()),
        };
        if !matches!(self.engine.kind(), Kind::Threads) {
            let all = self
                .engine_all_gather(&verdict.words())
                .expect("ranks gather");
            return Ok(all.iter().map(|w| Verdict::read(w)).collect());
        }
        {
            let mut shared = lock(&ck.resume);
            if shared.verdicts.len() <= round {
                let p = self.run.p;
                shared.verdicts.resize_with(round + 1, || vec![None; p]);
            }
            shared.verdicts[round][self.pid] = Some(verdict);
        }
        self.sync_step()?;
        let verdicts = lock(&ck.resume).verdicts[round].clone();
        Ok(verdicts
            .into_iter()
            .map(|v| v.unwrap_or(Verdict::Damaged("no verdict".into())))
            .collect())
    }

    /// `resume` is called once, before any communication of the run.
    fn check_resume_first(&self, ck: &Checkpointer) -> Result<()> {
        if ck.resumed[self.pid].swap(true, RELAXED) {
            return Err(self.misuse(
                "resume",
                "called a second time in this run: a run resumes once, at its start".into(),
            ));
        }
        let queued = self.st.borrow().queue.left;
        if self.flags.get() & FLAG_COMM != 0 || queued > 0 || !self.st.borrow().gets.is_empty() {
            return Err(self.misuse(
                "resume",
                format!(
                    "called after this run communicated ({queued} message(s) queued, or puts, \
                     gets or sends in this superstep): call it after the registrations and \
                     before any communication"
                ),
            ));
        }
        Ok(())
    }

    /// Read and check this process's part of the checkpoint in `dir`.
    fn read_part<S>(&self, dir: &Path) -> std::result::Result<Part<'static>, Unusable> {
        let manifest_path = dir.join(files::MANIFEST);
        let text = std::fs::read_to_string(&manifest_path)
            .map_err(|e| Unusable::Damaged(format!("{}: {e}", manifest_path.display())))?;
        let manifest = Manifest::decode(&text)
            .map_err(|e| Unusable::Damaged(format!("{}: {e}", manifest_path.display())))?;
        let foreign = |what: String| Unusable::Foreign(format!("{}: {what}", dir.display()));
        if manifest.p != self.run.p {
            return Err(foreign(format!(
                "written by a run of {} processes; this run has {} (a restart needs the same \
                 number)",
                manifest.p, self.run.p
            )));
        }
        let program = Checkpointer::program();
        if manifest.program != program {
            return Err(foreign(format!(
                "written by program {:?}; this is {program:?}",
                manifest.program
            )));
        }
        let want_type = super::state_type::<S>();
        if manifest.state_type != want_type {
            return Err(foreign(format!(
                "its state is a {}; resume asked for a {want_type}",
                manifest.state_type
            )));
        }
        let path = dir.join(files::part_name(self.pid));
        let damaged = |what: String| Unusable::Damaged(format!("{}: {what}", path.display()));
        let bytes = std::fs::read(&path).map_err(|e| damaged(e.to_string()))?;
        let (len, crc) = manifest.parts[self.pid];
        if bytes.len() as u64 != len {
            return Err(damaged(format!(
                "{} bytes; the manifest says {len}",
                bytes.len()
            )));
        }
        if crc32fast::hash(&bytes) != crc {
            return Err(damaged(format!(
                "its CRC-32 is not the manifest's {crc:08x}: the file is corrupted"
            )));
        }
        let part = Part::decode(&bytes).map_err(damaged)?;
        if part.pid as usize != self.pid || part.p as usize != self.run.p {
            return Err(damaged(format!(
                "the part of pid {} of {}, not of pid {}",
                part.pid, part.p, self.pid
            )));
        }
        self.check_areas(&part)
            .map_err(|why| Unusable::Foreign(format!("{}: {why}", path.display())))?;
        Ok(part)
    }

    /// The saved registrations are this process's, slot by slot in push order.
    fn check_areas(&self, part: &Part) -> std::result::Result<(), String> {
        // SAFETY: this process's own table, outside a sync.
        unsafe {
            self.me().table(|t| {
                if t.order.len() != part.areas.len() {
                    return Err(format!(
                        "the checkpointed process had {} registrations; this one has {} \
                         (register the same areas, in the same order, before resume)",
                        part.areas.len(),
                        t.order.len()
                    ));
                }
                for (i, (&slot, saved)) in t.order.iter().zip(&part.areas).enumerate() {
                    let e = t.entry(slot);
                    let ty = t.type_name(slot);
                    let null = e.state == SlotState::Empty;
                    let len = if null { 0 } else { e.len };
                    if slot != saved.slot
                        || null != saved.null
                        || ty != saved.ty
                        || len != saved.bytes.len()
                    {
                        let show = |null: bool, ty: &str, len: usize| {
                            if null {
                                "a null registration".to_string()
                            } else {
                                format!("{len} bytes of {ty}")
                            }
                        };
                        return Err(format!(
                            "registration {i} (in push order) was {} at the checkpoint; it is \
                             {} now",
                            show(saved.null, &saved.ty, saved.bytes.len()),
                            show(null, ty, len)
                        ));
                    }
                }
                Ok(())
            })
        }
    }

    /// Put `part` back: areas, tag size, queue (`queues`: every process's saved queue), the
    /// superstep count; the state.
    fn restore<S: DeserializeOwned>(
        &mut self,
        ck: &Arc<Checkpointer>,
        part: Part<'static>,
        queues: &[Vec<Msg>],
    ) -> Result<S> {
        // SAFETY: this process's own table, outside a sync; the areas checked above.
        unsafe {
            self.me().table(|t| {
                for (&slot, saved) in t.order.iter().zip(&part.areas) {
                    let e = t.entry(slot);
                    if e.state == SlotState::Active && !saved.bytes.is_empty() {
                        // SAFETY: this process's registered area of that length (checked), which
                        // nothing else writes outside a sync and the program cannot view while
                        // this method holds `&mut self`.
                        std::ptr::copy_nonoverlapping(saved.bytes.as_ptr(), e.ptr, e.len);
                    }
                }
            })
        };
        // The saved messages are sent again with the tag size they were sent with, in a
        // superstep that also sets the tag size in force at the checkpoint (which a
        // `set_tagsize` in the checkpoint's superstep made differ from the queue's).
        let size = |t: u64| usize::try_from(t).unwrap_or(usize::MAX);
        let (in_force, queued) = (size(part.tagsize), size(part.queue_tagsize));
        let resend = queues.iter().any(|q| !q.is_empty());
        if resend && queued != self.tagsize.get() {
            self.set_tagsize(queued)?;
            self.sync_step()?;
        }
        if in_force != self.tagsize.get() {
            self.set_tagsize(in_force)?;
        }
        for (to, queue) in queues.iter().enumerate() {
            for m in queue.iter().filter(|m| m.from as usize == self.pid) {
                self.send(to, &m.tag, &m.payload)?;
            }
        }
        // Always a sync after the areas are copied in: before it, another process that
        // finished its restore could `hpget` from or `hpput` into an area not restored yet.
        self.sync_step()?;
        self.step_offset = part.superstep.wrapping_sub(self.step);
        *lock(&ck.last) = std::time::Instant::now();
        postcard::from_bytes(&part.state).map_err(|e| {
            self.misuse(
                "resume",
                format!(
                    "the saved state could not be read as a {}: {e}",
                    std::any::type_name::<S>()
                ),
            )
        })
    }
}

/// Rename the damaged checkpoints a restart went past to `<folder>.damaged`: kept for a look,
/// no longer counted among the complete ones the run keeps (`keep`), never tried again.
fn set_aside(damaged: &[PathBuf]) {
    for dir in damaged {
        let mut to = dir.clone().into_os_string();
        to.push(".damaged");
        match std::fs::rename(dir, &to) {
            Ok(()) => eprintln!(
                "mbsp: checkpoint {} set aside as {}",
                dir.display(),
                PathBuf::from(&to).display()
            ),
            Err(e) => eprintln!("mbsp: could not set aside {}: {e}", dir.display()),
        }
    }
}

/// The complete checkpoints of `root`, newest first (or why the folder cannot be read).
fn complete_checkpoints(root: &Path) -> std::result::Result<Vec<(u64, PathBuf)>, String> {
    let found = files::list(root)
        .map_err(|e| format!("cannot read the checkpoint folder {}: {e}", root.display()))?;
    Ok(found
        .into_iter()
        .filter(|(_, _, complete)| *complete)
        .map(|(seq, path, _)| (seq, path))
        .collect())
}
