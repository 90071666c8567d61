//! `mbsp params` as a user runs it: the JSON file the cost functions read, the levels of the
//! machine tree (synthetic trees too), the plot, exit status 2 for bad arguments and 3 for a file that cannot be written.

use crate::common;

use std::process::Command;

/// Runs `mbsp params --quick` with `args` and `env`, returns the JSON file it wrote.
fn params_json(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let json = dir.join("params.json");
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(["params", "--quick", "--json", json.to_str().unwrap()])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("measuring the machine level"),
        "progress: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("r Mflop/s") && stdout.contains("l flop"),
        "{stdout}"
    );
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

fn positive(v: &serde_json::Value, key: &str) -> f64 {
    let x = v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"));
    assert!(x.is_finite() && x > 0.0, "{key} = {x}");
    x
}

/// A fitted slope: 0 when the fit came out flat (noise below the fit's resolution: gets in
/// cache over the quick run's small h, on a loaded machine).
fn slope(v: &serde_json::Value, key: &str) -> f64 {
    let x = v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"));
    assert!(x.is_finite() && x >= 0.0, "{key} = {x}");
    x
}

#[test]
fn writes_what_the_cost_functions_read() {
    let dir = common::scratch("params_cli", "cost_functions");
    let svg = dir.join("params.svg");
    let v = params_json(&dir, &["--plot", svg.to_str().unwrap()], &[]);
    for key in ["r", "l"] {
        positive(&v, key);
    }
    for key in ["g", "g_direct", "fresh"] {
        slope(&v, key);
    }
    // The cost functions take the file as it is (serde_json's default float parsing may be
    // off by an ulp).
    let p = mbsp_algorithms::cost::Params::from_json(&v.to_string()).unwrap();
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
    assert!(same(p.l, v["l"].as_f64().unwrap()), "{p:?}");
    assert!(same(p.g, v["g"].as_f64().unwrap()), "{p:?}");
    let levels = v["levels"].as_array().unwrap();
    let policies: Vec<&str> = levels
        .iter()
        .map(|l| l["policy"].as_str().unwrap())
        .collect();
    assert!(policies.contains(&"scattered") && policies.contains(&"compact"));
    for l in levels {
        assert!(l["p"].as_u64().unwrap() >= 1);
        for key in ["r", "r_daxpy", "r_dense", "l"] {
            positive(l, key);
        }
        for key in ["g_put1", "g_put", "g_get", "g_send1"] {
            slope(l, key);
        }
        for prim in ["put1", "put", "get", "send1", "direct"] {
            let fit = &l["fits"][prim];
            // h = 0, 256, 512, 768, 1024 in the quick run.
            let hs: Vec<f64> = fit["points"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p[0].as_f64().unwrap())
                .collect();
            assert_eq!(hs, [0.0, 256.0, 512.0, 768.0, 1024.0], "{prim}");
            assert!(fit["residual"].as_f64().unwrap() >= 0.0);
        }
    }
    let plot = std::fs::read_to_string(svg).unwrap();
    assert!(
        plot.starts_with("<svg") && plot.contains("put1: g ="),
        "not the plot"
    );
}

