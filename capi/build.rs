//! Compiles the small C part of the ABI: the setjmp trampoline that lets `bsp_end` leave a
//! process's SPMD function (as MulticoreBSP ends the thread), and the constructor that records
//! `argc`/`argv` for SPMD sections that are `main` itself.
fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    cc::Build::new()
        .file("src/shim.c")
        .warnings(true)
        .compile("mbsp_shim");
}
