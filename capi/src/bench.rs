//! The Rust-API side of the C benchmark (capi/bench/cbench.c): the same loops through the Rust
//! API, so both are measured in one process run.

use std::time::Instant;

/// Nanoseconds per empty sync over `iters` supersteps of a Rust-API run of `p` processes.
#[unsafe(no_mangle)]
pub extern "C" fn mbsp_bench_rust_sync(p: u32, iters: usize) -> f64 {
    let r = mbsp_rt::run(p as usize, |ctx| {
        ctx.sync()?;
        let t = Instant::now();
        for _ in 0..iters {
            ctx.sync()?;
        }
        Ok(t.elapsed().as_nanos() as f64 / iters as f64)
    });
    r.map(|v| v[0]).unwrap_or(f64::NAN)
}

/// GB/s per process of a buffered put of `bytes` to the right neighbour + sync, Rust API.
#[unsafe(no_mangle)]
pub extern "C" fn mbsp_bench_rust_put(p: u32, bytes: usize, iters: usize) -> f64 {
    let r = mbsp_rt::run(p as usize, |ctx| {
        let right = (ctx.pid() + 1) % ctx.nprocs();
        let dst = ctx.push_reg(vec![0u8; bytes])?;
        let src = vec![1u8; bytes];
        ctx.sync()?;
        ctx.put(right, &src, &dst, 0)?;
        ctx.sync()?;
        let t = Instant::now();
        for _ in 0..iters {
            ctx.put(right, &src, &dst, 0)?;
            ctx.sync()?;
        }
        Ok(bytes as f64 * iters as f64 / t.elapsed().as_nanos() as f64)
    });
    r.map(|v| v[0]).unwrap_or(f64::NAN)
}
