//! Output files that appear whole or not at all.
//!
//! Every file is written to a temporary file in the target's own directory (named
//! `.NAME.PID-N.tmp`, so that it is hidden and says which process left it), flushed to the disk
//! (`fsync`) and then renamed over the target. A rename within a directory replaces the target
//! in one step: a reader sees the old file or the new one, never a part of either, and an
//! error while writing (a full disk, say) leaves the old file as it was.
//!
//! A [`Set`] holds files that belong together (a matrix and its vector distributions): all are
//! written to temporary files first, and only when every one of them is complete are they
//! renamed into place, one after the other, while a process-wide lock is held. Until all have
//! been renamed, the old files are kept (as hard links, or renamed aside where the file system
//! has no hard links); if a rename fails, the ones already done are undone, so that the set is
//! either all new or all old.
//!
//! Interrupts: a signal handler calls [`abandon`], which waits until a set being renamed is
//! complete, removes every temporary file of this process, and keeps the lock for good, so
//! that nothing is created or renamed between it and the process's exit. It returns which
//! files were discarded and which had been written, for a message that says so.
//!
//! A symbolic link is followed (the file it points to is replaced, the link stays); a target
//! that is not a regular file (`/dev/stdout`, a pipe) is written directly, as there is nothing
//! there to keep whole.
//!
//! What this cannot promise: a power cut or a `SIGKILL` during the few microseconds in which a
//! set is being renamed leaves the set mixed, and one during writing leaves a hidden temporary
//! file behind (the targets stay whole either way).
//!
//! ```
//! use mbsp_algorithms::whole_file::{self, Set};
//! use std::io::Write;
//! let dir = std::env::temp_dir().join(format!("whole-file-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! whole_file::write(&dir.join("table.csv"), |w| writeln!(w, "a,b")).unwrap();
//! let mut set = Set::new();
//! set.add(dir.join("x-P2"), |w| writeln!(w, "matrix")).unwrap();
//! set.add(dir.join("x-u2"), |w| writeln!(w, "rows")).unwrap();
//! assert!(!dir.join("x-P2").exists()); // nothing appears before the commit
//! set.commit().unwrap();
//! assert_eq!(std::fs::read_to_string(dir.join("x-u2")).unwrap(), "rows\n");
//! assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3); // no temporary file is left
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::text::escaped;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// What this process is writing and has written.
struct Registry {
    /// Temporary files that exist now, each with the file it is to become.
    temps: Vec<(PathBuf, PathBuf)>,
    /// Files this process has put in place, in order.
    written: Vec<PathBuf>,
}

/// Held while a temporary file is created or removed and while a set is renamed into place;
/// [`abandon`] keeps it for good.
static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    temps: Vec::new(),
    written: Vec::new(),
});

/// Numbers the temporary files of this process.
static NEXT: AtomicU64 = AtomicU64::new(0);

fn registry() -> MutexGuard<'static, Registry> {
    // The registry is a list of paths, consistent after every push and retain: a panic
    // elsewhere while it was held leaves nothing half-done in it.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `path` shown in a message (without raw control characters).
fn show(path: &Path) -> String {
    escaped(&path.display().to_string())
}

/// What the errors of a write that changed nothing end with: the user's old files are intact.
const UNCHANGED: &str = "; no file was changed";

/// `e` named by `path`, saying that nothing was changed.
fn unchanged(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}{UNCHANGED}", show(path)))
}

/// A hidden name beside `target`: `.NAME.PID-N.SUFFIX` (the name shortened to 100 characters,
/// so the whole stays within the usual 255-byte limit of a file name).
fn beside(target: &Path, suffix: &str) -> io::Result<PathBuf> {
    let name = target.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path does not end in a file name",
        )
    })?;
    let name: String = name.to_string_lossy().chars().take(100).collect();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    Ok(target.with_file_name(format!(".{name}.{pid}-{n}.{suffix}")))
}

/// The directory of `path` (`.` for a bare file name).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Creates a new temporary file beside `target`, registered so that [`abandon`] removes it.
/// The registry is held from before the file exists until it is listed: an interrupt either
/// comes before it is created (and it never is) or finds it listed.
fn create_temp(target: &Path) -> io::Result<(PathBuf, File)> {
    let temp = beside(target, "tmp")?;
    let mut reg = registry();
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    reg.temps.push((temp.clone(), target.to_path_buf()));
    Ok((temp, file))
}

/// Writes `target`, which is not a regular file (a device, a pipe), directly.
fn write_in_place(
    target: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", show(target)));
    let file = OpenOptions::new().write(true).open(target).map_err(named)?;
    let mut w = BufWriter::with_capacity(1 << 16, file);
    body(&mut w).map_err(named)?;
    w.flush().map_err(named)
}

