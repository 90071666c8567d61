//! `mbsp spmv` as a user runs it: the result checked against sequential CSR, the JSON keys,
//! and a clear exit status 2 for bad arguments.

use crate::common;

use std::process::Command;

#[test]
fn json_result_checked_against_sequential() {
    let m = common::matrix("rajat01.mtx");
    for p in ["1", "3"] {
        let v = spmv_json(&[m.to_str().unwrap(), "-p", p], &[]);
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
    // An input file that cannot be read: status 3.
    assert_eq!(out.status.code(), Some(3));
}

/// Runs `mbsp spmv` with `args` (and `env`), expects success and returns the JSON object.
fn spmv_json(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .arg("spmv")
        .args(args)
        .args(["--reps", "20", "--json"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["max_rel_error"].as_f64().unwrap() <= 1e-12, "{v}");
    v
}

#[test]
fn every_variant_checked_against_sequential() {
    let m = common::matrix("bayer10.mtx");
    let m = m.to_str().unwrap();
    for variant in ["plain", "hp", "shared", "hier"] {
        for p in ["1", "2", "3"] {
            let v = spmv_json(&[m, "-p", p, "--variant", variant], &[]);
            assert_eq!(v["variant"], variant);
        }
    }
}

#[test]
fn hier_follows_the_packages_of_the_machine() {
    // Synthetic machines with 2 and 4 packages (oversubscribed here, which is fine).
    let m = common::matrix("rajat01.mtx");
    let m = m.to_str().unwrap();
    for (tree, p, packages) in [
        ("synthetic:package:2 core:2 pu:1", "4", 2),
        ("synthetic:package:4 core:2 pu:1", "8", 4),
        ("synthetic:package:4 core:2 pu:1", "2", 2),
    ] {
        let v = spmv_json(
            &[m, "-p", p, "--variant", "hier"],
            &[("MBSP_TOPOLOGY", tree)],
        );
        assert_eq!(
            v["packages"].as_u64(),
            Some(packages),
            "{tree}, p = {p}: {v}"
        );
        let cores = v["cores_per_package"].as_u64().unwrap();
        assert_eq!(packages * cores, p.parse::<u64>().unwrap());
    }
}

#[test]
fn partition_from_mondriaan_files() {
    let dir = std::env::temp_dir().join(format!("mbsp-spmv-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("rajat01");
    let m = common::matrix("rajat01.mtx");
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .arg("partition")
        .arg(&m)
        .args(["-p", "3", "--out"])
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (m, pre) = (m.to_str().unwrap(), prefix.to_str().unwrap());
    for variant in ["plain", "hp"] {
        let v = spmv_json(
            &[m, "-p", "3", "--variant", variant, "--partition", pre],
            &[],
        );
        assert_eq!(v["partition_seconds"].as_f64(), Some(0.0));
    }
    // The files belong to another matrix (status 2), or do not exist for this p (status 3): one
    // clear line.
    for (file, p, says, status) in [
        ("bayer10.mtx", "3", "the partition is for another matrix", 2),
        ("rajat01.mtx", "2", "rajat01-P2", 3),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
            .arg("spmv")
            .arg(common::matrix(file))
            .args(["-p", p, "--partition", pre])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(status));
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap();
        assert!(
            last.starts_with("mbsp spmv: ") && last.contains(says),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A matrix with NaN and infinite entries: both multiplies give the same NaNs and infinities,
/// which is a correct result (it used to exit 2 with "max relative error inf").
#[test]
fn nan_and_infinite_entries_give_a_correct_result() {
    let dir = common::scratch("spmv_cli", "nan");
    let file = dir.join("nan.mtx");
    std::fs::write(
        &file,
        "%%MatrixMarket matrix coordinate real general\n4 4 6\n\
         1 1 nan\n1 2 1\n2 2 inf\n3 3 2\n4 1 -inf\n4 4 1\n",
    )
    .unwrap();
    for p in ["1", "2"] {
        let v = spmv_json(&[file.to_str().unwrap(), "-p", p], &[]);
        assert_eq!(v["max_rel_error"].as_f64(), Some(0.0), "-p {p}: {v}");
    }
}
