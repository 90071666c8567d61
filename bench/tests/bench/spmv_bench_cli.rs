//! `mbsp-bench spmv` as a user runs it: the quick run's CSV and JSON (one row per matrix,
//! variant and p, every result checked against sequential CSR), the plot, and a clear exit
//! status 2 with one line for bad arguments.

use crate::common;

use serde_json::Value;
use std::collections::BTreeSet;

/// Checks the (matrix, variant, p) cases of a run on `matrices` at p = 1, 2: every group has
/// sequential, rayon and the same mbsp variants, plain among them, each exactly once.
fn check_cases(cases: &[(String, String, u64)], matrices: &[&str]) {
    let mut variants_of: Vec<BTreeSet<&str>> = Vec::new();
    for m in matrices {
        for p in [1, 2] {
            let group: Vec<&str> = cases
                .iter()
                .filter(|c| c.0 == *m && c.2 == p)
                .map(|c| c.1.as_str())
                .collect();
            let set: BTreeSet<&str> = group.iter().copied().collect();
            assert_eq!(
                set.len(),
                group.len(),
                "{m} p = {p}: a variant twice: {group:?}"
            );
            for v in ["sequential", "rayon", "plain"] {
                assert!(set.contains(v), "{m} p = {p}: no {v} in {group:?}");
            }
            variants_of.push(set);
        }
    }
    assert!(
        variants_of.windows(2).all(|w| w[0] == w[1]),
        "{variants_of:?}"
    );
    let per_group = variants_of[0].len();
    assert_eq!(cases.len(), matrices.len() * 2 * per_group, "{cases:?}");
}

#[test]
fn quick_run_csv_json_and_plot() {
    let dir = common::scratch("spmv_bench_cli", "quick");
    let csv = dir.join("spmv.csv");
    let svg = dir.join("spmv.svg");
    let (rajat, bayer) = (common::matrix("rajat01.mtx"), common::matrix("bayer10.mtx"));
    let (code, out, err) = common::bench(&[
        "spmv",
        "--quick",
        rajat.to_str().unwrap(),
        bayer.to_str().unwrap(),
        "--json",
        "--csv",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let matrices = ["rajat01", "bayer10"];

    // The CSV: the header, then one row per (matrix, variant, p), every result checked.
    let text = std::fs::read_to_string(&csv).expect("CSV written");
    let mut lines = text.lines();
    let header = lines.next().expect("header");
    assert!(
        header.starts_with("matrix,variant,p,mflops,speedup"),
        "{header}"
    );
    let columns: Vec<&str> = header.split(',').collect();
    let col = |name: &str| {
        columns
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no {name} column in {header}"))
    };
    let (rel, gbs, triad) = (col("rel_error"), col("gbs"), col("triad_gbs"));
    let (seconds, bound) = (col("seconds"), col("bound_seconds"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == columns.len()), "{text}");
    let cases: Vec<(String, String, u64)> = rows
        .iter()
        .map(|r| (r[0].to_string(), r[1].to_string(), r[2].parse().unwrap()))
        .collect();
    check_cases(&cases, &matrices);
    for r in &rows {
        let number = |i: usize| -> f64 { r[i].parse().unwrap_or_else(|_| panic!("{r:?}")) };
        assert!(number(rel) <= 1e-12, "{r:?}");
        for i in [3, 4, gbs, triad, bound] {
            assert!(number(i) > 0.0 && number(i).is_finite(), "{r:?}");
        }
        // The bound is the bytes at the triad's rate: time / bound = triad / GB/s, up to the
        // rounding of the four printed numbers (a slow run prints GB/s as 0.300: 0.17%).
        let (x, want) = (number(seconds) / number(bound), number(triad) / number(gbs));
        let rounding: f64 = [seconds, bound, triad, gbs]
            .iter()
            .map(|&i| relative_rounding(r[i]))
            .sum();
        assert!(
            (x - want).abs() <= (rounding + 1e-9) * want,
            "{r:?}: {x} against {want}"
        );
        if r[1] == "sequential" {
            assert_eq!(number(4), 1.0, "{r:?}");
        }
    }
    // No temporary file is left beside the CSV.
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["spmv.csv", "spmv.svg"]);
    let plot = std::fs::read_to_string(&svg).expect("plot written");
    assert!(plot.starts_with("<svg") && plot.contains("rajat01") && plot.contains("rayon"));

    // The JSON: the same rows, the triad figures and the targets.
    let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON: {e}: {out}"));
    let rows = j["rows"].as_array().expect("rows");
    let cases: Vec<(String, String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["matrix"].as_str().unwrap().to_string(),
                r["variant"].as_str().unwrap().to_string(),
                r["p"].as_u64().unwrap(),
            )
        })
        .collect();
    check_cases(&cases, &matrices);
    for r in rows {
        for key in [
            "mflops",
            "speedup",
            "gbs",
            "triad_gbs",
            "rel_error",
            "seconds",
            "bound_seconds",
        ] {
            assert!(r[key].as_f64().is_some(), "no {key} in {r}");
        }
        assert!(r["rel_error"].as_f64().unwrap() <= 1e-12, "{r}");
        let mbsp_variant = !["sequential", "rayon"].contains(&r["variant"].as_str().unwrap());
        assert_eq!(r["partition_seconds"].is_number(), mbsp_variant, "{r}");
    }
    let best = j["triad"]["best_gbs"].as_array().expect("triad figures");
    let threads: Vec<u64> = best
        .iter()
        .map(|t| t["threads"].as_u64().unwrap())
        .collect();
    assert_eq!(threads, [1, 2]);
    assert!(best.iter().all(|t| t["gbs"].as_f64().unwrap() > 0.0));
    let targets = j["targets"].as_array().expect("targets");
    assert!(!targets.is_empty());
    // Each target's verdict in words, and `met` agreeing with it (null: unclear or skipped).
    for t in targets {
        let met = &t["met"];
        match t["verdict"].as_str() {
            Some("met") => assert_eq!(met, true, "{t}"),
            Some("MISSED") => assert_eq!(met, false, "{t}"),
            Some("unclear") | None => assert!(met.is_null(), "{t}"),
            Some(other) => panic!("verdict {other}: {t}"),
        }
    }
}

