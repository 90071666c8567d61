//! Hello world: every process of a run prints its pid (BSPlib paper §2.1.2).
//!
//! `cargo run --release -p mbsp-examples --bin hello [-- P]`

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    // P from the command line, or one process per hardware thread.
    let p = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(mbsp::nprocs);
    let greetings = mbsp::run(p, |ctx| {
        // Output of different processes interleaves arbitrarily, so each returns its line and
        // the caller (which continues as pid 0) prints them in order.
        Ok(format!(
            "Hello BSP Worldwide from process {} of {}",
            ctx.pid(),
            ctx.nprocs()
        ))
    })?;
    for g in greetings {
        println!("{g}");
    }
    Ok(())
}
