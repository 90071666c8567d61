//! The benchmarks' output files (CSV, SVG) are written whole ([`mbsp_algorithms::whole_file`]:
//! a temporary file renamed over the target); an interrupt ([`on_interrupt`]) discards the
//! unfinished ones, says what became of each, and exits with status 130.

use mbsp_algorithms::whole_file;
use mbsp_tools::command::{interrupted, status};
use mbsp_tools::{Error, ErrorKind, Result};
use std::path::Path;

pub use mbsp_algorithms::whole_file::write;

/// Install the handler of SIGINT (Ctrl-C), SIGTERM and SIGHUP: stop all writing
/// ([`whole_file::abandon`]), say what became of the output files, exit with status 130.
pub fn on_interrupt() {
    let _ = ctrlc::set_handler(|| {
        let a = whole_file::abandon();
        eprintln!("\nmbsp-bench: {}", interrupted(&a));
        std::process::exit(status(ErrorKind::Interrupted).into());
    });
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

/// The colour of the `i`-th line or bar of a plot ([`mbsp_tools::palette`]).
pub fn color(i: usize) -> plotters::style::RGBColor {
    let (r, g, b) = mbsp_tools::palette::color(i);
    plotters::style::RGBColor(r, g, b)
}
