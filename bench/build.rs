//! Whether `mbsp-bench fft` has FFTW 3 as a baseline: the cfg `has_fftw`, set when the
//! feature `fftw` asks for it (the build then fails without the library, as asked), or when
//! the library and its threads library are installed (pkg-config finds `fftw3`, and
//! `libfftw3_threads` sits beside it), unless `MBSP_FFTW=off`. Issue 42 wants the comparison by
//! default wherever FFTW is installed, without a feature to remember.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_fftw)");
    println!("cargo::rerun-if-env-changed=MBSP_FFTW");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    let asked = std::env::var_os("CARGO_FEATURE_FFTW").is_some();
    let off = matches!(
        std::env::var("MBSP_FFTW").as_deref().map(str::trim),
        Ok("off" | "0" | "no" | "false")
    );
    if asked || (!off && installed()) {
        println!("cargo::rustc-cfg=has_fftw");
    }
}

/// Whether `libfftw3` (found by pkg-config) and `libfftw3_threads` beside it are installed.
fn installed() -> bool {
    let Ok(lib) = pkg_config::Config::new()
        .cargo_metadata(false)
        .env_metadata(false)
        .probe("fftw3")
    else {
        return false;
    };
    let mut dirs = lib.link_paths.clone();
    // A library in the default search path has no -L of its own in the .pc file.
    dirs.extend(
        [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/usr/local/lib",
        ]
        .map(Into::into),
    );
    dirs.iter().any(|d: &std::path::PathBuf| {
        ["libfftw3_threads.so", "libfftw3_threads.a"]
            .iter()
            .any(|f| Path::new(d).join(f).exists())
    })
}
