//! Parallel complex FFT in BSP (BSPlib paper §5.2; MulticoreBSP for C paper §3.1, Algorithm 4).
//!
//! The vector `x` of length `n = 2^m` is distributed cyclically over `p = 2^q` processes:
//! process `s` holds `x[s], x[s+p], x[s+2p], ...` (its *local* array of `n/p` entries), on input
//! and on output. With `j = s + p·t` and `k = k₁ + (n/p)·k₂`,
//!
//! ```text
//! y[k₁ + (n/p)·k₂] = Σ_s ω_p^{s·k₂} · ( ω_n^{s·k₁} · Σ_t x[s + p·t] ω_{n/p}^{t·k₁} )
//! ```
//!
//! so one transform is: (1) a sequential FFT of the local array (rustfft, planned once),
//! (2) twiddle by `ω_n^{s·k₁}` and pack, per destination `r`, the entries `k₁ ≡ r (mod p)`,
//! (3) one superstep in which every process gets its packs from all others (the exchange, below),
//! (4) `n/p²` FFTs of length `p` across the fetched packs, done column slab by column slab in
//! cache, which leave the output exactly in the cyclic distribution. No bit reversal is needed:
//! rustfft's output is in order, and the packs are placed in bit-reversed source order so the
//! length-`p` FFTs come out in order too. The inverse runs the same steps with `ω⁻¹` and folds
//! the `1/n` scaling into the twiddles.
//!
//! **Split local FFT.** With `p² ≤ n` and sequential local work, steps (1)-(2) are done
//! differently (same packs, same superstep): seeing the local array as `p` rows of
//! `b = n/p²`, with `t = t' + b·j` and `k₁ = r + p·u`,
//!
//! ```text
//! X[r + p·u] = Σ_{t'} ω_b^{t'·u} · ( ω_{n/p}^{t'·r} · Σ_j x[t' + b·j] ω_p^{j·r} )
//! ```
//!
//! so one pass does length-`p` transforms down the columns and the twiddles `ω_{n/p}^{t'·r}`,
//! and `p` kernels of length `b` write pack `r` (the entries `k₁ ≡ r (mod p)` in order) out
//! of place, straight into the pack buffer; the twiddles `ω_n^{s·k₁}` of step (2) are
//! multiplied in by the receiver while it does step (4), one pass over cached slabs (for
//! `p = 2`, the fetch, the twiddle and the butterfly are one loop). For `p = 2` and `n ≥ 2^17`
//! the local array is split in four rows instead (a radix-4 pass, kernels of `n/8`; each pack
//! is then two blocks, which the receiver interleaves), and at `n = 2^18` and `2^20 … 2^22` in
//! eight (a radix-8 pass, kernels of `n/16`, packs of four blocks): rustfft's kernels get
//! slower per flop once they outgrow the caches. From `n = 2^22` it is split in 64 rows in two
//! levels (a radix-8 pass over the local array, then one over each of its eight rows just
//! before that row's kernels), so that the kernels (`n/128`) stay in L2; the rows come out in
//! an order of frequencies the final pass reads as it is. [`kernel_len`] gives the kernels'
//! length. Against a whole
//! local FFT followed by a twiddle-and-pack pass this saves a pass over memory and runs
//! kernels `p` times shorter (they fit the caches better).
//!
//! **Footprint (`p = 2`).** Only the other process's pack leaves a process; its own pack is
//! written by its kernels into the rows of its local array that the other pack's kernels have
//! already consumed, and the final pass reads it there. The transform then touches one pack of
//! `n/4` entries besides its local array (the owned exchange's buffer, or the registered buffer
//! of the parity in use with direct gets) instead of `n/2`; with eight rows, plus `n/16` entries
//! where the final pass keeps half of two of its own blocks that its outputs would overwrite
//! before reading them. In two levels (from `n = 2^22`) its own pack has a buffer of its own
//! (`n/4` entries more): with 32 blocks per pack the outputs would overwrite nearly all of it
//! before reading it.
//!
//! **Cost** (`p² ≤ n`): `5(n/p)·log₂ n` flops plus `O(n/p)` for twiddles and packing, and one
//! superstep with an h-relation of `h = 2·(n/p)·(p-1)/p` words (complex entries are two words),
//! each word read once by its receiver, plus the sync of the exchange (below).
//!
//! **Exchange.** The superstep can move the packs in two ways ([`Exchange`], chosen per plan
//! with [`BspFft::with_exchange`]); both have the h-relation above and read each entry once:
//!
//! * [`Exchange::Owned`] (the default): BSPk's lazy barrier and communicable memory. The kernels write each
//!   pack meant for another process into a buffer of its own, which is handed over as an owned
//!   message (no copy); every process declares the `p - 1` packs it receives
//!   ([`mbsp::Ctx::declare_incoming`]), so its sync waits for them (and for the receivers of its packs of
//!   the transform before to be done with them), not for a barrier over all processes. The
//!   receiver computes straight from the received buffers (in place for `p = 2`), and keeps
//!   them as its next transform's pack buffers: a steady state allocates and copies nothing,
//!   and no pack is registered. Cost `h·g` plus the wait for the `p - 1` senders instead of
//!   `l`; no double buffering, and no restriction on the caller's next superstep. The
//!   transform's own superstep must carry no other puts or messages.
//! * [`Exchange::DirectGet`]: the packs are written to registered buffers and read by direct
//!   gets after a full sync. Cost `h·g + l`. The direct gets happen in the superstep after the
//!   transform's sync, which therefore cannot be a lazy one. The packs are double-buffered
//!   across calls, so a transform needs a single sync: a process rewrites a pack buffer only
//!   after everybody has passed the sync that followed the reads of its previous contents (a
//!   single pack buffer would need a second sync per transform).
//!
//! The owned exchange is used where the local FFT is split (`1 < p`, `p² ≤ n`, sequential
//! local work). The group-cyclic stages (`p² > n`, below) and the nested levels of
//! [`MultiFft`] keep direct gets: their supersteps are few (`p² > n` means short transforms)
//! or already bracketed by nested runs, whose start and end cost more than the barrier a
//! lazy sync would save. The owned exchange is the default: where it is used, its sync waits
//! only for the senders instead of a barrier, and it measured faster than direct gets
//! (docs/benchmarks.md).
//!
//! **`p² > n`: group-cyclic stages.** The length-`p` transforms of step (4) are then longer than
//! the local arrays (`m = n/p < p`), so they cannot be split into columns. Instead the column
//! `k₁` of the `m` length-`p` transforms goes to the group of `p/m` processes `{k₁ + m·i}`, in
//! the cyclic distribution over that group (process `k₁ + m·i` fetches entry `k₁` from the
//! processes `i + (p/m)·t`, `t < m`: one superstep, `h = 2m` words), and each group runs the same
//! algorithm on its length-`p` transform: local FFT of length `m`, twiddles, pack. While a group
//! is still larger than `m` it splits again (its stride times `m`); after
//! `L = ⌈log_m p⌉ − 1` such redistributions the last groups have `gp ≤ m` processes and do the
//! exchange of step (4) among themselves. The output is again exactly cyclic over all `p`
//! processes (each stage keeps an entry's local position), so nothing is collected or
//! reordered. Cost: `(L + 1)` supersteps of `h ≤ 2m` words and `L + 1` local FFTs of length
//! `m` — against `2n` words for fetching everything, which is what `n = p` (`m = 1`, where no
//! stage makes progress) still does: every process fetches all packs and computes its own
//! outputs directly, `O(n)` work.
//!
//! [`BspFft`] is the plan inside a run; [`fft`] / [`ifft`] transform a whole vector, starting a
//! run of `p` processes. [`MultiFft`] / [`fft_multi`] nest the same algorithm along the machine
//! tree (packages → NUMA nodes → cores); [`FftCost`] predicts both and picks one.

