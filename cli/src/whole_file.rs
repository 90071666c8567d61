//! Output files that are always whole, and what an interrupt does to them.
//!
//! Every file a command writes goes through [`mbsp_algorithms::whole_file`]: a temporary file
//! beside the target, synced and renamed over it; sets of files (Mondriaan's `-P`/`-u`/`-v`)
//! renamed together. [`on_interrupt`] makes SIGINT, SIGTERM and SIGHUP stop the program
//! cleanly: it waits for a set being renamed into place, removes the temporary files, says
//! exactly which files were discarded and which had been written, and exits with status 130.

use crate::error::{Error, ErrorKind, Result};
use mbsp_algorithms::text::escaped;
use mbsp_algorithms::whole_file::{self, Abandoned};
use std::path::{Path, PathBuf};

pub use mbsp_algorithms::whole_file::write;

/// Install the handler of SIGINT (Ctrl-C), SIGTERM and SIGHUP: stop all writing
/// ([`whole_file::abandon`]), say what became of the output files, exit with status 130.
pub fn on_interrupt() {
    let _ = ctrlc::set_handler(|| {
        let a = whole_file::abandon();
        eprintln!("\nmbsp: {}", interrupted(&a));
        std::process::exit(ErrorKind::Interrupted.status().into());
    });
}

/// Paths for a message, comma-separated (control characters escaped).
fn list(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths
        .iter()
        .map(|p| escaped(&p.display().to_string()))
        .collect();
    shown.join(", ")
}

/// The message of an interrupt: what was discarded, what had been written, and that nothing
/// else was changed.
fn interrupted(a: &Abandoned) -> String {
    let mut msg = String::from("interrupted");
    if !a.discarded.is_empty() {
        let verb = if a.discarded.len() == 1 {
            "was"
        } else {
            "were"
        };
        msg.push_str(&format!(
            "; the unfinished {} {verb} discarded",
            list(&a.discarded)
        ));
    }
    if a.written.is_empty() {
        msg.push_str("; no output file was changed");
    } else {
        msg.push_str(&format!(
            "; written whole before: {}; no other output file was changed",
            list(&a.written)
        ));
    }
    msg
}

/// Draws an SVG of `size` pixels with `draw` into memory, then writes it to `path` whole
/// ([`write()`]): a plot interrupted half-way never leaves a truncated file. Errors (input and
/// output errors, exit status 3) name `path`.
pub fn svg(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(
        plotters::drawing::DrawingArea<plotters::prelude::SVGBackend<'_>, plotters::coord::Shift>,
    ) -> std::result::Result<(), String>,
) -> Result<()> {
    use plotters::prelude::IntoDrawingArea;
    let mut text = String::new();
    draw(plotters::prelude::SVGBackend::with_string(&mut text, size).into_drawing_area())
        .map_err(|e| Error::io(format!("{}: {e}", path.display())))?;
    write(path, |f| std::io::Write::write_all(f, text.as_bytes()))
        .map_err(|e| Error::io("").with_source(e))
}

/// The colours of a plot's lines or bars, in turn (distinct on white).
pub const COLORS: [plotters::style::RGBColor; 10] = [
    plotters::style::RGBColor(31, 119, 180),
    plotters::style::RGBColor(214, 39, 40),
    plotters::style::RGBColor(44, 160, 44),
    plotters::style::RGBColor(255, 127, 14),
    plotters::style::RGBColor(148, 103, 189),
    plotters::style::RGBColor(140, 86, 75),
    plotters::style::RGBColor(227, 119, 194),
    plotters::style::RGBColor(127, 127, 127),
    plotters::style::RGBColor(188, 189, 34),
    plotters::style::RGBColor(23, 190, 207),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interrupt_message_says_what_happened() {
        let a = Abandoned {
            discarded: vec!["out/m-P4".into(), "out/m-u4".into()],
            written: vec!["t.csv".into()],
        };
        assert_eq!(
            interrupted(&a),
            "interrupted; the unfinished out/m-P4, out/m-u4 were discarded; written whole \
             before: t.csv; no other output file was changed"
        );
        assert_eq!(
            interrupted(&Abandoned::default()),
            "interrupted; no output file was changed"
        );
        let a = Abandoned {
            discarded: vec!["a\u{1b}[2J.svg".into()],
            written: vec![],
        };
        assert_eq!(
            interrupted(&a),
            "interrupted; the unfinished a\\u{1b}[2J.svg was discarded; no output file was \
             changed"
        );
    }
}
