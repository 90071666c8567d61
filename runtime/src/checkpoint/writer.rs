//! Writing a checkpoint's files: each process's part, then the manifest once every part is
//! reported, by process 0 (in the foreground) or by the writer thread that reports the last
//! part (in the background: each process hands copies of its parts to a writer thread of its
//! own and goes on computing).

use super::format::{Job, Manifest, Meta, Part, Report};
use super::{Checkpointer, Writer, files, lock};
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Instant;

impl Checkpointer {
    /// Write `part` as process `pid`'s part of checkpoint `meta.seq`: its length and CRC-32,
    /// or why it could not be written.
    pub(super) fn write_file(&self, meta: &Meta, pid: usize, part: &Part<'_>) -> Report {
        let dir = files::checkpoint_dir(&self.policy.dir, meta.seq);
        let path = dir.join(files::part_name(pid));
        // The checkpoint's folder is synced into the run's folder before its files go in.
        std::fs::create_dir_all(&dir)
            .and_then(|()| files::sync_dir(&self.policy.dir))
            .and_then(|()| files::write_atomic_with(&path, |w| part.encode_to(w)))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Write `part` as process `pid`'s part of checkpoint `meta.seq` and report it to the
    /// others in this address space; whether it was the last of the checkpoint's parts.
    pub(super) fn write_part(&self, meta: &Meta, pid: usize, part: &Part<'_>) -> bool {
        let written = self.write_file(meta, pid, part);
        let mut progress = lock(&self.progress);
        let parts = progress
            .entry(meta.seq)
            .or_insert_with(|| vec![None; meta.p]);
        parts[pid] = Some(written);
        let all = parts.iter().all(Option::is_some);
        drop(progress);
        all
    }

    /// Every part of checkpoint `meta.seq` is reported: write its manifest and prune the
    /// folder, or (a part failed) remove the checkpoint; the message of a checkpoint that was
    /// not written.
    pub(super) fn seal(&self, meta: &Meta) -> std::result::Result<(), String> {
        let parts: std::result::Result<Vec<(u64, u32)>, String> = lock(&self.progress)
            .remove(&meta.seq)
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .collect();
        self.seal_with(meta, parts)
    }

    /// [`seal`](Self::seal) with the parts' reports gathered otherwise (over ranks).
    pub(super) fn seal_with(
        &self,
        meta: &Meta,
        parts: std::result::Result<Vec<(u64, u32)>, String>,
    ) -> std::result::Result<(), String> {
        let dir = files::checkpoint_dir(&self.policy.dir, meta.seq);
        let outcome = parts.and_then(|parts| {
            let manifest = Manifest {
                program: Checkpointer::program(),
                p: meta.p,
                superstep: meta.superstep,
                state_type: meta.state_type.clone(),
                areas: meta.areas,
                parts,
            };
            let path = dir.join(files::MANIFEST);
            files::write_atomic(&path, manifest.encode().as_bytes())
                .map_err(|e| format!("{}: {e}", path.display()))
        });
        *lock(&self.last) = Instant::now();
        match outcome {
            Ok(()) => {
                for problem in files::prune(&self.policy.dir, self.policy.keep) {
                    eprintln!("mbsp: checkpoints: {problem}");
                }
                Ok(())
            }
            Err(why) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(format!(
                    "the checkpoint of superstep {} was not written ({why}); the previous \
                     complete checkpoint stays the one a restart uses",
                    meta.superstep
                ))
            }
        }
    }

    /// Hand `part` to process `pid`'s writer thread (started at its first checkpoint; the
    /// processes' writers write their parts at once, as the processes do in the foreground).
    /// Waits while another of its parts is queued: at most two are in memory besides the one
    /// being written.
    pub(super) fn hand_over(self: &Arc<Self>, meta: &Meta, pid: usize, part: Part<'static>) {
        let to = {
            let mut writer = lock(&self.writers[pid]);
            let w = writer.get_or_insert_with(|| {
                let (to, from) = std::sync::mpsc::sync_channel(1);
                let me = self.clone();
                let thread = std::thread::Builder::new()
                    .name("mbsp-checkpoint".into())
                    .spawn(move || me.write_jobs(from))
                    .expect("a thread for the checkpoint writer");
                Writer { to, thread }
            });
            w.to.clone()
        };
        let job = Job {
            meta: meta.clone(),
            pid,
            part,
        };
        // The writer runs until `finish` drops the sender: the send cannot fail before.
        let _ = to.send(job);
    }

    /// A writer thread: write the parts in the order handed over; the writer that reports a
    /// checkpoint's last part seals it.
    fn write_jobs(&self, jobs: Receiver<Job>) {
        for job in jobs {
            if self.write_part(&job.meta, job.pid, &job.part)
                && let Err(message) = self.seal(&job.meta)
            {
                eprintln!("mbsp: warning: {message}");
                lock(&self.failure).get_or_insert(message);
            }
            // The copy's buffers serve the process's next checkpoint (fresh ones would cost a
            // page fault per page, most of the copy's time); one part's worth is kept.
            let mut spare = lock(&self.spare[job.pid]);
            *spare = job.part.into_buffers().collect();
        }
    }

    /// The end of the run: wait for the writer thread to write what it was handed. A
    /// checkpoint it could not write was warned about; it is the run's error if the policy
    /// requires checkpoints.
    pub(crate) fn finish_run(&self) -> Option<crate::Error> {
        let writers: Vec<Writer> = self.writers.iter().filter_map(|w| lock(w).take()).collect();
        for w in writers {
            drop(w.to);
            let _ = w.thread.join();
        }
        let failure = lock(&self.failure).take()?;
        self.policy
            .required
            .then(|| crate::Error::outside(crate::ErrorKind::System, "checkpoint", failure))
    }
}