//! **Modules.** `num` (element types, roots, the radix-2 kernel) is a leaf; `split` (the split
//! local FFT's passes) uses `num`; `plan` ([`BspFft`] and the nested levels below a process)
//! uses `num` and `split`; `multi` ([`MultiFft`], [`FftCost`]) uses `plan`; `oneshot` ([`fft`],
//! [`ifft`], [`fft_multi`], the plan cache) uses `plan` and `multi`. No module uses this one or
//! one above it (a test checks), so the dependencies form no circle.

pub mod multi;
mod natural;
mod num;
mod oneshot;
mod plan;
mod simd;
mod split;

pub use multi::{Choice, FftCost, MEASURED_FROM, MultiFft, NESTED_FROM, Order, Variant, hierarchy};
pub use num::{Complex, Float, sequential_plan};
pub use oneshot::{PLAN_CACHE_ENTRIES, PLAN_CACHE_LEN, fft, fft_multi, ifft};
pub use plan::{BspFft, Direction, Exchange};
pub use split::kernel_len;

/// Flops of one complex FFT of length `n` by the usual convention, `5 n log₂ n`.
///
/// ```
/// assert_eq!(mbsp_algorithms::fft::flops(1024), 51_200.0);
/// ```
pub fn flops(n: usize) -> f64 {
    5.0 * n as f64 * (n.max(1) as f64).log2()
}

