//! The timeline of a profile as an SVG picture, drawn here as plain SVG text (no plotting
//! library), so that any program that asks for it through `MBSP_PROFILE`, a C program
//! included, gets it with no other tool.

use super::text::secs;
use super::{Profile, Superstep, write_whole};

impl Profile {
    /// The timeline of this run as an SVG picture: one lane per process, each superstep drawn
    /// as its computation, then its wait for the others, then the sync's own work (see the
    /// [module docs](crate::profile)), in the superstep's slot of the measured time; region names above
    /// the supersteps where a region starts. Runs nested in it are not drawn.
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| ctx.sync())?;
    /// let svg = profile.timeline_svg();
    /// assert!(svg.starts_with("<svg") && svg.contains("pid 1"));
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn timeline_svg(&self) -> String {
        use std::fmt::Write as _;
        // Very long runs are drawn in part: a picture of more boxes than this is unreadable
        // and slow to open.
        const MAX_BOXES: usize = 60_000;
        let shown = (MAX_BOXES / (3 * self.p.max(1))).clamp(1, self.supersteps.len().max(1));
        let steps = &self.supersteps[..shown.min(self.supersteps.len())];
        let total: f64 = steps.iter().map(Superstep::measured).sum();
        let (left, top, lane, width) = (70.0, 40.0, 22.0, 1000.0);
        let scale = if total > 0.0 { width / total } else { 0.0 };
        let height = top + lane * self.p as f64 + 40.0;
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="11">"#,
            left + width + 20.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{left}" y="14">mbsp profile: p = {}, {} of {} supersteps, {} (compute: blue, wait: orange, sync work: grey)</text>"#,
            self.p,
            steps.len(),
            self.supersteps.len(),
            xml(&secs(total))
        );
        for pid in 0..self.p {
            let y = top + lane * pid as f64;
            let _ = writeln!(
                out,
                r#"<text x="4" y="{}">pid {pid}</text>"#,
                y + lane * 0.65
            );
        }
        let mut t0 = 0.0;
        let mut last_region = None;
        for (i, s) in steps.iter().enumerate() {
            let region = self.superstep_region(i);
            if region.is_some() && region != last_region {
                let name = self.region_path(region.unwrap_or(0));
                let x = left + t0 * scale;
                let _ = writeln!(
                    out,
                    r#"<line x1="{x:.2}" y1="{}" x2="{x:.2}" y2="{}" stroke="black" stroke-dasharray="2,2"/><text x="{:.2}" y="{}">{}</text>"#,
                    top - 12.0,
                    top + lane * self.p as f64,
                    x + 2.0,
                    top - 4.0,
                    xml(&name)
                );
            }
            last_region = region;
            for (pid, me) in s.procs.iter().enumerate() {
                let y = top + lane * pid as f64 + 2.0;
                let wait = s.wait(pid);
                let mut x = left + t0 * scale;
                for (len, colour, what) in [
                    (me.compute, "#4477aa", "compute"),
                    (wait, "#ee8833", "wait"),
                    (me.sync - wait, "#999999", "sync work"),
                ] {
                    let w = len.max(0.0) * scale;
                    if w > 0.0 {
                        let _ = writeln!(
                            out,
                            r#"<rect x="{x:.3}" y="{y}" width="{w:.3}" height="{}" fill="{colour}"><title>superstep {i}, pid {pid}: {what} {}</title></rect>"#,
                            lane - 4.0,
                            xml(&secs(len))
                        );
                    }
                    x += w;
                }
            }
            t0 += s.measured();
        }
        let _ = writeln!(
            out,
            r#"<text x="{left}" y="{}">0</text><text x="{}" y="{}" text-anchor="end">{}</text>"#,
            height - 14.0,
            left + width,
            height - 14.0,
            xml(&secs(total))
        );
        out.push_str("</svg>\n");
        out
    }

    /// Write [`timeline_svg`](Self::timeline_svg) to `path`, whole (through a temporary file
    /// renamed into place).
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| ctx.sync())?;
    /// let path = std::env::temp_dir().join(format!("mbsp-doc-{}.svg", std::process::id()));
    /// profile.write_svg(&path).unwrap();
    /// assert!(std::fs::read_to_string(&path).unwrap().contains("</svg>"));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn write_svg(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        write_whole(path.as_ref(), &self.timeline_svg())
    }
}

/// `text` with XML's special characters escaped.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
