//! The checkpoint folder on disk: one sub-folder per checkpoint, `c<sequence>`, holding
//! `part-<pid>` files and, written last, `MANIFEST`. Every file goes through a temporary name,
//! `fsync` and a rename, and the folder is synced after the rename, so that after a crash a
//! file is either absent or whole (its checksum says which of the two it is if the disk lied).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The manifest's file name.
pub(crate) const MANIFEST: &str = "MANIFEST";

/// The file of process `pid`'s part.
pub(crate) fn part_name(pid: usize) -> String {
    format!("part-{pid}")
}

/// The sub-folder of checkpoint `seq`.
pub(crate) fn checkpoint_dir(root: &Path, seq: u64) -> PathBuf {
    root.join(format!("c{seq:020}"))
}

/// Write `bytes` to `path` through a temporary file, synced and renamed; the folder is synced
/// after the rename (the rename itself must survive a crash).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] of what `fill` writes (through a buffer of [`WRITE_BUFFER`] bytes).
pub(crate) fn write_atomic_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let written = (|| {
        let mut w = std::io::BufWriter::with_capacity(WRITE_BUFFER, fs::File::create(&tmp)?);
        let t = fill(&mut w)?;
        let f = w
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        f.sync_all()?;
        Ok(t)
    })();
    match written {
        Ok(t) => {
            fs::rename(&tmp, path)?;
            sync_dir(path.parent().unwrap_or(Path::new(".")))?;
            Ok(t)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// The write buffer of a part: large writes (areas go past it unbuffered), few system calls
/// for the small fields.
const WRITE_BUFFER: usize = 1 << 20;

/// Sync a folder (its entries: a rename or a new file in it).
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// The checkpoints in `root`, newest (highest sequence) first, with whether each has its
/// manifest; a missing folder has none.
pub(crate) fn list(root: &Path) -> std::io::Result<Vec<(u64, PathBuf, bool)>> {
    let entries = match fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(seq) = name
            .to_str()
            .and_then(|n| n.strip_prefix('c'))
            .filter(|n| n.len() == 20)
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let complete = path.join(MANIFEST).is_file();
        found.push((seq, path, complete));
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    Ok(found)
}

/// Keep the newest `keep` complete checkpoints of `root` (at least the newest one); remove
/// older complete ones and every incomplete one older than the newest complete one (left by a
/// crash or a failed write). Returns what it could not remove, as warnings.
pub(crate) fn prune(root: &Path, keep: usize) -> Vec<String> {
    let Ok(found) = list(root) else {
        return Vec::new();
    };
    let mut complete_seen = 0;
    let mut problems = Vec::new();
    for (_, path, complete) in found {
        let remove = if complete {
            complete_seen += 1;
            complete_seen > keep.max(1)
        } else {
            complete_seen > 0
        };
        if remove && let Err(e) = fs::remove_dir_all(&path) {
            problems.push(format!("could not remove {}: {e}", path.display()));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mbsp-files-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn pruning_keeps_the_newest_complete_checkpoints() {
        let root = scratch("prune");
        for seq in 1..=5 {
            let d = checkpoint_dir(&root, seq);
            fs::create_dir_all(&d).unwrap();
            if seq != 2 && seq != 5 {
                write_atomic(&d.join(MANIFEST), b"x").unwrap();
            }
        }
        // Complete: 1, 3, 4; incomplete: 2 (old), 5 (newer than every complete one).
        assert!(prune(&root, 2).is_empty());
        let left: Vec<(u64, bool)> = list(&root)
            .unwrap()
            .into_iter()
            .map(|(s, _, c)| (s, c))
            .collect();
        assert_eq!(left, vec![(5, false), (4, true), (3, true)]);
        let leftovers: Vec<_> = fs::read_dir(checkpoint_dir(&root, 4))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, vec![MANIFEST], "no temporary file is left");
        fs::remove_dir_all(&root).unwrap();
    }
}