/// Removes a temporary file and its registration.
fn remove_temp(temp: &Path) {
    let mut reg = registry();
    let _ = fs::remove_file(temp);
    reg.temps.retain(|(t, _)| t != temp);
}

/// Writes `path` whole or not at all: `body` writes to a temporary file beside it, which is
/// flushed, synced and renamed over `path`. On any error (of `body`, or a full disk), the
/// temporary file is removed and `path` is left as it was. Errors name `path` and say what
/// became of the files (`...; no file was changed`).
pub fn write(
    path: impl AsRef<Path>,
    body: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut set = Set::new();
    set.add(path, body)?;
    set.commit().map(|_| ())
}

/// Checks that files can be created in `dir` by creating a temporary file there and removing
/// it (registered like any other, so an interrupt in between removes it too): a command that
/// writes its results after a long computation checks this first. The error is the system's.
pub fn probe(dir: impl AsRef<Path>) -> io::Result<()> {
    let dir = dir.as_ref();
    let (temp, _file) = create_temp(&dir.join("probe"))?;
    remove_temp(&temp);
    Ok(())
}

/// A file of a [`Set`], written to its temporary file.
struct Staged {
    target: PathBuf,
    temp: PathBuf,
    /// Renamed into place (its temporary file is gone).
    placed: bool,
}

/// Files that appear together or not at all: each is written with [`add`](Set::add) to a
/// temporary file; [`commit`](Set::commit) renames them all into place. A set dropped without
/// a commit (an error, a panic) removes its temporary files and changes nothing.
#[derive(Default)]
pub struct Set {
    staged: Vec<Staged>,
}

