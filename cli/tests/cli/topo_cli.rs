//! `mbsp topo` as a user runs it: plans of real multi-socket machines, JSON shape, errors.

use crate::common;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn data_dir() -> PathBuf {
    common::shared("topologies")
}

fn xml(name: &str) -> String {
    let p = data_dir().join(name);
    assert!(p.is_file(), "test data missing: {}", p.display());
    p.to_string_lossy().into_owned()
}

fn mbsp(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run mbsp");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn json(args: &[&str]) -> Value {
    let (code, out, err) = mbsp(args, &[]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn scattered_nested_plan_on_a_two_socket_xeon() {
    let f = xml("hwloc_32em64t-2n8c2t-pci-normalio.xml");
    let v = json(&[
        "topo",
        "--xml",
        &f,
        "--policy",
        "scattered",
        "-p",
        "4",
        "--nest",
        "core",
        "--json",
    ]);
    assert_eq!(v["applied"], false);
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 4);
    let packages: Vec<i64> = procs
        .iter()
        .map(|p| p["package"].as_i64().unwrap())
        .collect();
    assert_eq!(packages, vec![0, 1, 0, 1]);
    assert_eq!(
        procs[1]["pus"],
        serde_json::json!([8, 9, 10, 11, 24, 25, 26, 27])
    );
    for p in procs {
        let kids = p["children"].as_array().unwrap();
        assert_eq!(kids.len(), 4, "one nested process per core of the share");
        for (i, k) in kids.iter().enumerate() {
            assert_eq!(k["pid"], i);
            assert_eq!(k["cores"].as_array().unwrap().len(), 1);
            assert_eq!(
                k["pus"].as_array().unwrap().len(),
                2,
                "a core's two hyperthreads"
            );
            assert!(k.get("children").is_none());
        }
    }
}

#[test]
fn compact_plan_fills_the_first_package_first() {
    let f = xml("mpibind_epyc-corona.xml");
    let v = json(&[
        "topo", "--xml", &f, "--policy", "compact", "-p", "30", "--json",
    ]);
    let procs = v["processes"].as_array().unwrap();
    let pkg: Vec<i64> = procs
        .iter()
        .map(|p| p["package"].as_i64().unwrap())
        .collect();
    assert!(
        pkg[..24].iter().all(|&x| x == 0) && pkg[24..].iter().all(|&x| x == 1),
        "{pkg:?}"
    );
    // One NUMA node (6 cores) is filled before the next.
    assert_eq!(procs[5]["numa"], procs[0]["numa"]);
    assert_ne!(procs[6]["numa"], procs[0]["numa"]);
}

#[test]
fn one_process_per_numa_node_then_per_core() {
    let f = xml("mpibind_epyc-corona.xml");
    let v = json(&[
        "topo", "--xml", &f, "-p", "numa", "--nest", "core", "--json",
    ]);
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 8);
    assert!(
        procs
            .iter()
            .all(|p| p["children"].as_array().unwrap().len() == 6)
    );
    let numas: Vec<i64> = procs.iter().map(|p| p["numa"].as_i64().unwrap()).collect();
    assert_eq!(numas, (0..8).collect::<Vec<i64>>());
}

#[test]
fn human_readable_output_names_the_machine_and_the_plan() {
    let f = xml("hwloc_16amd64-4distances.xml");
    let (code, out, _) = mbsp(&["topo", "--xml", &f, "-p", "3"], &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("8 packages, 8 NUMA nodes, 16 cores, 16 PUs"),
        "{out}"
    );
    assert!(out.contains("planned only (not this machine)"), "{out}");
    assert!(out.contains("pid 2: package"), "{out}");
}

#[test]
fn errors_are_clear_and_exit_non_zero() {
    // A file that cannot be read: status 3; bad arguments: status 2.
    let cases: &[(&[&str], &str, i32)] = &[
        (
            &["topo", "--xml", "/no/such/machine.xml"],
            "cannot load topology from XML file /no/such/machine.xml",
            3,
        ),
        (
            &["topo", "--synthetic", "package:2 blob:3"],
            "invalid synthetic topology \"package:2 blob:3\"",
            2,
        ),
        (
            &[
                "topo",
                "--synthetic",
                "package:2 core:2 pu:1",
                "--policy",
                "manual",
                "--cpus",
                "0;9",
                "-p",
                "2",
            ],
            "names CPU 9, which does not exist",
            2,
        ),
        (&["topo", "-p", "0"], "-p must be at least 1", 2),
        (
            &["topo", "--policy", "manual", "-p", "1"],
            "--policy manual needs --cpus",
            2,
        ),
    ];
    for &(args, msg, status) in cases {
        let (code, _, err) = mbsp(args, &[]);
        assert_eq!(code, status, "{args:?}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

#[test]
fn the_environment_variable_selects_the_machine() {
    let (code, out, err) = mbsp(
        &["topo"],
        &[("MBSP_TOPOLOGY", "synthetic:package:3 core:2 pu:1")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("synthetic \"package:3 core:2 pu:1\""), "{out}");
    let (code, _, err) = mbsp(&["topo"], &[("MBSP_TOPOLOGY", "nonsense")]);
    assert_eq!(code, 2);
    assert!(
        err.contains("MBSP_TOPOLOGY=\"nonsense\" is not understood"),
        "{err}"
    );
    // hwloc's own variables give a fake machine, reported as such.
    let (code, out, _) = mbsp(&["topo"], &[("HWLOC_SYNTHETIC", "package:2 core:2 pu:1")]);
    assert_eq!(code, 0);
    assert!(out.contains("hwloc environment"), "{out}");
}

#[test]
fn synthetic_trees_without_numa_level_say_so() {
    let d = "package:2 core:2 pu:1";
    let (code, out, _) = mbsp(&["topo", "--synthetic", d, "-p", "2"], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("2 packages, no NUMA level, 4 cores"), "{out}");
    assert!(out.contains("pid 0: package 0, NUMA -, cores 0-1"), "{out}");
    assert!(out.contains("pid 1: package 1, NUMA -, cores 2-3"), "{out}");
    assert!(!out.contains("NUMA 0"), "{out}");
    let v = json(&["topo", "--synthetic", d, "-p", "2", "--json"]);
    assert_eq!(v["machine"]["numa_level"], Value::Bool(false));
    let procs = v["processes"].as_array().unwrap();
    assert!(procs.iter().all(|p| p["numa"].is_null()), "{v}");
    // With a NUMA level, the same shape names its nodes.
    let v = json(&[
        "topo",
        "--synthetic",
        "package:2 numa:1 core:2 pu:1",
        "-p",
        "2",
        "--json",
    ]);
    let numas: Vec<i64> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["numa"].as_i64().unwrap())
        .collect();
    assert_eq!(numas, vec![0, 1]);
}