#[test]
fn table_has_every_row_and_the_targets() {
    let rajat = common::matrix("rajat01.mtx");
    let (code, out, err) = common::bench(&[
        "spmv",
        "--quick",
        "--procs",
        "2",
        "--reps",
        "6",
        rajat.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    for word in [
        "STREAM triad",
        "sequential",
        "rayon",
        "plain",
        "%triad",
        "memory bound per multiply",
        "hp/bound",
        "within 1.5x of the memory bound",
        "targets",
    ] {
        assert!(out.contains(word), "no {word} in {out}");
    }
    // --procs 2: no row at p = 1.
    assert!(
        out.lines()
            .filter(|l| l.trim_start().starts_with("rajat01"))
            .all(|l| l.split_whitespace().nth(3) == Some("2")),
        "{out}"
    );
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    let dir = common::scratch("spmv_bench_cli", "bad");
    let rajat = common::matrix("rajat01.mtx");
    let good = rajat.to_str().unwrap();
    let missing = dir.join("no-such.mtx");
    let missing = missing.to_str().unwrap();
    let nowhere = dir.join("no/such/dir/out.csv");
    let nowhere = nowhere.to_str().unwrap();
    // Bad arguments: status 2; files that cannot be read or written: status 3.
    let cases: [(&[&str], &str, i32); 9] = [
        (&["--procs", "1,0", good], "--procs 1,0", 2),
        (&["--procs", "0", good], "--procs 0", 2),
        (&["--procs", "two", good], "--procs two", 2),
        (&["--procs", "-2", good], "--procs -2", 2),
        (&["--reps", "0", good], "--reps 0", 2),
        (&["--frobnicate", good], "--frobnicate", 2),
        (&[missing], "no-such.mtx", 3),
        (&[dir.to_str().unwrap()], "directory", 3),
        (&["--csv", nowhere, good], "no/such/dir", 3),
    ];
    for (args, needle, status) in cases {
        let all: Vec<&str> = ["spmv", "--quick"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        let (code, out, err) = common::bench(&all);
        assert_eq!(code, status, "{args:?}: {out} {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("mbsp-bench spmv: "), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: no {needle} in {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
}

/// The largest relative error of a number printed as `text` (half a unit of its last digit,
/// over its value): "0.300" -> 0.0005 / 0.3, "2.279169e-3" -> 0.0000005 / 2.279169.
fn relative_rounding(text: &str) -> f64 {
    let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
    let decimals = mantissa.split('.').nth(1).map_or(0, str::len);
    let value: f64 = mantissa
        .parse()
        .unwrap_or_else(|_| panic!("{text} is no number"));
    0.5 * 10f64.powi(-(decimals as i32)) / value.abs()
}
