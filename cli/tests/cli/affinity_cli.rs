//! `mbsp affinity` as a user runs it: the plan view on real multi-socket machines, the run
//! view on this machine (tiny kernels), an external program, bad arguments.

use crate::common;

use serde_json::Value;

fn xml(name: &str) -> String {
    let p = common::shared("topologies").join(name);
    assert!(p.is_file(), "test data missing: {}", p.display());
    p.to_string_lossy().into_owned()
}

fn json_of(args: &[&str]) -> Value {
    let (code, out, err) = common::mbsp(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The packages of the leaves of a plan (JSON of `mbsp topo`'s shape).
fn leaf_packages(procs: &Value, out: &mut Vec<i64>) {
    for p in procs.as_array().unwrap() {
        match p.get("children") {
            Some(c) => leaf_packages(c, out),
            None => out.push(p["package"].as_i64().expect("one package per leaf")),
        }
    }
}

#[test]
fn plans_on_a_two_socket_xeon_differ_by_policy() {
    let f = xml("hwloc_32em64t-2n8c2t-pci-normalio.xml");
    let v = json_of(&[
        "affinity",
        "--xml",
        &f,
        "-p",
        "4",
        "--policy",
        "compact",
        "--policy",
        "scattered",
        "--policy",
        "manual:8-11",
        "--shape",
        "flat",
        "--shape",
        "nested",
        "--json",
    ]);
    assert_eq!(v["applied"], false);
    let shapes = v["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 2);
    let leaves = |shape: usize, policy: usize| {
        let pol = &shapes[shape]["policies"][policy];
        let mut out = Vec::new();
        leaf_packages(&pol["processes"], &mut out);
        (pol["policy"].as_str().unwrap().to_string(), out)
    };
    // Flat, 4 processes: compact fills package 0; scattered alternates; the manual set (cores
    // 8-11 are package 1's first) is one process on package 1.
    assert_eq!(leaves(0, 0), ("compact".into(), vec![0, 0, 0, 0]));
    assert_eq!(leaves(0, 1), ("scattered".into(), vec![0, 1, 0, 1]));
    assert_eq!(leaves(0, 2), ("manual:8-11".into(), vec![1]));
    // Nested: one per package x one per core, 8 cores each, for compact and scattered alike;
    // the manual set nests one process per core of its 4.
    for pol in [0, 1] {
        let (_, l) = leaves(1, pol);
        assert_eq!(l.len(), 16);
        assert_eq!(l.iter().filter(|&&p| p == 1).count(), 8);
    }
    assert_eq!(
        leaves(1, 2).1,
        vec![1; 4],
        "PUs 8-11 are cores 8-11 of package 1"
    );

    // The text view: one column per policy, rows per process.
    let (code, out, err) = common::mbsp(&[
        "affinity",
        "--xml",
        &f,
        "-p",
        "2",
        "--policy",
        "compact",
        "--policy",
        "scattered",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("planned only"), "{out}");
    let row1 = out.lines().find(|l| l.starts_with("1 ")).expect(&out);
    assert!(row1.contains("pkg 0") && row1.contains("pkg 1"), "{row1}");
}

/// The plan view prices each plan with the level its communicating processes make up: a flat
/// compact run inside one package with the package level's parameters, a scattered one that
/// spans both with the machine's.
#[test]
fn plans_are_priced_by_the_level_they_occupy() {
    let dir = common::scratch("affinity_cli", "plan_prices");
    let params = dir.join("two-socket.json");
    std::fs::write(
        &params,
        r#"{"l": 2e-6, "g": 2e-9, "g_msg": 3e-8, "levels": [
            {"level": "machine", "p": 8, "policy": "scattered", "l": 2e-6},
            {"level": "package", "p": 4, "policy": "compact", "l": 5e-7},
            {"level": "package", "p": 4, "policy": "scattered", "l": 6e-7}]}"#,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args([
            "affinity",
            "--synthetic",
            "package:2 core:4 pu:1",
            "-p",
            "4",
            "-k",
            "sync,hword",
            "--shape",
            "flat",
            "--shape",
            "nested",
            "--json",
        ])
        .env("MBSP_PARAMS", &params)
        .output()
        .expect("start mbsp");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sync = |shape: usize, policy: usize| {
        let pol = &v["shapes"][shape]["policies"][policy];
        let s = &pol["predictions"][0];
        assert_eq!(s["kernel"], "sync");
        (
            s["params_level"].as_str().unwrap().to_string(),
            s["predicted_seconds"].as_f64().unwrap(),
        )
    };
    assert_eq!(
        sync(0, 0),
        ("package".into(), 5e-7),
        "compact, flat: package 0 only"
    );
    assert_eq!(
        sync(0, 1),
        ("machine".into(), 2e-6),
        "scattered, flat: both packages"
    );
    // Nested: every nested run inside its package, under either policy.
    assert_eq!(sync(1, 0), ("package".into(), 5e-7));
    assert_eq!(sync(1, 1), ("package".into(), 6e-7));
    let hword = &v["shapes"][0]["policies"][1]["predictions"][1];
    assert_eq!(hword["model"], "l + h g_msg");
    let want = 2e-6 + 4096.0 * 3e-8;
    assert!(
        (hword["predicted_seconds"].as_f64().unwrap() - want).abs() < 1e-12,
        "{hword}"
    );
}

#[test]
fn plans_on_a_synthetic_four_numa_epyc() {
    let v = json_of(&[
        "affinity",
        "--synthetic",
        "package:2 numa:2 core:4 pu:1",
        "--shape",
        "nested:2x2",
        "--json",
    ]);
    let pols = v["shapes"][0]["policies"].as_array().unwrap();
    let uses: Vec<&str> = pols.iter().map(|p| p["uses"].as_str().unwrap()).collect();
    assert_eq!(
        uses,
        ["uses packages 0, NUMA 0", "uses packages 0-1, NUMA 0-3"]
    );
}

#[test]
fn runs_two_kernels_and_a_program_here() {
    let dir = common::scratch("affinity_cli", "run");
    let csv = dir.join("a.csv");
    let svg = dir.join("a.svg");
    let v = json_of(&[
        "affinity",
        "--quick",
        "--repeat",
        "2",
        "-k",
        "sync,hbulk",
        "--shape",
        "flat",
        "--shape",
        "nested",
        "--csv",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--json",
        "--all-rounds",
        "--",
        "/bin/sh",
        "-c",
        "echo placed as $MBSP_AFFINITY in $MBSP_SHAPE; echo mbsp-figure: 0.25",
    ]);
    let rows = v["rows"].as_array().unwrap();
    // 2 kernels x 2 shapes x 2 policies, then the program under each shape and policy.
    assert_eq!(rows.len(), 12, "{v:#}");
    let key = |r: &Value| {
        (
            r["kernel"].as_str().unwrap().to_string(),
            r["shape"].as_str().unwrap().to_string(),
            r["policy"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(
        key(&rows[0]),
        ("sync".into(), "flat".into(), "compact".into())
    );
    assert_eq!(
        key(&rows[3]),
        ("sync".into(), "nested".into(), "scattered".into())
    );
    assert_eq!(key(&rows[4]).0, "hbulk");
    assert!(key(&rows[8]).0.starts_with("program /bin/sh"));
    for r in rows {
        let samples = r["samples_seconds"].as_array().unwrap();
        assert_eq!(samples.len(), 2, "{r}");
        let ci = &r["interval_seconds"];
        let (lo, med, hi) = (
            ci["low"].as_f64().unwrap(),
            r["median_seconds"].as_f64().unwrap(),
            ci["high"].as_f64().unwrap(),
        );
        assert!(0.0 < lo && lo <= med && med <= hi, "{r}");
        // Two runs cannot give a 95% interval of a median: said, and the row not trusted.
        assert_eq!(ci["short"], true, "{r}");
        assert_eq!(r["trusted"], false, "{r}");
        assert!(r["skipped"].is_null(), "{r}");
    }
    // The program got its policy and shape, and its own figure was used.
    let figure = rows[8]["figure"].as_str().unwrap();
    assert!(figure.contains("mbsp-figure"), "{figure}");
    for r in &rows[8..] {
        assert_eq!(r["median_seconds"], 0.25, "{r}");
        let fans: Vec<String> = r["fan_outs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.to_string())
            .collect();
        assert_eq!(r["size"], format!("MBSP_SHAPE={}", fans.join("x")), "{r}");
        assert!(r["bound"].is_null(), "a program's binding is its own: {r}");
    }
    // A verdict for every pair of one kernel that differs in policy or in shape.
    let verdicts = v["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 12, "{v:#}");
    for x in verdicts {
        assert!(
            matches!(x["differs_in"].as_str(), Some("policy" | "shape")),
            "{x}"
        );
        assert!(x["verdict"].as_str().unwrap().len() > 10, "{x}");
    }
    assert!(v["machine_state"]["causes"].is_array(), "{v:#}");
    // --all-rounds: no run set aside, whatever the machine did.
    assert!(v["runs_set_aside"].is_null(), "{v:#}");
    assert!(v["seed"].is_u64(), "{v:#}");
    for r in &rows[..8] {
        assert!(r["predicted_seconds"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["p"].as_u64().unwrap() >= 1, "{r}");
    }
    // The flat sync's prediction is l; the bulk h-relation's l + h g, larger.
    assert!(rows[4]["predicted_seconds"].as_f64() > rows[0]["predicted_seconds"].as_f64());
    assert!(rows[8]["predicted_seconds"].is_null());
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 13, "{text}");
    assert!(text.starts_with("kernel,policy,shape,p,"));
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("scattered"));
}

/// MBSP_AFFINITY=force:... would make every policy compared the same: refused.
#[test]
fn a_forced_policy_is_refused() {
    for cmd in ["affinity", "params"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mbsp"))
            .args([cmd, "--quick"])
            .env("MBSP_AFFINITY", "force:compact")
            .output()
            .expect("start mbsp");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("MBSP_AFFINITY=force:compact forces one"),
            "{err}"
        );
    }
}

/// A program built on mbsp that prints no figure is timed by its supersteps, from the
/// profile this command asks it for; with --wall-clock, by its whole process.
#[test]
fn a_program_is_timed_by_its_profile_unless_asked_for_wall_clock() {
    let me = env!("CARGO_BIN_EXE_mbsp");
    for (extra, want) in [(None, "MBSP_PROFILE"), (Some("--wall-clock"), "wall clock")] {
        let mut args = vec![
            "affinity", "--quick", "--repeat", "2", "--policy", "none", "--json",
        ];
        args.extend(extra);
        args.extend(["--", me, "fft", "--n", "1024", "--reps", "1"]);
        let v = json_of(&args);
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{v:#}");
        let figure = rows[0]["figure"].as_str().unwrap();
        assert!(figure.contains(want), "{figure}");
        assert!(rows[0]["median_seconds"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn the_table_has_a_row_per_kernel_and_policy() {
    let (code, out, err) = common::mbsp(&[
        "affinity",
        "--quick",
        "--repeat",
        "1",
        "-k",
        "triad,fft",
        "--policy",
        "compact",
        "--shape",
        "flat",
        "--shape",
        "nested",
    ]);
    assert_eq!(code, 0, "{err}");
    // One round: too few runs to set any aside, whatever the machine did.
    assert!(out.contains("machine state during the runs: "), "{out}");
    let rows: Vec<&str> = out.lines().skip(1).take_while(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 4, "{out}");
    assert!(
        rows[0].starts_with("triad") && rows[2].starts_with("fft"),
        "{out}"
    );
    // The nested FFT (a top level of one process on this machine's one package, or one per
    // package) transformed and checked its data, and says which model priced it.
    assert!(
        rows[3].contains("nested") && !rows[3].contains("skipped"),
        "{out}"
    );
    assert!(
        out.contains("fft: BSP FFT cost of the nested run in the parts order")
            || out.contains("Multi-BSP FFT cost"),
        "{out}"
    );
    assert!(
        out.contains("BSP prediction") && out.contains("median"),
        "{out}"
    );
    // Progress goes to stderr, never into the table.
    assert!(err.contains("affinity: triad under compact"), "{err}");
}

#[test]
fn failures_have_their_exit_status() {
    for (args, status, says) in [
        (&["affinity", "--policy", "tight"][..], 2, "--policy tight"),
        (
            &["affinity", "--policy", ""][..],
            2,
            "use compact, scattered, none",
        ),
        (&["affinity", "--policy", "manual:3-1"], 2, "empty"),
        (&["affinity", "--shape", "nested:2"], 2, "--shape nested:2"),
        (&["affinity", "--repeat", "0"], 2, "--repeat 0"),
        (&["affinity", "-k", "spmv"], 2, "--matrix"),
        (&["affinity", "-k", "bogus"], 2, "bogus"),
        (&["affinity", "--xml", "/nonexistent.xml"], 3, "nonexistent"),
        (
            &[
                "affinity",
                "--synthetic",
                "package:2 core:2 pu:1",
                "--csv",
                "x.csv",
            ],
            2,
            "--csv",
        ),
        (
            &["affinity", "-k", "sync", "--quick", "--", "/bin/false"],
            1,
            "/bin/false",
        ),
        (
            &[
                "affinity",
                "-k",
                "sync",
                "--quick",
                "--",
                "/nonexistent/prog",
            ],
            3,
            "cannot start",
        ),
    ] {
        let (code, _, err) = common::mbsp(args);
        assert_eq!(code, status, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The note under the table names where the predictions' parameters come from: the defaults
/// (with the command that measures this machine's), then the file where `mbsp params --save`
/// writes.
#[test]
fn predictions_name_the_parameters_they_use() {
    let config = common::scratch("affinity_cli", "params_source");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mbsp"))
            .args(args)
            .env("XDG_CONFIG_HOME", &config)
            .env_remove("MBSP_PARAMS")
            .output()
            .expect("start mbsp");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let sync = [
        "affinity", "--quick", "--repeat", "1", "-k", "sync", "--policy", "compact",
    ];
    let out = run(&sync);
    assert!(
        out.contains("BSP predictions from the defaults, not measured on this machine")
            && out.contains("`mbsp params --save`"),
        "{out}"
    );
    // The file `--save` writes (written with `--json`: `--save` refuses fits that a quick run
    // on a busy machine can give).
    let saved = config.join("mbsp").join("params.json");
    std::fs::create_dir_all(saved.parent().unwrap()).unwrap();
    run(&["params", "--quick", "--json", saved.to_str().unwrap()]);
    assert!(saved.is_file(), "{}", saved.display());
    let out = run(&sync);
    assert!(
        out.contains(&format!(
            "BSP predictions from this machine's, {}",
            saved.display()
        )),
        "{out}"
    );
    // A file whose own record says the machine moved while it was measured: the table and
    // the JSON say so, with the cause.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    v["machine_state"] = serde_json::json!({"quiet": false, "causes": ["the vCPUs moved"]});
    std::fs::write(&saved, v.to_string()).unwrap();
    let out = run(&sync);
    assert!(
        out.contains("measured on a busy or unsteady machine (the vCPUs moved)"),
        "{out}"
    );
    let json: Value = serde_json::from_str(&run(&[&sync[..], &["--json"]].concat())).unwrap();
    assert_eq!(json["params_unsteady"], "the vCPUs moved", "{json}");
    assert_eq!(json["params_elsewhere"], Value::Null, "{json}");
    // A file measured while a cache line's round trip took far longer than this run's: the
    // machine is in another state, which is said before the file's own unsteadiness.
    v["machine_state"]["line_round_trip_ns"] = serde_json::json!({"min": 1e7, "max": 1.2e7});
    std::fs::write(&saved, v.to_string()).unwrap();
    let json: Value = serde_json::from_str(&run(&[&sync[..], &["--json"]].concat())).unwrap();
    if json["machine_state"]["line_round_trip_ns"].is_null() {
        // One CPU: no round trip to compare.
        assert_eq!(json["params_other_state"], Value::Null, "{json}");
    } else {
        let other = json["params_other_state"].as_str().unwrap_or_default();
        assert!(
            other.contains("10000000-12000000 ns while they were measured"),
            "{json}"
        );
        let out = run(&sync);
        assert!(
            out.contains("measured in another state of this machine")
                && !out.contains("measured on a busy or unsteady machine"),
            "{out}"
        );
    }
    // A file of another CPU model: that is said first (where Linux names this one's).
    if mbsp::params::cpu_model().is_none() {
        return;
    }
    v["cpu"] = "a CPU this machine is not".into();
    std::fs::write(&saved, v.to_string()).unwrap();
    let out = run(&sync);
    assert!(
        out.contains("measured on another machine (a CPU this machine is not)"),
        "{out}"
    );
    let json: Value = serde_json::from_str(&run(&[&sync[..], &["--json"]].concat())).unwrap();
    assert_eq!(
        json["params_elsewhere"], "a CPU this machine is not",
        "{json}"
    );
}

/// A parameter file's ladder of bulk puts prices the h-relation of the size it measured: the
/// row's model says so and its prediction takes the ladder's rate, not `g`.
#[test]
fn bulk_h_relations_are_priced_by_the_ladder_where_it_reaches() {
    let dir = common::scratch("affinity_cli", "ladder");
    let file = dir.join("params.json");
    // The bulk h-relation is h = 2^18 words each way (not --quick's, below the sizes a
    // ladder keeps): 4 MiB of data per process, between these two rungs (h = 2^17 and 2^19),
    // both at 5 ns per word.
    std::fs::write(
        &file,
        r#"{"l": 1e-6, "g": 1e-9, "g_msg": 2e-8, "cache": 1e9,
            "cache_ladder": [[131072, 5e-9], [524288, 5e-9]]}"#,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(["affinity", "--repeat", "1", "-k", "hbulk", "--json"])
        .args(["--policy", "compact"])
        .env("MBSP_PARAMS", &file)
        .output()
        .expect("start mbsp");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &v["rows"][0];
    assert_eq!(row["kernel"], "hbulk", "{v}");
    assert!(row["model"].as_str().unwrap().contains("ladder"), "{row}");
    let p = row["p"].as_u64().unwrap() as f64;
    let (h, g) = (262144.0, 5e-9);
    let want = 1e-6 + h * g + (p - 1.0).max(1.0) * (2e-8 - g);
    let got = row["predicted_seconds"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-12, "{got} against {want}: {row}");
}