impl Set {
    /// An empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// Writes the file that is to appear at `path`: `body` writes to a temporary file beside
    /// it, which is then flushed and synced to the disk. Nothing appears at `path` before
    /// [`commit`](Set::commit). A symbolic link is followed (the file it points to is
    /// replaced); a `path` that exists and is not a regular file (`/dev/stdout`, a pipe) is
    /// written directly, at once. On error the temporary file is removed (the files added before
    /// stay staged until the set is dropped, which removes them); the error names `path` and
    /// ends with `; no file was changed`.
    pub fn add(
        &mut self,
        path: impl AsRef<Path>,
        body: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
    ) -> io::Result<()> {
        let target = path.as_ref();
        match fs::metadata(target) {
            // Not a regular file: a device such as /dev/stdout, or a pipe. There is no old
            // content to keep and nothing to rename over (that would replace the device with a
            // file): it is written in place, at once.
            Ok(m) if !m.is_file() && !m.is_dir() => return write_in_place(target, body),
            _ => {}
        }
        // Through a symbolic link, the file it points to is replaced, not the link.
        let is_link = fs::symlink_metadata(target).is_ok_and(|m| m.file_type().is_symlink());
        let real = if is_link {
            fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf())
        } else {
            target.to_path_buf()
        };
        let target = real.as_path();
        let (temp, file) = create_temp(target).map_err(|e| unchanged(target, e))?;
        // A replaced file keeps its permissions (the temporary file has the defaults).
        if let Ok(old) = fs::metadata(target) {
            let _ = file.set_permissions(old.permissions());
        }
        let written = (|| {
            let mut w = BufWriter::with_capacity(1 << 20, file);
            body(&mut w)?;
            w.flush()?;
            w.get_ref().sync_all()
        })();
        match written {
            Ok(()) => {
                self.staged.push(Staged {
                    target: target.to_path_buf(),
                    temp,
                    placed: false,
                });
                Ok(())
            }
            Err(e) => {
                remove_temp(&temp);
                Err(unchanged(target, e))
            }
        }
    }

    /// Renames every file of the set into place, and returns their paths. Either all of them
    /// are replaced, or (on error) none: the old files are kept aside until every rename has
    /// succeeded and put back if one fails. An interrupt waits until this is done. The error
    /// says what became of the files: `...; no file was changed`, or which old file could not
    /// be put back and where it is.
    pub fn commit(mut self) -> io::Result<Vec<PathBuf>> {
        let mut reg = registry();
        // One rename replaces one file in one step: a single file needs no backup.
        let backups = if self.staged.len() > 1 {
            match self.keep_old() {
                Ok(b) => b,
                Err(e) => {
                    drop(reg);
                    return Err(e); // nothing was changed; dropping `self` removes the temps
                }
            }
        } else {
            vec![None]
        };
        for i in 0..self.staged.len() {
            let s = &self.staged[i];
            if let Err(e) = fs::rename(&s.temp, &s.target) {
                let undone = self.undo(i, &backups);
                drop(reg);
                let target = &self.staged[i].target;
                return Err(match undone {
                    Ok(()) => unchanged(target, e),
                    Err(u) => io::Error::new(e.kind(), format!("{}: {e}; {u}", show(target))),
                });
            }
            self.staged[i].placed = true;
        }
        reg.temps
            .retain(|(t, _)| !self.staged.iter().any(|s| &s.temp == t));
        for b in backups.iter().flatten() {
            let _ = fs::remove_file(&b.path);
        }
        let targets: Vec<PathBuf> = self.staged.iter().map(|s| s.target.clone()).collect();
        reg.written.extend(targets.iter().cloned());
        drop(reg);
        // The renames are made durable by syncing the directories. Some file systems cannot
        // sync a directory; the files are in place and whole either way, so that is no error.
        let mut dirs: Vec<&Path> = targets.iter().map(|t| dir_of(t)).collect();
        dirs.dedup();
        for d in dirs {
            if let Ok(f) = File::open(d) {
                let _ = f.sync_all();
            }
        }
        Ok(targets)
    }

    /// Keeps each existing target of the set aside, for [`undo`](Set::undo): a hard link to it
    /// (the target stays in place), or where hard links are not possible the target renamed
    /// aside. On error, the ones kept are put back and nothing is changed.
    fn keep_old(&self) -> io::Result<Vec<Option<Backup>>> {
        let mut backups = Vec::with_capacity(self.staged.len());
        for s in &self.staged {
            let exists = fs::symlink_metadata(&s.target).is_ok_and(|m| !m.is_dir());
            if !exists {
                backups.push(None);
                continue;
            }
            let kept = beside(&s.target, "old").and_then(|path| {
                if fs::hard_link(&s.target, &path).is_ok() {
                    Ok(Backup { path, linked: true })
                } else {
                    fs::rename(&s.target, &path).map(|()| Backup {
                        path,
                        linked: false,
                    })
                }
            });
            match kept {
                Ok(b) => backups.push(Some(b)),
                Err(e) => {
                    for (s, b) in self.staged.iter().zip(&backups) {
                        if let Some(b) = b {
                            b.restore(&s.target);
                        }
                    }
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "{}: cannot keep the old file while the set is replaced: \
                             {e}{UNCHANGED}",
                            show(&s.target)
                        ),
                    ));
                }
            }
        }
        Ok(backups)
    }

    /// After the rename of file `failed` failed: puts the old files back (removing the new
    /// files that had none), and drops the other backups. Returns the first failure to restore.
    fn undo(&mut self, failed: usize, backups: &[Option<Backup>]) -> Result<(), String> {
        let mut first_failure = Ok(());
        for (i, (s, b)) in self.staged.iter_mut().zip(backups).enumerate() {
            let result = match b {
                // A new file that had no old one: remove it.
                None if i < failed => fs::remove_file(&s.target),
                None => Ok(()),
                Some(b) if i < failed || !b.linked => b.put_back(&s.target),
                Some(b) => fs::remove_file(&b.path),
            };
            if i < failed {
                s.placed = false; // its temporary file is the target again (or gone)
            }
            if let Err(e) = result
                && first_failure.is_ok()
            {
                first_failure = Err(format!(
                    "putting back the old {} failed too: {e}{}",
                    show(&s.target),
                    b.as_ref()
                        .map(|b| format!(" (it is in {})", show(&b.path)))
                        .unwrap_or_default()
                ));
            }
        }
        first_failure
    }
}

impl Drop for Set {
    /// Removes the temporary files of a set not committed.
    fn drop(&mut self) {
        for s in self.staged.iter().filter(|s| !s.placed) {
            remove_temp(&s.temp);
        }
    }
}

/// An old file kept aside while a set is renamed into place.
struct Backup {
    path: PathBuf,
    /// A hard link (the target stayed in place), not the target renamed aside.
    linked: bool,
}

impl Backup {
    /// Puts the old file back at `target` (replacing whatever is there in one step).
    fn put_back(&self, target: &Path) -> io::Result<()> {
        fs::rename(&self.path, target)
    }

    /// Undoes the keeping alone (nothing was renamed into place yet).
    fn restore(&self, target: &Path) {
        let _ = if self.linked {
            fs::remove_file(&self.path)
        } else {
            self.put_back(target)
        };
    }
}

/// What [`abandon`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Abandoned {
    /// Files that were being written: their temporary files were removed, and what was at these
    /// paths before is still there.
    pub discarded: Vec<PathBuf>,
    /// Files this process had written whole, in order.
    pub written: Vec<PathBuf>,
}

