//! The C test suite: C (and one C++) programs compiled with the system compiler against
//! libmbsp exactly as a user would (`cc prog.c -Icapi/include -L<dir> -lmbsp`), run, and checked
//! for their output and exit status. Needs `cc` and `c++` on the PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Build libmbsp.so and libmbsp.a as a user does (`cargo build -p mbsp-capi`) and return their
/// directory. Cargo does not build a cdylib/staticlib-only library for integration tests, and
/// the running `cargo test` holds the lock of its own target directory, so this uses a separate
/// one (`capi-lib` in `$CARGO_TARGET_DIR` if that is an absolute path, else in target/), built
/// once per test run (incrementally after the first).
///
/// `MBSP_CAPI_LIB_DIR` names a directory where the libraries are built already (scripts/test
/// builds them with everything else, in one build of the test profile).
fn lib_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("MBSP_CAPI_LIB_DIR") {
            let dir = PathBuf::from(dir);
            for f in ["libmbsp.so", "libmbsp.a"] {
                assert!(
                    dir.join(f).is_file(),
                    "MBSP_CAPI_LIB_DIR: {} is missing",
                    dir.join(f).display()
                );
            }
            return dir;
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .filter(|d| d.is_absolute())
            .unwrap_or_else(|| here().join("../target"))
            .join("capi-lib");
        let out = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "mbsp-capi", "--target-dir"])
            .arg(&target)
            .current_dir(here())
            .output()
            .expect("run cargo");
        assert!(
            out.status.success(),
            "cargo build -p mbsp-capi failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = target.join("debug");
        for f in ["libmbsp.so", "libmbsp.a"] {
            assert!(
                dir.join(f).is_file(),
                "{} was not built",
                dir.join(f).display()
            );
        }
        dir
    })
    .clone()
}

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn out_dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let d = lib_dir().join("capi-tests");
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

/// How to link: against the shared library (the default of `-lmbsp`) or the static one.
#[derive(Clone, Copy, PartialEq)]
enum Link {
    Shared,
    Static,
}

