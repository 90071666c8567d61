//! Output files that are always whole: written to a temporary file beside the target, then
//! renamed over it (renaming within a directory is atomic), so an interrupted benchmark never
//! leaves a half-written table.

use std::fs::File;
use std::io::{BufWriter, Result};
use std::path::Path;

/// Writes `path` through `write`, atomically; on error the temporary file is removed and
/// `path` is left as it was.
pub fn write(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<()>) -> Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = BufWriter::new(File::create(&tmp)?);
        write(&mut f)?;
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
