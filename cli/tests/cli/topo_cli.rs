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
        .env_remove("MBSP_AFFINITY")
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

/// A plan that stacks processes on a core is marked: per process (`stacked: n processes on its
/// core`, JSON `per_core`), and once with a warning naming the run, its cores and what to do
/// (JSON `stacked`). Compact nesting stacks (a process owns one core); scattered does not.
#[test]
fn plans_that_stack_processes_on_a_core_are_marked() {
    let tree = "package:2 core:4 pu:1";
    let (code, out, err) = mbsp(
        &[
            "topo",
            "--synthetic",
            tree,
            "-p",
            "1",
            "--nest",
            "2",
            "--policy",
            "compact",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "    pid 0/1: package 0, NUMA -, cores 0, PUs 0 (stacked: 2 processes on its core)\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("  pid 0: package 0, NUMA -, cores 0, PUs 0\n"),
        "the top-level process has its core: {out}"
    );
    let warning = "warning: the run nested in pid 0 puts its 2 processes on 1 core (core 0, up \
                   to 2 on one core): the compact policy gives each process one core, so a run \
                   nested in it shares that core; use --policy scattered (each process then owns \
                   a share of the machine to nest in), or nest at most 1 in it\n";
    assert!(out.ends_with(warning), "{out}");

    // Two packages, 2 x 4 compact: both nested runs stack, one warning says so.
    let (code, out, _) = mbsp(
        &[
            "topo",
            "--synthetic",
            tree,
            "-p",
            "2",
            "--nest",
            "4",
            "--policy",
            "compact",
        ],
        &[],
    );
    assert_eq!(code, 0);
    assert_eq!(out.matches("(stacked: 4 processes on its core)").count(), 8);
    assert_eq!(out.matches("warning:").count(), 1, "{out}");
    assert!(out.contains("(1 more run of the plan stacks too)"), "{out}");
    let v = json(&[
        "topo",
        "--synthetic",
        tree,
        "-p",
        "2",
        "--nest",
        "4",
        "--policy",
        "compact",
        "--json",
    ]);
    assert_eq!(
        v["stacked"],
        serde_json::json!([
            {"parent": [0], "processes": 4, "cores": [0], "most": 4},
            {"parent": [1], "processes": 4, "cores": [1], "most": 4},
        ])
    );
    assert_eq!(v["processes"][1]["children"][3]["per_core"], 4);
    assert!(v["processes"][1].get("per_core").is_none());

    // Scattered: a package each, a core each inside. Nothing stacks, nothing is marked.
    let (code, out, _) = mbsp(
        &["topo", "--synthetic", tree, "-p", "2", "--nest", "4"],
        &[],
    );
    assert_eq!(code, 0);
    assert!(
        !out.contains("stacked") && !out.contains("warning"),
        "{out}"
    );
    let v = json(&[
        "topo",
        "--synthetic",
        tree,
        "-p",
        "2",
        "--nest",
        "4",
        "--json",
    ]);
    assert_eq!(v["stacked"], serde_json::json!([]));
    // More top-level processes than cores: the top level stacks.
    let (_, out, _) = mbsp(&["topo", "--synthetic", tree, "-p", "12"], &[]);
    assert!(
        out.contains(
            "warning: the top-level run puts its 12 processes on 8 cores (cores 0-7, up to 2 on \
             one core): more processes than the machine has cores"
        ),
        "{out}"
    );
}

/// The plan's policy as a run would take it: `MBSP_AFFINITY=force:...` first, then `--policy`,
/// then `MBSP_AFFINITY`, then scattered; the header and the JSON say where it came from.
#[test]
fn the_policy_comes_from_the_option_or_the_environment_as_for_a_run() {
    let tree = "package:2 core:2 pu:1";
    // (environment, --policy) -> (policy, where from, pid 1's place).
    type Case = (
        Option<&'static str>,
        Option<&'static str>,
        &'static str,
        &'static str,
        &'static str,
    );
    let cases: [Case; 7] = [
        (
            None,
            None,
            "scattered",
            "default",
            "package 1, NUMA -, cores 2-3",
        ),
        (
            None,
            Some("compact"),
            "compact",
            "option",
            "package 0, NUMA -, cores 1",
        ),
        (
            Some("compact"),
            None,
            "compact",
            "environment",
            "package 0, NUMA -, cores 1",
        ),
        (
            Some("compact"),
            Some("scattered"),
            "scattered",
            "option",
            "package 1, NUMA -, cores 2-3",
        ),
        (
            Some("force:compact"),
            Some("scattered"),
            "compact",
            "forced",
            "package 0, NUMA -, cores 1",
        ),
        (
            Some("force:manual:3;0"),
            Some("compact"),
            "manual",
            "forced",
            "package 0, NUMA -, cores 0",
        ),
        (
            Some("none"),
            None,
            "scattered",
            "environment",
            "package 1, NUMA -, cores 2-3",
        ),
    ];
    for (env, option, policy, from, place) in cases {
        let mut args = vec!["topo", "--synthetic", tree, "-p", "2"];
        if let Some(o) = option {
            args.extend(["--policy", o]);
        }
        let vars: Vec<(&str, &str)> = env.map(|e| ("MBSP_AFFINITY", e)).into_iter().collect();
        let (code, out, err) = mbsp(&args, &vars);
        assert_eq!(code, 0, "{env:?} {option:?}: {err}");
        let note = match (from, env) {
            ("forced", Some(e)) => format!(" (MBSP_AFFINITY={e}, before --policy)"),
            ("environment", Some(e)) => format!(" (MBSP_AFFINITY={e})"),
            _ => String::new(),
        };
        let header = format!(
            "plan: 2 processes (2), policy {policy}{note}, planned only (not this machine)\n"
        );
        assert!(out.contains(&header), "{env:?} {option:?}: {out}");
        assert!(
            out.contains(&format!("  pid 1: {place}, ")),
            "{env:?} {option:?}: {out}"
        );
        args.push("--json");
        let (_, out, _) = mbsp(&args, &vars);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            (v["policy"].as_str(), v["policy_from"].as_str()),
            (Some(policy), Some(from))
        );
    }
    // On this machine, MBSP_AFFINITY=none says runs are not bound.
    let (_, out, _) = mbsp(&["topo", "-p", "1"], &[("MBSP_AFFINITY", "none")]);
    assert!(
        out.contains("policy scattered (MBSP_AFFINITY=none), not bound (MBSP_AFFINITY=none)\n"),
        "{out}"
    );
    let (code, _, err) = mbsp(&["topo", "-p", "1"], &[("MBSP_AFFINITY", "force:spread")]);
    assert_eq!(code, 2);
    assert!(
        err.contains("MBSP_AFFINITY=\"force:spread\" is not understood"),
        "{err}"
    );
}