/// Compile `src` (in tests/c) with `extra` flags into an executable named `name`.
fn build(src: &str, name: &str, extra: &[&str], link: Link) -> PathBuf {
    let lib = lib_dir();
    let exe = out_dir().join(name);
    let cxx = src.ends_with(".cpp") || extra.contains(&"c++");
    let mut cmd = Command::new(if cxx { "c++" } else { "cc" });
    if !cxx {
        cmd.arg("-std=c11");
    }
    cmd.args(["-Wall", "-Wextra", "-Werror", "-O1"])
        .arg(format!("-I{}", here().join("include").display()))
        .args(extra)
        .arg(here().join("tests/c").join(src))
        .arg("-o")
        .arg(&exe);
    match link {
        Link::Shared => {
            cmd.arg(format!("-L{}", lib.display()))
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                .arg("-lmbsp");
        }
        Link::Static => {
            cmd.arg(lib.join("libmbsp.a")).args([
                "-lmpich",
                "-lhwloc",
                "-ludev",
                "-lpthread",
                "-ldl",
                "-lm",
                "-lrt",
                "-lutil",
            ]);
        }
    }
    let out = cmd.output().expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling {src} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Run with a hang detector (the suite's programs finish in well under a second), without the
/// caller's mbsp settings but with `env`, and without `LD_LIBRARY_PATH` (cargo points it at
/// its own target directory, whose libmbsp.so may be older than the one the program was linked
/// with and found through its rpath).
fn run(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let (secs, wrapper) = wrapped(60);
    let mut child = Command::new("timeout")
        .arg(secs)
        .args(wrapper)
        .arg(exe)
        .args(args)
        .env_clear_mbsp()
        .envs(env.iter().copied())
        .output()
        .expect("run");
    if child.status.code() == Some(124) {
        panic!("{} {args:?} hung", exe.display());
    }
    child.stdout.shrink_to_fit();
    child
}

/// Whether the programs run under scripts/memcheck (`MBSP_TEST_MEMCHECK`), where each run is
/// checked for memory errors and costs seconds.
fn memcheck() -> bool {
    std::env::var_os("MBSP_TEST_MEMCHECK").is_some()
}

/// `n`, or 1 under scripts/memcheck.
fn repeats(n: usize) -> usize {
    if memcheck() { 1 } else { n }
}

/// The command that runs each program in front of it, from `MBSP_TEST_WRAPPER` (words split
/// at spaces; scripts/memcheck sets it to valgrind's memcheck), and the hang detector's limit in
/// seconds: `secs`, or twenty times that under a wrapper (memcheck runs programs 20-50 times
/// slower).
fn wrapped(secs: u32) -> (String, Vec<String>) {
    match std::env::var("MBSP_TEST_WRAPPER") {
        Ok(w) if !w.trim().is_empty() => (
            (secs * 20).to_string(),
            w.split_whitespace().map(String::from).collect(),
        ),
        _ => (secs.to_string(), Vec::new()),
    }
}

/// Without the caller's mbsp settings, and without `LD_LIBRARY_PATH` (cargo points it at its
/// own target directory, whose libmbsp.so may be older than the one the program was linked
/// with and found through its rpath).
trait CleanEnv {
    fn env_clear_mbsp(&mut self) -> &mut Self;
}

impl CleanEnv for Command {
    fn env_clear_mbsp(&mut self) -> &mut Self {
        [
            "MBSP_AFFINITY",
            "MBSP_MAX_THREADS",
            "MBSP_TOPOLOGY",
            "MBSP_CHECKPOINT_DIR",
            "MBSP_CHECKPOINT_EVERY",
            "MBSP_CHECKPOINT_SECONDS",
            "MBSP_CHECKPOINT_KEEP",
            "LD_LIBRARY_PATH",
        ]
        .iter()
        .fold(self, |c, v| c.env_remove(v))
    }
}

fn ok(out: &Output) -> String {
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {o}\nstderr: {e}",
        out.status.code()
    );
    o.into_owned()
}

#[test]
fn every_primitive_multicorebsp_mode() {
    let exe = build("primitives.c", "primitives", &[], Link::Shared);
    for p in ["1", "2", "4", "7"] {
        assert!(ok(&run(&exe, &[p], &[])).contains(&format!("primitives ok (p = {p})")));
    }
}

#[test]
fn every_primitive_bsplib_compatibility_mode() {
    let exe = build(
        "primitives.c",
        "primitives-compat",
        &["-DMCBSP_COMPATIBILITY_MODE"],
        Link::Shared,
    );
    for p in ["1", "2", "5"] {
        let out = ok(&run(&exe, &[p], &[]));
        assert!(
            out.contains("(BSPlib compatibility mode) primitives ok"),
            "{out}"
        );
    }
}

#[test]
fn every_primitive_with_the_static_library() {
    let exe = build("primitives.c", "primitives-static", &[], Link::Static);
    assert!(ok(&run(&exe, &["3"], &[])).contains("primitives ok"));
}

#[test]
fn bsplib_examples_in_compatibility_mode() {
    let exe = build("bsplib_examples.c", "bsplib_examples", &[], Link::Shared);
    for p in ["1", "3", "4", "6"] {
        assert!(ok(&run(&exe, &[p], &[])).contains("BSPlib examples ok"));
    }
}

#[test]
fn nested_runs() {
    let exe = build("nested.c", "nested", &[], Link::Shared);
    assert!(ok(&run(&exe, &[], &[])).contains("nested ok"));
}

/// `mbsp_shape_level` reads the shape `mbsp affinity` passes in `MBSP_SHAPE`; a bad value ends
/// the program with one line naming it.
#[test]
fn programs_take_their_shape_from_the_environment() {
    let exe = build("shaped.c", "shaped", &[], Link::Shared);
    let out = ok(&run(&exe, &[], &[("MBSP_SHAPE", "2x3")]));
    assert!(out.contains("shaped ok: 2 processes, 6 leaves"), "{out}");
    assert!(out.contains("mbsp-figure: "), "{out}");
    let out = ok(&run(&exe, &[], &[("MBSP_SHAPE", "3")]));
    assert!(out.contains("shaped ok: 3 processes, 3 leaves"), "{out}");
    fails(
        &run(&exe, &[], &[("MBSP_SHAPE", "2y3")]),
        "mbsp_shape_level: MBSP_SHAPE=\"2y3\" is not a shape",
    );
}

#[test]
fn lazy_barriers_from_c() {
    let exe = build("lazy.c", "lazy", &[], Link::Shared);
    assert!(ok(&run(&exe, &[], &[])).contains("lazy ok"));
    let out = run(&exe, &["wrong"], &[]);
    fails(
        &out,
        "pid 1 called declare_incoming(3) in superstep 100 but received 2",
    );
    // The same program over 2 MPI ranks (the rank engine's lazy syncs: streams to the ranks
    // written to, no header all-to-all); there pid 1 is the last process and also receives
    // pid 0's message.
    let out = ok(&run_ranks(2, &exe, &["2"]));
    assert_eq!(out.matches("lazy ok").count(), 1, "{out}");
    let out = run_ranks(2, &exe, &["2", "wrong"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("pid 1 called declare_incoming(4) in superstep 100 but received 3"),
        "{err}"
    );
}

/// The lines of a run of checkpoint.c, sorted (processes print in any order), "restored" cut.
fn final_states(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = ok(out)
        .lines()
        .map(|l| l.trim_end_matches(" restored").to_string())
        .collect();
    lines.sort();
    lines
}

#[test]
fn c_programs_checkpoint_and_restart_after_sigkill() {
    let exe = build("checkpoint.c", "checkpoint", &[], Link::Shared);
    for p in ["1", "2", "3"] {
        let want = final_states(&run(&exe, &[p, "60"], &[]));
        assert_eq!(want.len(), p.parse::<usize>().unwrap());
        let dir = out_dir().join(format!("ckpt-{p}"));
        let _ = std::fs::remove_dir_all(&dir);
        let env = [("MBSP_CHECKPOINT_DIR", dir.to_str().unwrap())];
        // pid 0 kills the program with SIGKILL at iteration 13, then (restarted from the
        // checkpoint of iteration 10) at 41; the third run finishes.
        for die_at in ["13", "41"] {
            let out = run(&exe, &[p, "60", die_at], &env);
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&out.status),
                Some(9),
                "p = {p}: killed at {die_at}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = run(&exe, &[p, "60"], &env);
        assert!(
            ok(&out).contains("restored"),
            "p = {p}: the last run resumed"
        );
        assert_eq!(final_states(&out), want, "p = {p}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // Killed from outside at moments spread over the run, then run to the end.
    let dir = out_dir().join("ckpt-outside");
    let _ = std::fs::remove_dir_all(&dir);
    let iters = "4000";
    let want = final_states(&run(&exe, &["2", iters], &[]));
    let t = std::time::Instant::now();
    let _ = run(
        &exe,
        &["2", iters],
        &[("MBSP_CHECKPOINT_DIR", dir.to_str().unwrap())],
    );
    let whole = t.elapsed();
    std::fs::remove_dir_all(&dir).unwrap();
    let mut kills = 0;
    for k in 1..=repeats(6) {
        let mut child = Command::new(&exe)
            .args(["2", iters])
            .env_clear_mbsp()
            .env("MBSP_CHECKPOINT_DIR", &dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(whole.mul_f64(0.03 * k as f64));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        child.wait().unwrap();
    }
    let out = run(
        &exe,
        &["2", iters],
        &[("MBSP_CHECKPOINT_DIR", dir.to_str().unwrap())],
    );
    assert_eq!(final_states(&out), want, "after {kills} kills");
    eprintln!("checkpoint.c: {kills} kills from outside (whole run {whole:?})");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The same program over MPI ranks: every rank writes its part to the shared folder, rank 0
/// the manifest after an all-gather of the parts' reports; SIGKILL on rank 0 ends the job, and
/// a new `mpiexec` with the same number of ranks resumes.
#[test]
fn c_programs_checkpoint_and_restart_over_mpi_ranks() {
    let exe = build("checkpoint.c", "checkpoint_ranks", &[], Link::Shared);
    for ranks in [2, 3] {
        let n = ranks.to_string();
        let want = final_states(&run_ranks(ranks, &exe, &[&n, "60"]));
        assert_eq!(want.len(), ranks);
        let dir = out_dir().join(format!("ckpt-ranks-{ranks}"));
        let _ = std::fs::remove_dir_all(&dir);
        let env = [("MBSP_CHECKPOINT_DIR", dir.to_str().unwrap())];
        for die_at in ["13", "41"] {
            let out = run_ranks_with(ranks, &exe, &[&n, "60", die_at], &env);
            assert!(!out.status.success(), "{ranks} ranks: killed at {die_at}");
        }
        let out = run_ranks_with(ranks, &exe, &[&n, "60"], &env);
        assert_eq!(
            ok(&out).matches("restored").count(),
            ranks,
            "every rank resumed"
        );
        assert_eq!(final_states(&out), want, "{ranks} ranks");
        // Another number of ranks: refused with the reason.
        let other = (ranks + 1).to_string();
        let out = run_ranks_with(ranks + 1, &exe, &[&other, "60"], &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains(&format!(
                "written by a run of {ranks} processes; this run has {}",
                ranks + 1
            )),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // Ranks whose environments give different policies: refused at bsp_begin, not a hang.
    let dir = out_dir().join("ckpt-ranks-differ");
    let out = Command::new("timeout")
        .args(["120", "mpiexec", "-n", "1", "-env", "MBSP_CHECKPOINT_DIR"])
        .arg(&dir)
        .arg(&exe)
        .args(["2", "10", ":", "-n", "1"])
        .arg(&exe)
        .args(["2", "10"])
        .env_clear_mbsp()
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && out.status.code() != Some(124),
        "{err}"
    );
    assert!(
        err.contains("the ranks' checkpoint policies differ"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn main_as_the_spmd_section_with_shared_globals() {
    for link in [Link::Shared, Link::Static] {
        let name = if link == Link::Shared {
            "pure"
        } else {
            "pure-static"
        };
        let exe = build("pure_spmd.c", name, &[], link);
        let out = ok(&run(&exe, &["a", "b"], &[]));
        assert!(out.contains("sum 10, argc 3"), "{out}");
        assert_eq!(
            out.matches("after end").count(),
            1,
            "only pid 0 continues after bsp_end"
        );
    }
}

#[test]
fn cxx_programs_compile_and_run() {
    let exe = build("cxx_check.cpp", "cxx_check", &[], Link::Shared);
    assert!(ok(&run(&exe, &[], &[])).contains("c++ ok"));
    // Without exceptions, C++ gets the C bsp_begin/bsp_end (bsp_end leaves by longjmp).
    let exe = build(
        "cxx_check.cpp",
        "cxx_check-noexcept",
        &["-fno-exceptions"],
        Link::Shared,
    );
    assert!(ok(&run(&exe, &[], &[])).contains("c++ ok"));
    // The C programs compile as C++ too.
    let exe = build("pure_spmd.c", "pure-cxx", &["-x", "c++"], Link::Shared);
    assert!(ok(&run(&exe, &["x"], &[])).contains("sum 10"));
}

/// Expect exit status 1 and `needle` in the single error line.
fn fails(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    let line = err.lines().find(|l| l.starts_with("mbsp: ")).unwrap_or("");
    assert!(line.contains(needle), "expected {needle:?} in {err:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("should not get here"));
}

#[test]
fn abort_and_misuse_end_the_program_with_one_clear_line() {
    let exe = build("failures.c", "failures", &[], Link::Shared);
    let cases = [
        (
            "abort",
            "bsp_abort (pid 2, superstep 1): aborted: input matrix.mtx is broken (code 42)",
        ),
        (
            "bounds",
            "bsp_put (pid 1, superstep 1): to pid 3: offset 8 + 16 bytes exceeds the 16 bytes pid 3 registered",
        ),
        (
            "pid",
            "bsp_put (pid 3, superstep 1): pid 9 is out of range: valid pids are 0..=3",
        ),
        ("unregistered", "bsp_get (pid 0, superstep 1): address"),
        (
            "no_end",
            "spmd (pid 3, superstep 1): the SPMD function returned without calling bsp_end",
        ),
        (
            "sync_mismatch",
            "pid(s) [1] returned from the SPMD function while pid(s) [0, 2, 3] called sync",
        ),
        (
            "tagsize",
            "set_tagsize differs between processes in superstep 1: pid 0 asked for 4 bytes, pid 2 asked for 8 bytes",
        ),
        ("move_empty", "superstep 1): the message queue is empty"),
        ("null_tag", "bsp_send (pid "),
        ("pop_unregistered", "bsp_pop_reg (pid "),
        ("outside", "bsp_sync: called outside an SPMD section"),
    ];
    for (mode, needle) in cases {
        fails(&run(&exe, &[mode], &[]), needle);
    }
    let exe = build("compat_negative.c", "compat_negative", &[], Link::Shared);
    fails(&run(&exe, &[], &[]), "bsp_push_reg (pid ");
    let exe = build("main_without_end.c", "main_without_end", &[], Link::Shared);
    fails(
        &run(&exe, &[], &[]),
        "spmd (pid 0, superstep 0): left the SPMD section without calling bsp_end (it returned \
         from the function that called bsp_begin, or called exit)",
    );
}

#[test]
fn hostile_sizes_are_misuse_not_memory_errors() {
    let exe = build("sizes.c", "sizes", &[], Link::Shared);
    assert!(ok(&run(&exe, &["ok"], &[])).contains("sizes ok"));
    let max = u64::MAX;
    let payload = |op: &str, n: u64| {
        format!(
            "{op} (pid 0, superstep 1): a payload of {n} bytes exceeds the largest message, \
             140737488355328 bytes"
        )
    };
    let object = "is larger than any object can be: at most isize::MAX = 9223372036854775807 bytes";
    let cases = [
        ("send_max", payload("bsp_send", max)),
        ("send_max_7", payload("bsp_send", max - 7)),
        ("send_2_62", payload("bsp_send", 1 << 62)),
        ("hpsend_max", payload("bsp_hpsend", max)),
        (
            "tagsize_max",
            format!("superstep 1): a tag size of {max} bytes exceeds the largest, 1048576 bytes"),
        ),
        (
            "tagsize_2_40",
            "superstep 1): a tag size of 1099511627776 bytes exceeds the largest, 1048576 bytes"
                .into(),
        ),
        (
            "put_max",
            format!("bsp_put (pid 0, superstep 1): the source ({max} bytes at"),
        ),
        (
            "put_offset",
            format!(
                "bsp_put (pid 0, superstep 1): to pid 1: offset {} + 8 bytes exceeds the 64 \
                 bytes pid 1 registered",
                max - 3
            ),
        ),
        (
            "get_max",
            format!("bsp_get (pid 0, superstep 1): the destination ({max} bytes at"),
        ),
        (
            "get_offset",
            format!(
                "bsp_get (pid 0, superstep 1): from pid 1: offset {max} + 1 bytes exceeds the \
                 64 bytes pid 1 registered"
            ),
        ),
        (
            "hpget_max",
            format!("bsp_hpget (pid 0, superstep 1): the destination ({max} bytes at"),
        ),
        (
            "direct_get_max",
            format!("bsp_direct_get (pid 0, superstep 1): the destination ({max} bytes at"),
        ),
        (
            "push_reg_max",
            format!("superstep 1): the area ({max} bytes at"),
        ),
    ];
    // Under memcheck, one size per check: the other sizes take the same code path (their
    // arithmetic is what the ordinary run checks).
    let same_path = ["send_max_7", "send_2_62", "tagsize_2_40"];
    for (mode, needle) in &cases {
        if memcheck() && same_path.contains(mode) {
            continue;
        }
        let out = run(&exe, &[mode], &[]);
        fails(&out, needle);
        if needle.contains("bytes at") {
            fails(&out, object);
        }
    }
    // Within the limits but more than the machine can allocate (only where such an allocation
    // fails rather than succeeding and running the machine out of memory on first use).
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    if overcommit.trim() != "1" {
        fails(
            &run(&exe, &["send_2_40"], &[]),
            "bsp_send (pid 0, superstep 1): to pid 1: could not allocate room for a message of \
             1099511627776 payload bytes",
        );
    }
    fails(
        &run(&exe, &["pinning_max"], &[]),
        &format!(
            "mbsp: mcbsp_set_pinning: a length of {max} values is more than any array can hold"
        ),
    );
    fails(
        &run(&exe, &["get_pinning_max"], &[]),
        "mbsp: mcbsp_get_pinning: 2305843009213693953 values are more than any array can hold",
    );
    let out = run(&exe, &["begin_huge"], &[]);
    fails(
        &out,
        "mbsp: bsp_begin: p = 1000000000 processes cannot run on this machine: at most ",
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

/// The JSON profile (`MBSP_PROFILE=FILE.json`) of a run of `exe`, after checking its output
/// contains `ok_line`.
fn json_profile(exe: &Path, args: &[&str], name: &str, ok_line: &str) -> serde_json::Value {
    let path = std::env::temp_dir().join(format!("mbsp-c-{name}-{}.json", std::process::id()));
    let out = run(exe, args, &[("MBSP_PROFILE", path.to_str().unwrap())]);
    assert!(ok(&out).contains(ok_line));
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    serde_json::from_str(&text).unwrap()
}

#[test]
fn gets_are_profiled_like_puts() {
    let exe = build("profiled_get.c", "profiled_get", &[], Link::Shared);
    let v = json_profile(&exe, &[], "get", "profiled get ok");
    assert_eq!(v["supersteps"][1]["h"], 1000, "the get's superstep: {v}");
    assert_eq!(v["supersteps"][2]["h"], 1000, "the put's superstep: {v}");
    // And the text report on stderr.
    let out = run(&exe, &[], &[("MBSP_PROFILE", "1")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("top-level run: p = 2, 4 supersteps"), "{err}");
}

#[test]
fn regions_from_c() {
    let exe = build("regions.c", "regions", &[], Link::Shared);
    let v = json_profile(&exe, &[], "regions", "regions ok");
    let step_regions: Vec<&str> = v["supersteps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["region"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        step_regions,
        [
            "setup",
            "solve/halo",
            "solve/halo",
            "solve/halo",
            "solve",
            ""
        ]
    );
    let totals: Vec<(&str, u64, u64)> = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t["supersteps"].as_u64().unwrap(),
                t["h"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        totals,
        [
            ("setup", 1, 0),
            ("solve", 4, 3),
            ("solve/halo", 3, 3),
            ("(outside regions)", 1, 0),
        ]
    );
    // The regions outside any other, with the rest, make the run.
    let outer: f64 = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["depth"].as_u64().unwrap() <= 1)
        .map(|t| t["measured"].as_f64().unwrap())
        .sum();
    let whole = v["measured_seconds"].as_f64().unwrap();
    assert!((outer - whole).abs() <= 1e-9 * whole, "{outer} vs {whole}");
    // Without profiling the calls are accepted; a region ended twice is a misuse.
    assert!(ok(&run(&exe, &[], &[])).contains("regions ok"));
    let out = run(&exe, &["unbalanced"], &[]);
    fails(&out, "no region is open");
    fails(&out, "mbsp: mbsp_region_end (pid ");
}

#[test]
fn affinity_and_thread_settings() {
    let exe = build("settings.c", "settings", &[], Link::Shared);
    assert!(ok(&run(&exe, &[], &[])).contains("settings ok"));
    assert!(
        ok(&run(
            &exe,
            &[],
            &[("MBSP_MAX_THREADS", "2"), ("EXPECT_MAX", "2")]
        ))
        .contains("settings ok")
    );
    assert!(
        ok(&run(
            &exe,
            &[],
            &[("MBSP_AFFINITY", "compact"), ("EXPECT_MODE", "1")]
        ))
        .contains("settings ok")
    );
    assert!(
        ok(&run(
            &exe,
            &[],
            &[("MBSP_AFFINITY", "none"), ("EXPECT_MODE", "3")]
        ))
        .contains("settings ok")
    );
    // Forced: the mode reads as the policy; the program's own modes are then ignored by runs
    // (its manual pinning of every process on CPU 0 included).
    for (spec, mode) in [("force:compact", "1"), ("force:none", "3")] {
        assert!(
            ok(&run(
                &exe,
                &[],
                &[("MBSP_AFFINITY", spec), ("EXPECT_MODE", mode)]
            ))
            .contains("settings ok"),
            "{spec}"
        );
    }
    assert!(
        ok(&run(
            &exe,
            &[],
            &[("MBSP_TOPOLOGY", "synthetic:package:2 core:4 pu:2")]
        ))
        .contains("settings ok")
    );
    fails(
        &run(&exe, &["bad_pinning"], &[]),
        "mcbsp_set_pinning gave 2 CPUs for 4 processes",
    );
    fails(
        &run(&exe, &[], &[("MBSP_MAX_THREADS", "lots")]),
        "MBSP_MAX_THREADS=\"lots\" is not a positive number",
    );
}

#[test]
fn every_name_of_the_multicorebsp_headers_in_both_modes_and_cxx() {
    let builds = [
        ("api_complete", &[][..], "api complete (multicorebsp) ok"),
        (
            "api_complete-compat",
            &["-DMCBSP_COMPATIBILITY_MODE"][..],
            "api complete (compat) ok",
        ),
        (
            "api_complete-cxx",
            &["-x", "c++"][..],
            "api complete (multicorebsp) ok",
        ),
        (
            "api_complete-cxx-compat",
            &["-x", "c++", "-DMCBSP_COMPATIBILITY_MODE"][..],
            "api complete (compat) ok",
        ),
    ];
    for (name, flags, expect) in builds {
        let exe = build("api_complete.c", name, flags, Link::Shared);
        let out = run(&exe, &[], &[]);
        assert!(ok(&out).contains(expect), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.matches("no checkpoint is written: set MBSP_CHECKPOINT_DIR")
                .count(),
            1,
            "{name}: one warning line for checkpoints: {err}"
        );
        for (mode, n) in [
            ("bsp_abort", 1),
            ("mcbsp_abort", 2),
            ("bsp_vabort", 3),
            ("mcbsp_vabort", 4),
        ] {
            fails(
                &run(&exe, &[mode], &[]),
                &format!("bsp_abort (pid 1, superstep 0): aborted: by {mode} {n}"),
            );
        }
    }
    let exe = build("api_complete.c", "api_complete-static", &[], Link::Static);
    assert!(ok(&run(&exe, &[], &[])).contains("api complete (multicorebsp) ok"));
}

#[test]
fn null_result_pointers_are_misuse_in_both_modes() {
    for (name, flags) in [
        ("null_results", &[][..]),
        ("null_results-compat", &["-DMCBSP_COMPATIBILITY_MODE"][..]),
    ] {
        let exe = build("null_results.c", name, flags, Link::Shared);
        assert!(ok(&run(&exe, &["none"], &[])).contains("null results ok"));
        for (mode, needle) in [
            (
                "set_tagsize",
                "bsp_set_tagsize (pid 1, superstep 0): the size pointer is NULL",
            ),
            (
                "get_tag",
                "bsp_get_tag (pid 1, superstep 0): the status pointer is NULL",
            ),
            (
                "qsize",
                "bsp_qsize (pid 1, superstep 0): the packets pointer is NULL",
            ),
            (
                "hpmove_tag",
                "bsp_hpmove (pid 1, superstep 0): the tag pointer (where to store the message's address) is NULL",
            ),
            (
                "hpmove_payload",
                "bsp_hpmove (pid 1, superstep 0): the payload pointer (where to store the message's address) is NULL",
            ),
        ] {
            fails(&run(&exe, &[mode], &[]), needle);
        }
    }
}

#[test]
fn a_second_bsp_begin_and_runaway_nesting_are_misuse() {
    let exe = build("failures.c", "failures-begin", &[], Link::Shared);
    let out = run(&exe, &["begin_twice"], &[]);
    fails(
        &out,
        "mbsp: bsp_begin (pid 2, superstep 1): called again in the SPMD section it started or joined",
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    let out = run(&exe, &["deep"], &[]);
    fails(
        &out,
        "superstep 0): nested runs are limited to 64 levels, and this bsp_begin would start level 65",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("mbsp: bsp_begin (pid 1/{}0, ", "0/".repeat(62))),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
    let exe = build("begin_twice_main.c", "begin_twice_main", &[], Link::Shared);
    let out = run(&exe, &[], &[]);
    fails(
        &out,
        "superstep 0): called again in the SPMD section it started or joined",
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

#[test]
fn null_registrations_popped_by_null() {
    for (name, flags) in [
        ("pop_null", &[][..]),
        ("pop_null-compat", &["-DMCBSP_COMPATIBILITY_MODE"][..]),
    ] {
        let exe = build("pop_null.c", name, flags, Link::Shared);
        assert!(ok(&run(&exe, &[], &[])).contains("pop null ok"));
    }
}

#[test]
fn cxx_destructors_run_on_every_process() {
    let mixed = here().join("tests/c/mixed_end.c");
    let mixed = mixed.to_str().unwrap();
    let flags = ["-rdynamic", "-x", "c", mixed, "-x", "none"];
    for link in [Link::Shared, Link::Static] {
        let name = if link == Link::Shared {
            "cxx_destructors"
        } else {
            "cxx_destructors-static"
        };
        let exe = build("cxx_destructors.cpp", name, &flags, link);
        for style in ["spmd", "mcbsp", "main", "mixed", "c_begin"] {
            let out = ok(&run(&exe, &[style], &[]));
            assert!(
                out.contains(&format!("c++ destructors ok ({style})")),
                "{out}"
            );
        }
    }
}

/// [`run`] under `mpiexec -n ranks` (MPICH on localhost): the top-level SPMD section runs over
/// the ranks, one process each.
fn run_ranks(ranks: usize, exe: &Path, args: &[&str]) -> Output {
    run_ranks_with(ranks, exe, args, &[])
}

/// [`run_ranks`] with `env` (which mpiexec passes to every rank).
fn run_ranks_with(ranks: usize, exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let (secs, wrapper) = wrapped(120);
    let out = Command::new("timeout")
        .arg(secs)
        .args(["mpiexec", "-n", &ranks.to_string()])
        .args(wrapper)
        .arg(exe)
        .args(args)
        .env_clear_mbsp()
        .envs(env.iter().copied())
        .output()
        .expect("mpiexec not found: install MPICH (scripts/setup does: mpich, libmpich-dev)");
    assert_ne!(
        out.status.code(),
        Some(124),
        "mpiexec -n {ranks} {} {args:?} hung",
        exe.display()
    );
    out
}

#[test]
fn bsplib_programs_run_unchanged_over_mpi_ranks() {
    let prims = build("primitives.c", "primitives", &[], Link::Shared);
    let compat = build(
        "primitives.c",
        "primitives-compat",
        &["-DMCBSP_COMPATIBILITY_MODE"],
        Link::Shared,
    );
    let examples = build("bsplib_examples.c", "bsplib_examples", &[], Link::Shared);
    for ranks in [2, 3] {
        let n = ranks.to_string();
        for (exe, line) in [
            (&prims, format!("primitives ok (p = {ranks})")),
            (&compat, format!("primitives ok (p = {ranks})")),
            (&examples, format!("BSPlib examples ok (p = {ranks})")),
        ] {
            let out = ok(&run_ranks(ranks, exe, &[&n]));
            // Only process 0 goes on after bsp_end (the others leave the program there).
            assert_eq!(out.matches(&line).count(), 1, "{ranks} ranks: {out}");
        }
    }
    // Fewer processes than ranks: the extra rank takes no part.
    let out = ok(&run_ranks(3, &prims, &["2"]));
    assert_eq!(out.matches("primitives ok (p = 2)").count(), 1, "{out}");
}

/// `MBSP_PROFILE` for a C program's SPMD section (bsp_begin .. bsp_end), on threads and over
/// MPI ranks, where rank 0 reports it once: text on stderr with the lazy supersteps (the
/// program's declared syncs) marked, or the JSON file.
#[test]
fn profiles_of_c_programs_over_threads_and_mpi_ranks() {
    let exe = build("lazy.c", "lazy-profiled", &[], Link::Shared);
    // Superstep 0 registers, 1-200 are lazy, then a full sync and the end.
    let head = "mbsp profile: top-level run: p = 2, 203 supersteps (200 lazy), ";
    for ranks in [None, Some(2)] {
        let env = [("MBSP_PROFILE", "1")];
        let out = match ranks {
            None => run(&exe, &["2"], &env),
            Some(n) => run_ranks_with(n, &exe, &["2"], &env),
        };
        assert_eq!(ok(&out).matches("lazy ok").count(), 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.matches(head).count(), 1, "{ranks:?} ranks: {err}");
        // Supersteps 1-19 of the first 20 shown, and maybe some of the longest.
        assert!(err.matches("  lazy  ").count() >= 19, "{err}");
    }
    let path = std::env::temp_dir().join(format!("mbsp-c-ranks-{}.json", std::process::id()));
    let out = run_ranks_with(2, &exe, &["2"], &[("MBSP_PROFILE", path.to_str().unwrap())]);
    assert!(ok(&out).contains("lazy ok"));
    let text = std::fs::read_to_string(&path).expect("rank 0 wrote the profile");
    let _ = std::fs::remove_file(&path);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["p"], 2);
    assert_eq!(v["supersteps"].as_array().unwrap().len(), 203);
    assert_eq!(v["levels"][0]["lazy"], 200);
    assert_eq!(v["supersteps"][100]["lazy"], true);
    assert_eq!(v["supersteps"][201]["lazy"], false);
    let places: Vec<&str> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["place"].as_str().unwrap())
        .collect();
    assert!(places.iter().all(|w| w.starts_with("node ")), "{places:?}");
}

/// bsp_end is a synchronisation: the others' stack memory is read by pid 0 during their
/// bsp_end (direct_get before it, get served at it), over threads and over MPI ranks.
#[test]
fn bsp_end_waits_for_every_process_and_the_last_communication() {
    let exe = build("end_sync.c", "end_sync", &[], Link::Shared);
    let pi = "pi 3.1415927 (direct_get) 3.1415927 (get)";
    // (Under memcheck, the smallest and the largest count: each run costs seconds there.)
    let counts: &[&str] = if memcheck() {
        &["2", "8"]
    } else {
        &["2", "3", "4", "8"]
    };
    for &p in counts {
        for _ in 0..repeats(5) {
            let out = ok(&run(&exe, &[p], &[]));
            assert!(out.contains(pi), "p = {p}: {out}");
        }
    }
    let cxx = build("end_sync.c", "end_sync-cxx", &["-x", "c++"], Link::Shared);
    assert!(ok(&run(&cxx, &["4"], &[])).contains(pi));
    for ranks in [2, 3] {
        let n = ranks.to_string();
        let out = ok(&run_ranks(ranks, &exe, &[&n]));
        assert_eq!(out.matches(pi).count(), 1, "{ranks} ranks: {out}");
    }
}

/// A process (thread or MPI rank) that leaves its SPMD section without bsp_end is a misuse
/// that says so, and it does not run on into main.
#[test]
fn leaving_without_bsp_end_is_named_and_ends_the_program() {
    let exe = build("leave_early.c", "leave_early", &[], Link::Shared);
    let returned = "spmd (pid 1, superstep 1): the SPMD function returned without calling bsp_end";
    let left = "spmd (pid 1, superstep 1): left the SPMD section without calling bsp_end (it \
                returned from the function that called bsp_begin, or called exit)";
    for (mode, threads, ranks) in [
        ("return", returned, returned),
        ("exit", left, left),
        ("main_return", returned, left),
    ] {
        fails(&run(&exe, &[mode], &[]), threads);
        let out = run_ranks(2, &exe, &[mode]);
        let err = String::from_utf8_lossy(&out.stderr);
        // The rank that left exits with status 1; mpiexec then ends the other, which may still
        // be waiting in bsp_end: the job's status is then that rank's signal (9), not 1.
        assert!(
            matches!(out.status.code(), Some(1) | Some(9)),
            "{mode}: exit {:?}: {err}",
            out.status.code()
        );
        assert!(err.contains(ranks), "{mode}: expected {ranks:?} in {err}");
        assert!(!err.contains("dropped"), "{mode}: {err}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("main goes on"), "{mode}: {stdout}");
    }
}

#[test]
fn a_failing_rank_ends_every_rank_with_its_line() {
    let exe = build("failures.c", "failures", &[], Link::Shared);
    for (mode, needle) in [
        (
            "abort",
            "bsp_abort (pid 2, superstep 1): aborted: input matrix.mtx is broken (code 42)",
        ),
        (
            "bounds",
            "bsp_put (pid 1, superstep 1): to pid 3: offset 8 + 16 bytes exceeds the 16 bytes pid 3 registered",
        ),
        (
            "tagsize",
            "set_tagsize differs between processes in superstep 1: pid 0 asked for 4 bytes, pid 2 asked for 8 bytes",
        ),
    ] {
        let out = run_ranks(4, &exe, &[mode]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{mode}: {err}");
        assert!(err.contains(needle), "{mode}: expected {needle:?} in {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("should not get here"));
    }
}

/// [`run`] (`ranks` = None) or [`run_ranks`] with `input` on stdin (under `mpiexec`, rank 0's).
fn run_input(exe: &Path, args: &[&str], input: &str, ranks: Option<usize>) -> Output {
    use std::io::Write;
    let (secs, wrapper) = wrapped(if ranks.is_some() { 120 } else { 60 });
    let mut cmd = Command::new("timeout");
    cmd.arg(secs);
    if let Some(n) = ranks {
        cmd.args(["mpiexec", "-n", &n.to_string()]);
    }
    let mut child = cmd
        .args(wrapper)
        .arg(exe)
        .args(args)
        .env_clear_mbsp()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run (mpiexec: install MPICH, as scripts/setup does)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert_ne!(
        out.status.code(),
        Some(124),
        "{} {args:?} ({ranks:?} ranks) with input {input:?} hung",
        exe.display()
    );
    out
}

/// BSPedupack's shape: main's sequential part reads P and n on stdin, bsp_init's SPMD function
/// begins P processes. Over MPI ranks, only rank 0 runs that part (the others go from bsp_init
/// into the SPMD function) and bsp_begin takes rank 0's P: the results are those of threads.
#[test]
fn parameters_read_by_pid_0_in_main_over_threads_and_ranks() {
    let exe = build("stdin_params.c", "stdin_params", &[], Link::Shared);
    let n = 20_000;
    let inprod = |p: usize| format!("inprod p={p} n={n}: 2666866670000 = n(n+1)(2n+1)/6");
    // The checksum of the keys is the same for every p (the keys depend on n only).
    let sort = |p: usize| format!("sort p={p} n={n}: ok, checksum ");
    let check = |out: &Output, p: usize, what: &str| {
        let text = ok(out);
        for line in [
            inprod(p),
            sort(p),
            "How many processes".into(),
            "main goes on".into(),
        ] {
            assert_eq!(
                text.matches(&line).count(),
                1,
                "{what}: {line:?} once in {text}"
            );
        }
        text.lines()
            .find(|l| l.starts_with("sort "))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap()
            .to_string()
    };
    let input = |p: usize| format!("{p}\n{n}\n");
    let sum = check(&run_input(&exe, &[], &input(1), None), 1, "1 thread");
    for p in [2, 3] {
        let got = check(&run_input(&exe, &[], &input(p), None), p, "threads");
        assert_eq!(got, sum, "p = {p} threads");
    }
    for (ranks, p) in [(2, 2), (3, 2)] {
        let what = format!("{ranks} ranks, P = {p}");
        let got = check(&run_input(&exe, &[], &input(p), Some(ranks)), p, &what);
        assert_eq!(got, sum, "{what}");
    }
}

/// bsp.hpp: mcbsp::BSP_program as MulticoreBSP for C's C++ users write it.
#[test]
fn cxx_bsp_program_class() {
    // MulticoreBSP's example, unchanged: two runs one after the other.
    let hello_exe = build("hello_world_cpp.cpp", "hello_world_cpp", &[], Link::Shared);
    let out = ok(&run(&hello_exe, &[], &[("MBSP_MAX_THREADS", "3")]));
    let (first, second) = out
        .split_once("In-between parallel part...\n")
        .unwrap_or_else(|| panic!("{out}"));
    // The processes' `std::cout << ... << pid << "\n"` interleave: count the greetings and
    // collect the pids printed among them.
    let hello = "Hello world from thread ";
    for (text, pids) in [(first, "01"), (second, "012")] {
        assert_eq!(text.matches(hello).count(), pids.len(), "{out}");
        let mut got: Vec<char> = text
            .replace(hello, "")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        got.sort_unstable();
        assert_eq!(got.into_iter().collect::<String>(), pids, "{out}");
    }
    // Per-process objects, communication, nested programs begun by every process at once;
    // with exceptions and without (bsp_end then leaves by longjmp).
    for (name, flags) in [
        ("cxx_program", &[][..]),
        ("cxx_program-noexcept", &["-fno-exceptions"][..]),
    ] {
        let exe = build("cxx_program.cpp", name, flags, Link::Shared);
        assert!(ok(&run(&exe, &["threads"], &[])).contains("c++ program ok"));
        assert!(ok(&run(&exe, &["4"], &[])).contains("gather p=4 sum=64\nmain goes on"));
    }
    // Over MPI ranks: one begin runs over the ranks (the others end at its bsp_end, so main
    // goes on once); a second top-level begin is refused with a line saying why.
    let exe = build("cxx_program.cpp", "cxx_program", &[], Link::Shared);
    let out = ok(&run_ranks(2, &exe, &["2"]));
    assert_eq!(out.matches("gather p=2 sum=12").count(), 1, "{out}");
    assert_eq!(out.matches("main goes on").count(), 1, "{out}");
    let out = run_ranks(2, &hello_exe, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    // mpiexec reports the refusing rank's exit status (1), or 9 when it had to kill a rank
    // that was still running when the first one ended.
    assert!(
        matches!(out.status.code(), Some(1 | 9)),
        "{:?}: {err}",
        out.status
    );
    assert!(
        err.contains("mbsp: bsp_begin: over MPI ranks a program has one top-level SPMD section"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("In-between parallel part..."));
}