/// The transforms of `f64`, instantiated once, here, in builds with debug assertions (the dev
/// and test profiles, whose `opt-level` 0 or 1 shares generic instances between crates): every
/// test binary, example and tool that uses the FFT then links to these copies instead of
/// compiling the transform and rustfft's planner again. Not in this crate's own unit-test build
/// (which uses few of them), nor for `f32` (only the FFT's tests use it); release builds
/// instantiate where used, as usual.
#[cfg(all(debug_assertions, not(test)))]
#[doc(hidden)]
pub fn shared_instances() -> [*const (); 8] {
    [
        BspFft::<f64>::new as *const (),
        BspFft::<f64>::transform as *const (),
        BspFft::<f64>::forward as *const (),
        BspFft::<f64>::inverse as *const (),
        MultiFft::<f64>::new as *const (),
        MultiFft::<f64>::transform as *const (),
        fft::<f64> as *const (),
        fft_multi::<f64> as *const (),
    ]
}

#[cfg(test)]
mod tests {
    /// The modules of the FFT and what each uses of the others (`super::NAME` and
    /// `crate::fft::NAME` in code, comments left out): every edge goes to a module listed
    /// earlier, so there is no circle, and none goes to this module (`mod.rs`). A file's
    /// `mod tests` comes last and is not read (its `super` is the file's own module).
    #[test]
    fn module_dependencies_form_no_circle() {
        let order: [(&str, &str); 7] = [
            ("num", include_str!("num.rs")),
            ("simd", include_str!("simd.rs")),
            ("split", include_str!("split.rs")),
            ("plan", include_str!("plan.rs")),
            ("natural", include_str!("natural.rs")),
            ("multi", include_str!("multi.rs")),
            ("oneshot", include_str!("oneshot.rs")),
        ];
        let names: Vec<&str> = order.iter().map(|m| m.0).collect();
        for (at, (name, text)) in order.iter().enumerate() {
            for line in text.lines().take_while(|l| !l.starts_with("mod tests")) {
                let code = line.split("//").next().unwrap_or("");
                for prefix in ["super::", "crate::fft::"] {
                    for (i, _) in code.match_indices(prefix) {
                        let used: String = code[i + prefix.len()..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        let Some(to) = names.iter().position(|n| *n == used) else {
                            panic!("{name}.rs uses `{prefix}{used}`, an item of mod.rs: {line}");
                        };
                        assert!(to < at, "{name}.rs uses {used}, listed later: {line}");
                    }
                }
            }
        }
    }
}
