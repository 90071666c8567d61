//! `mbsp fft` as a user runs it: flat and nested, JSON shape, bad arguments.

use serde_json::Value;
use std::process::Command;

fn mbsp(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("start mbsp");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn one_transform_as_json() {
    for args in [
        &["fft", "--n", "4096", "-p", "2", "--json"][..],
        &["fft", "--n", "1024", "-p", "1", "--inverse", "--json"],
    ] {
        let (code, out, err) = mbsp(args, &[]);
        assert_eq!(code, 0, "{args:?}: {err}");
        let j: Value = serde_json::from_str(&out).expect("JSON");
        for key in [
            "n",
            "p",
            "variant",
            "seconds",
            "gflops",
            "rel_error",
            "choice",
        ] {
            assert!(j.get(key).is_some(), "{args:?}: no {key} in {out}");
        }
        assert!(j["rel_error"].as_f64().unwrap() < 1e-12, "{out}");
        assert_eq!(j["variant"], "flat");
    }
}

#[test]
fn nested_on_a_two_package_tree() {
    let (code, out, err) = mbsp(
        &["fft", "--n", "16384", "--nested", "--json"],
        &[("MBSP_TOPOLOGY", "synthetic:package:2 core:2 pu:1")],
    );
    assert_eq!(code, 0, "{err}");
    let j: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(j["variant"], "nested");
    assert_eq!(j["p"], 4);
    assert_eq!(j["levels"], serde_json::json!([2, 2]));
    assert!(j["rel_error"].as_f64().unwrap() < 1e-12);
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    for (args, needle) in [
        (&["fft", "--n", "1000"][..], "not a power of two"),
        (
            &["fft", "--n", "1024", "-p", "3"],
            "-p 3 is not a power of two",
        ),
        (&["fft", "--n", "4", "-p", "8"], "exceed n = 4"),
    ] {
        let (code, _, err) = mbsp(args, &[]);
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
}