/// Stops all writing of files for good, for a signal handler that then ends the process: waits
/// until a set being renamed into place is complete, removes every temporary file of this
/// process, and keeps the registry's lock, so that no file is created or renamed afterwards
/// (a thread that tries waits until the process exits). Returns what was discarded and what
/// had been written. Must not be called by a thread that is writing a file itself.
pub fn abandon() -> Abandoned {
    let reg = registry();
    let mut discarded = Vec::new();
    for (temp, target) in &reg.temps {
        let _ = fs::remove_file(temp);
        if !discarded.contains(target) {
            discarded.push(target.clone());
        }
    }
    let written = reg.written.clone();
    // Held until the process exits: see above.
    std::mem::forget(reg);
    Abandoned { discarded, written }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mbsp-whole-file-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn registered(dir: &Path) -> usize {
        registry()
            .temps
            .iter()
            .filter(|(t, _)| t.starts_with(dir))
            .count()
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = scratch("failed");
        let path = dir.join("table.csv");
        write(&path, |f| writeln!(f, "old")).unwrap();
        let failed = write(&path, |f| {
            writeln!(f, "half")?;
            Err(io::Error::other("interrupted"))
        });
        let e = failed.unwrap_err();
        assert!(
            e.to_string()
                .ends_with("table.csv: interrupted; no file was changed"),
            "{e}"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(names(&dir), ["table.csv"]);
        assert_eq!(registered(&dir), 0);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_set_appears_together_or_not_at_all() {
        let dir = scratch("set");
        let (a, b) = (dir.join("m-P2"), dir.join("m-u2"));
        fs::write(&a, "old a").unwrap();
        // The second file fails: the first stays staged, nothing changes, and dropping the set
        // removes the first's temporary file.
        let mut set = Set::new();
        set.add(&a, |w| w.write_all(b"new a")).unwrap();
        assert_eq!(registered(&dir), 1);
        assert!(set.add(&b, |_| Err(io::Error::other("disk full"))).is_err());
        drop(set);
        assert_eq!(names(&dir), ["m-P2"]);
        assert_eq!(fs::read_to_string(&a).unwrap(), "old a");
        // A whole set: both replaced, backups gone.
        let mut set = Set::new();
        set.add(&a, |w| w.write_all(b"new a")).unwrap();
        set.add(&b, |w| w.write_all(b"new b")).unwrap();
        assert_eq!(set.commit().unwrap(), [a.clone(), b.clone()]);
        assert_eq!(names(&dir), ["m-P2", "m-u2"]);
        assert_eq!(fs::read_to_string(&a).unwrap(), "new a");
        assert_eq!(fs::read_to_string(&b).unwrap(), "new b");
        assert_eq!(registered(&dir), 0);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_rename_puts_the_set_back() {
        let dir = scratch("undo");
        let (a, b, c) = (dir.join("x-P2"), dir.join("x-u2"), dir.join("x-v2"));
        fs::write(&a, "old a").unwrap();
        // `c` had no old file; `b` is a directory, which a file cannot be renamed over: the
        // rename of `b` fails after `a` was replaced.
        fs::create_dir(&b).unwrap();
        let mut set = Set::new();
        set.add(&a, |w| w.write_all(b"new a")).unwrap();
        set.add(&c, |w| w.write_all(b"new c")).unwrap();
        set.add(&b, |w| w.write_all(b"new b")).unwrap();
        let e = set.commit().unwrap_err();
        assert!(e.to_string().ends_with("; no file was changed"), "{e}");
        assert_eq!(fs::read_to_string(&a).unwrap(), "old a");
        assert!(!c.exists());
        assert!(b.is_dir());
        assert_eq!(names(&dir), ["x-P2", "x-u2"]);
        assert_eq!(registered(&dir), 0);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn permissions_of_a_replaced_file_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("mode");
        let path = dir.join("params.json");
        fs::write(&path, "{}").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        write(&path, |w| w.write_all(b"{\"g\": 1}")).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn links_are_followed_and_devices_written_in_place() {
        use std::os::unix::fs::symlink;
        let dir = scratch("links");
        let real = dir.join("real.csv");
        fs::write(&real, "old").unwrap();
        let link = dir.join("link.csv");
        symlink(&real, &link).unwrap();
        write(&link, |w| w.write_all(b"new")).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(names(&dir), ["link.csv", "real.csv"]);
        // A device stays a device (it is not replaced by a file).
        write("/dev/null", |w| w.write_all(b"gone")).unwrap();
        assert!(!fs::metadata("/dev/null").unwrap().is_file());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_probe_leaves_nothing() {
        let dir = scratch("probe");
        probe(&dir).unwrap();
        assert!(names(&dir).is_empty());
        assert!(probe(dir.join("no-such-dir")).is_err());
        let _ = fs::remove_dir_all(&dir);
    }
}