#[test]
fn every_level_of_a_synthetic_tree() {
    let dir = common::scratch("params_cli", "synthetic");
    let v = params_json(
        &dir,
        &[],
        &[("MBSP_TOPOLOGY", "synthetic:package:2 core:2 pu:2")],
    );
    let levels: Vec<(String, u64)> = v["levels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["policy"] == "scattered")
        .map(|l| {
            (
                l["level"].as_str().unwrap().to_string(),
                l["p"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [("machine", 4), ("packages", 2), ("package", 2), ("core", 2)]
        .map(|(l, p)| (l.to_string(), p));
    assert_eq!(levels, want);
}

/// Each level and policy measured once per round, in an order the seed repeats; the file
/// says how many rounds and which seed.
#[test]
fn rounds_measure_every_configuration_once_in_the_seeds_order() {
    let dir = common::scratch("params_cli", "rounds");
    let json = dir.join("params.json");
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
            .args(["params", "--quick", "--levels", "machine", "--rounds", "3"])
            .args(["--seed", "9", "--json", json.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let measured: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("measuring the machine level"))
            .collect();
        // Where the machine changed state, measurements again follow the rounds (never
        // among them): their number depends on the machine, the rounds' order on the seed.
        let rounds = measured
            .iter()
            .take_while(|l| l.contains(": round "))
            .count();
        assert!(
            measured[rounds..].iter().all(|l| l.contains(": again (")),
            "{stderr}"
        );
        let order: Vec<String> = measured[..rounds].iter().map(|l| l.to_string()).collect();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (order, v)
    };
    let (order, v) = run();
    assert_eq!(order.len(), 6, "{order:?}");
    for round in 1..=3 {
        let of: Vec<&String> = order
            .iter()
            .filter(|l| l.contains(&format!("round {round}/3: ")))
            .collect();
        assert_eq!(of.len(), 2, "round {round}: {order:?}");
        assert!(of.iter().any(|l| l.contains("scattered")), "{order:?}");
        assert!(of.iter().any(|l| l.contains("compact")), "{order:?}");
    }
    assert_eq!(
        (v["rounds"].as_u64(), v["seed"].as_u64()),
        (Some(3), Some(9))
    );
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    assert_eq!(levels[0]["policy"], "scattered");
    assert_eq!(levels[1]["policy"], "compact");
    assert!(levels.iter().all(|l| l["l"].as_f64().unwrap() > 0.0));
    assert_eq!(run().0, order, "the same seed, the same order");
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    let dir = common::scratch("params_cli", "bad");
    let unwritable = dir.join("no/such/dir/p.json");
    // Bad arguments: status 2; an output file that cannot be written: status 3.
    for (args, status) in [
        (vec!["--levels", "bogus"], 2),
        (vec!["--levels", "numa"], 2),
        (vec!["--samples", "0"], 2),
        (vec!["--rounds", "0"], 2),
        (vec!["--seed", "-1"], 2),
        (vec!["--json", unwritable.to_str().unwrap()], 3),
    ] {
        let (code, _, err) = common::mbsp(&[&["params", "--quick"], &args[..]].concat());
        assert_eq!(code, status, "{args:?}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(last.starts_with("mbsp params: "), "{args:?}: {err}");
    }
}

/// The cache a process of each level has (`level_cache`, the `cache_tree` of the file): its
/// core's L2 and its share of the L3 among the level's processes, on real multi-socket trees.
#[test]
fn a_level_shares_the_l3_among_its_processes() {
    use mbsp_tools::params::{Where, level_cache};
    let load = |name: &str| {
        let path = common::shared("topologies").join(name);
        mbsp::Machine::xml(&path).unwrap().machine
    };
    let (k, m) = (1024.0, 1048576.0);
    // Two packages of 8 cores (2 PUs each), a 256 KiB L2 per core, 20 MiB of L3 per package.
    let intel = load("hwloc_32em64t-2n8c2t-pci-normalio.xml");
    assert_eq!(
        level_cache(&intel, Where::Machine),
        256.0 * k + 20.0 * m / 8.0
    );
    assert_eq!(level_cache(&intel, Where::Packages), 256.0 * k + 20.0 * m);
    assert_eq!(
        level_cache(&intel, Where::Package),
        256.0 * k + 20.0 * m / 8.0
    );
    assert_eq!(
        level_cache(&intel, Where::Core),
        (256.0 * k + 20.0 * m) / 2.0
    );
    // Two packages of 24 cores, 512 KiB of L2 per core, an 8 MiB L3 per 3 cores.
    let epyc = load("mpibind_epyc-corona.xml");
    assert_eq!(
        level_cache(&epyc, Where::Machine),
        512.0 * k + 8.0 * m / 3.0
    );
    assert_eq!(level_cache(&epyc, Where::Packages), 512.0 * k + 8.0 * m);
}
