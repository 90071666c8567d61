//! The runtime's tests that run on the thread engine only (in the workspace's `cargo test`):
//! processes as coroutines (`coroutines`), a process's end of the run (`end`), a run after a failed one (`failed`), lazy syncs (`lazy`), lending under panics (`lending`),
//! placement on machine trees (`placement`), superstep profiles (`profile`), riding messages
//! (`riding`), hostile sizes (`sizes`) and the topology-aware barrier (`topology_barrier`).
//!
//! One test binary for these files rather than one each: every test binary is compiled and
//! linked on its own, with the shared helpers and the runtime's generic code again. Tests that
//! count the process's threads (teams.rs, stress.rs) keep binaries of their own, where no other
//! test starts threads meanwhile, and so does owned.rs, whose global allocator counts.

#[path = "../common/mod.rs"]
mod common;

mod coroutines;
mod end;
mod failed;
mod lazy;
mod lending;
mod placement;
mod profile;
mod riding;
mod sizes;
mod topology_barrier;
