//! `mbsp spmv` as a user runs it: the result checked against sequential CSR, the JSON keys,
//! and a clear exit status 2 for bad arguments.

use std::path::PathBuf;
use std::process::Command;

fn matrix(name: &str) -> PathBuf {
    [
        std::env::var_os("MBSP_DATA_DIR").map(PathBuf::from),
        Some(PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/data"
        ))),
        Some(PathBuf::from("/work/shared/data")),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join("matrices").join(name))
    .find(|f| f.is_file())
    .expect("shared data missing: set MBSP_DATA_DIR")
}

#[test]
fn json_result_checked_against_sequential() {
    for p in ["1", "3"] {
        let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
            .args([
                "spmv",
                matrix("rajat01.mtx").to_str().unwrap(),
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
    let m = matrix("rajat01.mtx");
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
