//! Output files that are always whole: written to a temporary file beside the target, then
//! renamed over it (renaming within a directory is atomic), so an interrupted benchmark never
//! leaves a half-written table. A Ctrl-C ([`on_interrupt`]) while a file is being written
//! removes the temporary file before the program exits.

use std::fs::File;
use std::io::{BufWriter, Result};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temporary files being written now.
static IN_PROGRESS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Install the Ctrl-C (SIGINT, SIGTERM) handler: remove the temporary files being written,
/// say so, exit with status 130. Finished output files are whole; unfinished ones never
/// appear.
pub fn on_interrupt() {
    let _ = ctrlc::set_handler(|| {
        let files = IN_PROGRESS.lock().map(|v| v.clone()).unwrap_or_default();
        for f in &files {
            let _ = std::fs::remove_file(f);
        }
        eprintln!("\nmbsp: interrupted; no output file was left half-written");
        std::process::exit(130);
    });
}

/// Writes `path` through `write`, atomically; on error the temporary file is removed and
/// `path` is left as it was.
pub fn write(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<()>) -> Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    if let Ok(mut v) = IN_PROGRESS.lock() {
        v.push(tmp.clone());
    }
    let result = (|| {
        let mut f = BufWriter::new(File::create(&tmp)?);
        write(&mut f)?;
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    if let Ok(mut v) = IN_PROGRESS.lock() {
        v.retain(|t| t != &tmp);
    }
    result
}

/// Draws an SVG of `size` pixels with `draw` into memory, then writes it to `path` atomically:
/// a plot interrupted half-way (Ctrl-C) never leaves a truncated file.
pub fn svg(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(
        plotters::drawing::DrawingArea<plotters::prelude::SVGBackend<'_>, plotters::coord::Shift>,
    ) -> std::result::Result<(), String>,
) -> std::result::Result<(), String> {
    use plotters::prelude::IntoDrawingArea;
    let mut text = String::new();
    draw(plotters::prelude::SVGBackend::with_string(&mut text, size).into_drawing_area())?;
    write(path, |f| std::io::Write::write_all(f, text.as_bytes())).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = std::env::temp_dir().join(format!("mbsp-whole-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("table.csv");
        write(&path, |f| writeln!(f, "old")).unwrap();
        let failed = write(&path, |f| {
            writeln!(f, "half")?;
            Err(std::io::Error::other("interrupted"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["table.csv"]);
        assert!(IN_PROGRESS.lock().unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
