//! Each example runs to completion (they check their own results) with a few process counts,
//! including more processes than hardware threads.

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("start example");
    assert!(
        out.status.success(),
        "{bin} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn hello() {
    let out = run(env!("CARGO_BIN_EXE_hello"), &["3"]);
    assert_eq!(out.lines().count(), 3);
    assert!(out.contains("Hello BSP Worldwide from process 2 of 3"));
}

#[test]
fn inner_product() {
    for p in ["1", "3", "8"] {
        let out = run(env!("CARGO_BIN_EXE_inner_product"), &["10000", p]);
        assert!(out.contains(&format!("p = {p}")));
    }
}

#[test]
fn reverse() {
    let out = run(env!("CARGO_BIN_EXE_reverse"), &["5"]);
    assert!(out.contains("process 0 now holds 104"));
}

#[test]
fn put_array() {
    for p in ["1", "2", "4", "8"] {
        run(env!("CARGO_BIN_EXE_put_array"), &["4096", p]);
    }
}

#[test]
fn put_array_aborts_on_indivisible_sizes() {
    let out = Command::new(env!("CARGO_BIN_EXE_put_array"))
        .args(["10", "3"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("put_array: n=10 not divisible by p=3"),
        "{err}"
    );
}

#[test]
fn sparse_allgather() {
    for p in ["1", "3", "6"] {
        let out = run(env!("CARGO_BIN_EXE_sparse_allgather"), &["1000", p]);
        assert!(out.contains("143 nonzeros on every process"), "{out}");
    }
}

#[test]
fn programs_honour_the_topology_and_affinity_variables() {
    // A fake 4-socket machine: the run is planned on it and nothing is bound.
    for (var, val) in [
        ("MBSP_TOPOLOGY", "synthetic:package:4 numa:2 core:4 pu:2"),
        ("MBSP_AFFINITY", "compact"),
        ("MBSP_AFFINITY", "none"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_inner_product"))
            .args(["1000", "6"])
            .env(var, val)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{var}={val}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_hello"))
        .arg("2")
        .env("MBSP_AFFINITY", "sideways")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("MBSP_AFFINITY=\"sideways\" is not understood")
    );
}

#[test]
fn scan() {
    for p in ["1", "3", "8"] {
        let out = run(env!("CARGO_BIN_EXE_scan"), &["100003", p]);
        assert!(out.contains("prefix sums correct"), "{out}");
    }
}

#[test]
fn heat() {
    for p in ["1", "2", "5"] {
        let out = run(env!("CARGO_BIN_EXE_heat"), &["1001", p, "200"]);
        assert!(out.contains("matches the sequential stencil"), "{out}");
    }
    // More processes than cells: empty blocks are skipped by the halo exchange.
    run(env!("CARGO_BIN_EXE_heat"), &["3", "5", "10"]);
}

#[test]
fn checkpoint_heat() {
    for p in ["1", "3"] {
        let dir =
            std::env::temp_dir().join(format!("mbsp-example-ckpt-{p}-{}", std::process::id()));
        let out = run(
            env!("CARGO_BIN_EXE_checkpoint_heat"),
            &["2001", p, "120", dir.to_str().unwrap()],
        );
        assert!(out.contains("resumed at step 74 (superstep 150)"), "{out}");
        assert!(
            out.contains("equals the uninterrupted run's, bit for bit"),
            "{out}"
        );
        assert!(!dir.exists(), "the example removes its folder");
    }
}

#[test]
fn nested_reduce() {
    let out = run(env!("CARGO_BIN_EXE_nested_reduce"), &["100000"]);
    assert!(out.contains("agree on the sum"), "{out}");
    for tree in [
        "synthetic:package:2 core:2 pu:1",
        "synthetic:package:4 core:3 pu:1",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_nested_reduce"))
            .arg("100000")
            .env("MBSP_TOPOLOGY", tree)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let packages = tree[18..19].parse::<usize>().unwrap();
        assert!(
            text.contains(&format!("{packages} packages agree")),
            "{text}"
        );
    }
}

#[test]
fn spectral() {
    for p in ["1", "2", "8"] {
        let out = run(env!("CARGO_BIN_EXE_spectral"), &["4096", p]);
        assert!(
            out.contains("max error of the spectral derivative"),
            "{out}"
        );
    }
}

#[test]
fn spectral_heat() {
    for p in ["1", "2", "4"] {
        let out = run(env!("CARGO_BIN_EXE_spectral_heat"), &["1024", p, "50"]);
        assert!(out.contains(&format!("p = {p}, 50 steps")), "{out}");
    }
}

#[test]
fn cg() {
    // The default matrix (bcsstk16) with the shared data found the usual ways.
    let out = run(env!("CARGO_BIN_EXE_cg"), &[]);
    assert!(out.contains("ok: matches sequential CG"), "{out}");
    let matrix = out.split(':').next().unwrap().to_string();
    // Each process count once and each variant oversubscribed (every run partitions the
    // matrix anew: most of its time).
    for (p, variant) in [("1", "hp"), ("3", "plain"), ("4", "hp")] {
        let out = run(
            env!("CARGO_BIN_EXE_cg"),
            &[&matrix, p, "1e-10", "20000", variant],
        );
        assert!(
            out.contains(&format!("p = {p}:")) && out.contains("ok: matches sequential CG"),
            "{variant}: {out}"
        );
    }
    // A rectangular matrix is refused with a clear message and a failure status.
    let rect = std::path::Path::new(&matrix).with_file_name("Maragal_6.mtx.gz");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cg"))
        .arg(&rect)
        .arg("2")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CG needs a square matrix"));
}

/// A bad argument ends an example at once: exit status 2 and one line that names it and says
/// what the program takes (no panic, no backtrace).
#[test]
fn bad_arguments_exit_2_with_one_line() {
    for (bin, args, usage) in [
        (
            env!("CARGO_BIN_EXE_heat"),
            ["1000", "2x"],
            "heat [N] [P] [STEPS]",
        ),
        (env!("CARGO_BIN_EXE_scan"), ["-5", "2"], "scan [N] [P]"),
    ] {
        let out = Command::new(bin)
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bin} {args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let bad = if args[0] == "1000" {
            "\"2x\""
        } else {
            "\"-5\""
        };
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(bad) && err.contains(usage), "{err}");
        assert!(out.stdout.is_empty(), "{bin} {args:?}");
    }
}

/// Examples that take files and words: a bad argument ends them with one line and status 2, a
/// failure (a file that is not there) with one line naming it and status 1, never a `Debug`
/// dump of the error.
#[test]
fn failures_and_bad_words_end_with_one_line() {
    let run = |bin: &str, args: &[&str]| {
        let out = Command::new(bin).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(err.lines().count(), 1, "{bin} {args:?}: {err}");
        assert!(!err.contains(" { "), "a Debug dump: {err}");
        (out.status.code(), err)
    };
    let cg = env!("CARGO_BIN_EXE_cg");
    let (code, err) = run(cg, &["/nonexistent/a.mtx"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.starts_with("cg: /nonexistent/a.mtx: "), "{err}");
    let (code, err) = run(cg, &["/nonexistent/a.mtx", "2x"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("\"2x\" is not a process count (usage: cg [MATRIX] [P]"),
        "{err}"
    );
    let (code, err) = run(cg, &["/nonexistent/a.mtx", "2", "1e-9", "10", "fast"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("variant \"fast\""), "{err}");
    let heat = env!("CARGO_BIN_EXE_checkpoint_heat");
    let (code, err) = run(heat, &["100", "2", "ten"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("\"ten\" is not a number of steps"), "{err}");
}
