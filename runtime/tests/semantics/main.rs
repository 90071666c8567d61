//! The runtime's semantic tests: per-primitive semantics (`primitives`), one test per misuse
//! case (`misuse`), soundness after failure (`failure`) and the sequential model of BSPlib
//! (`model`), on the engine that `common/engine.rs` selects. This binary runs on threads in
//! `cargo test`, over MPI ranks in scripts/test-ranks and again in the runtime built without
//! MPI (scripts/test), and scripts/memcheck runs it under valgrind; so does owned.rs, a binary
//! of its own for its counting global allocator.
//!
//! One test binary for the four files rather than one each: every test binary is compiled
//! and linked on its own, with the shared helpers and the runtime's generic code again.

#[path = "../common/mod.rs"]
mod common;

mod failure;
mod misuse;
mod model;
mod primitives;
