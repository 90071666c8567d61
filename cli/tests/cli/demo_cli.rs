//! `mbsp demo` (and `mbsp` without arguments) as a user runs it: every section, verified
//! results, predictions beside measurements; on this machine and on a synthetic 2-package tree.

use crate::common;

use std::process::Command;

fn demo(env: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(["demo", "--quick"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("measuring r, l and g"),
        "progress: {stderr}"
    );
    for want in [
        "== The machine tree",
        "policy scattered:",
        "policy compact:",
        "l flop",
        "sequential rustfft",
        "sequential CSR",
        "BSP prediction",
        "all results verified",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    stdout
}

#[test]
fn quick_demo_on_this_machine() {
    let out = demo(&[]);
    // Both SpMV variants ran and were checked.
    assert!(
        out.contains("plain p =") && out.contains("hp    p ="),
        "{out}"
    );
}

#[test]
fn quick_demo_on_two_packages_measures_both_levels_and_nests() {
    let out = demo(&[("MBSP_TOPOLOGY", "synthetic:package:2 core:2 pu:1")]);
    assert!(out.contains("): 2 packages, "), "{out}");
    assert!(
        out.contains("\nmachine  scattered") && out.contains("\npackage  scattered"),
        "{out}"
    );
    // The nested placement shows the second package's cores under its process.
    assert!(out.contains("pid 1/1:"), "{out}");
    assert!(out.contains("nested p = 4"), "the nested FFT: {out}");
}

#[test]
fn help_lists_the_demo_and_params() {
    let (code, out, _) = common::mbsp(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("demo") && out.contains("params"), "{out}");
}
