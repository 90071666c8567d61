//! `mbsp spmv` as a user runs it: the result checked against sequential CSR, the JSON keys,
//! and a clear exit status 2 for bad arguments.

mod common;

use std::process::Command;

#[test]
fn json_result_checked_against_sequential() {
    for p in ["1", "3"] {
        let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
            .args([
                "spmv",
                common::matrix("rajat01.mtx").to_str().unwrap(),
                "-p",
                p,
                "--reps",
                "10",
                "--json",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for key in [
            "matrix",
            "p",
            "variant",
            "mflops",
            "speedup",
            "max_rel_error",
            "partition_seconds",
        ] {
            assert!(v.get(key).is_some(), "missing {key}: {v}");
        }
        assert_eq!(v["p"].as_u64().unwrap().to_string(), p);
        assert!(v["max_rel_error"].as_f64().unwrap() <= 1e-12);
    }
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    let m = common::matrix("rajat01.mtx");
    for args in [vec!["-p", "0"], vec!["--variant", "fancy"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
            .arg("spmv")
            .arg(&m)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.lines().last().unwrap().starts_with("mbsp spmv: "),
            "{err}"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(["spmv", "/nonexistent.mtx"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
