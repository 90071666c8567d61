//! `mbsp-bench` as a user runs it, beyond `spmv` (spmv_bench_cli.rs): the quick partition
//! benchmark's CSV and JSON, requests that cannot fit in memory (status 2, one line), a CSV onto
//! a full disk (status 3, the old file kept), and the refusal under mpiexec.

use crate::common;

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `mbsp-bench args` and checks the refusal: status 2, one line, the memory needed and
/// where the limit comes from; returns the line.
fn refused(args: &[&str], needles: &[&str]) -> String {
    let (code, out, err) = common::bench(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?}: {out}");
    let line = err.trim_end();
    assert_eq!(line.lines().count(), 1, "{args:?}: {err}");
    for needle in ["needs at least", "of memory", "available ("]
        .iter()
        .chain(needles)
    {
        assert!(line.contains(needle), "{args:?}: no {needle} in {line}");
    }
    line.to_string()
}

#[test]
fn quick_benchmark_csv_and_json() {
    let dir = common::scratch("bench_cli", "partition");
    let csv = dir.join("partition.csv");
    let (code, out, err) = common::bench(&[
        "partition",
        "--quick",
        "--json",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&csv).expect("CSV written");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "matrix,p,nnz,volume,reference,ratio,row1d_volume,checker2d_volume,imbalance,max_h,seconds"
        )
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // rajat01, bayer10, wiki-Vote at p = 2 and 4.
    assert_eq!(rows.len(), 6, "{text}");
    assert!(rows.iter().all(|r| r.len() == 11), "{text}");
    let mut cases: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    cases.sort();
    assert_eq!(
        cases,
        [
            ("bayer10", "2"),
            ("bayer10", "4"),
            ("rajat01", "2"),
            ("rajat01", "4"),
            ("wiki-Vote", "2"),
            ("wiki-Vote", "4"),
        ]
    );
    // The references are there for p = 4 and only there.
    for r in &rows {
        assert_eq!(r[1] == "4", !r[4].is_empty(), "{r:?}");
    }
    let rajat4 = rows
        .iter()
        .find(|r| r[0] == "rajat01" && r[1] == "4")
        .unwrap();
    assert_eq!((rajat4[2], rajat4[4]), ("43250", "182"));
    // No temporary file is left beside the CSV.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

    let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON: {e}: {out}"));
    assert_eq!(j["rows"].as_array().map(Vec::len), Some(6));
    assert_eq!(j["summary"]["cases_with_reference"], 3);
    assert!(j["summary"]["geomean_ratio"].as_f64().unwrap() > 0.0);
    assert!(j["summary"]["imbalance_violations"].as_u64().is_some());
    // One progress line per case at least.
    assert!(
        err.lines().filter(|l| l.contains(" p = ")).count() >= 6,
        "{err}"
    );
}

/// `lazy --quick --csv`: the figures, each with its process count and, where it is compared
/// with another row, its ratio (and the target where there is one: not for coroutines'
/// declared syncs, which take the barrier), and its context
/// switches per process and superstep exactly where its processes outnumber the cores (none
/// needed for processes as coroutines); the JSON has the same figures.
#[test]
fn quick_lazy_benchmark_csv_and_json() {
    let (v, text, dir) = common::quick_json_csv("lazy", &[]);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("kernel,p,median_ns,min_ns,max_ns,samples,ratio,target,switches")
    );
    // The kernel names are quoted (they contain commas): split off the name first.
    let rows: Vec<(String, Vec<String>)> = lines
        .map(|l| {
            let (name, rest) = l[1..].split_once("\",").expect("a quoted name");
            (
                name.to_string(),
                rest.split(',').map(String::from).collect(),
            )
        })
        .collect();
    let shape: Vec<(&str, &str, bool, &str)> = rows
        .iter()
        .map(|(n, r)| (n.as_str(), r[0].as_str(), !r[5].is_empty(), r[6].as_str()))
        .collect();
    assert_eq!(
        shape,
        [
            ("empty full sync", "2", false, ""),
            ("one-word exchange, full sync", "2", true, ""),
            ("one-word exchange, declare_incoming(1)", "2", true, "0.7"),
            ("the same, lazy protocol (no barrier)", "2", true, ""),
            ("floor: a cache line each way, no library", "2", true, ""),
            ("ring halo, one word each way, full sync", "4", false, ""),
            (
                "ring halo, one word each way, declare_incoming(2)",
                "4",
                true,
                "0.5"
            ),
            ("reference: threads in a ring, yielding", "4", true, ""),
            ("star (all to pid 0), full sync", "16", false, ""),
            ("star, declared", "16", true, "0.5"),
            ("ring halo, full sync", "16", false, ""),
            ("ring halo, declared", "16", true, "0.5"),
            ("sparse (to +1, +5, +11), full sync", "16", false, ""),
            ("sparse, declared", "16", true, "0.5"),
            ("compact: star, full sync", "16", false, ""),
            ("compact: star, declared", "16", true, "0.5"),
            ("compact: ring halo, full sync", "16", false, ""),
            ("compact: ring halo, declared", "16", true, "0.5"),
            ("compact: sparse, full sync", "16", false, ""),
            ("compact: sparse, declared", "16", true, "0.5"),
            ("coroutines: star, full sync", "16", true, ""),
            ("coroutines: star, declared", "16", true, ""),
            ("coroutines: ring halo, full sync", "16", true, ""),
            ("coroutines: ring halo, declared", "16", true, ""),
            ("coroutines: sparse, full sync", "16", true, ""),
            ("coroutines: sparse, declared", "16", true, ""),
            ("coroutines, compact: star, full sync", "16", true, ""),
            ("coroutines, compact: star, declared", "16", true, ""),
            ("coroutines, compact: ring halo, full sync", "16", true, ""),
            ("coroutines, compact: ring halo, declared", "16", true, ""),
            ("coroutines, compact: sparse, full sync", "16", true, ""),
            ("coroutines, compact: sparse, declared", "16", true, ""),
            ("reference: threads in a ring, yielding", "16", true, ""),
            ("star (all to pid 0), full sync", "64", false, ""),
            ("star, declared", "64", true, "0.5"),
            ("ring halo, full sync", "64", false, ""),
            ("ring halo, declared", "64", true, "0.5"),
            ("sparse (to +1, +5, +11), full sync", "64", false, ""),
            ("sparse, declared", "64", true, "0.5"),
            ("compact: star, full sync", "64", false, ""),
            ("compact: star, declared", "64", true, "0.5"),
            ("compact: ring halo, full sync", "64", false, ""),
            ("compact: ring halo, declared", "64", true, "0.5"),
            ("compact: sparse, full sync", "64", false, ""),
            ("compact: sparse, declared", "64", true, "0.5"),
            ("coroutines: star, full sync", "64", true, ""),
            ("coroutines: star, declared", "64", true, ""),
            ("coroutines: ring halo, full sync", "64", true, ""),
            ("coroutines: ring halo, declared", "64", true, ""),
            ("coroutines: sparse, full sync", "64", true, ""),
            ("coroutines: sparse, declared", "64", true, ""),
            ("coroutines, compact: star, full sync", "64", true, ""),
            ("coroutines, compact: star, declared", "64", true, ""),
            ("coroutines, compact: ring halo, full sync", "64", true, ""),
            ("coroutines, compact: ring halo, declared", "64", true, ""),
            ("coroutines, compact: sparse, full sync", "64", true, ""),
            ("coroutines, compact: sparse, declared", "64", true, ""),
            ("reference: threads in a ring, yielding", "64", true, ""),
            ("Comm one-word all-reduce, full sync", "16", false, ""),
            ("Comm one-word all-reduce, lazy", "16", true, "0.7"),
            ("Comm one-word all-reduce", "2", true, "1.3"),
            ("Comm all-reduce, coroutines, full sync", "16", true, ""),
            ("Comm all-reduce, coroutines, lazy", "16", true, ""),
            ("Comm all-reduce, full sync", "64", false, ""),
            ("Comm all-reduce, lazy", "64", true, ""),
            ("Comm all-reduce, coroutines, full sync", "64", true, ""),
            ("Comm all-reduce, coroutines, lazy", "64", true, ""),
        ],
        "{text}"
    );
    for (name, r) in &rows {
        let (median, lo, hi): (f64, f64, f64) = (
            r[1].parse().unwrap(),
            r[2].parse().unwrap(),
            r[3].parse().unwrap(),
        );
        assert!(0.0 < lo && lo <= median && median <= hi, "{name}: {r:?}");
        assert_eq!(r[4], "3", "{name}: three samples with --quick");
        let p: usize = r[0].parse().unwrap();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if p > cores {
            let switches: f64 = r[7].parse().unwrap_or_else(|_| panic!("{name}: {r:?}"));
            // Coroutines switch in user space: the kernel's count may be zero.
            assert!(
                switches > 0.0 || (name.contains("coroutines") && switches == 0.0),
                "{name}: {r:?}"
            );
        } else {
            assert_eq!(r[7], "", "{name}: no switches where p <= cores");
        }
    }
    let kernels: Vec<&str> = v["lazy"]
        .as_array()
        .expect("a list of figures")
        .iter()
        .map(|k| k["kernel"].as_str().unwrap())
        .collect();
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(kernels, names);
    // A figure with a target has a verdict from the interval of its ratio (three --quick
    // samples a side cannot reach 95%: unclear); one without has neither.
    for k in v["lazy"].as_array().unwrap() {
        if k["target"].is_null() {
            assert!(k["verdict"].is_null() && k["interval"].is_null(), "{k}");
        } else {
            assert_eq!(k["verdict"], "unclear", "{k}");
            let i = k["interval"].as_array().expect("interval");
            assert!(i[0].as_f64().unwrap() <= i[1].as_f64().unwrap(), "{k}");
        }
    }
    // A CSV that cannot be written is refused before the benchmark runs.
    let nowhere = dir.join("no/such/dir/lazy.csv");
    let (code, out, err) = common::bench(&["lazy", "--csv", nowhere.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("no/such/dir") && out.is_empty(),
        "{err}\n{out}"
    );
}

/// `owned --quick --json --csv`: the hand-off figures and the steady state, the same in both.
#[test]
fn quick_owned_benchmark_csv_and_json() {
    let (v, text, _) = common::quick_json_csv("owned", &[]);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0], ["figure", "unit", "median", "min", "max"]);
    let names: Vec<&str> = rows[1..].iter().map(|r| r[0]).collect();
    assert_eq!(
        names,
        [
            "handoff",
            "memcpy",
            "send_sync_hpmove",
            "empty_sync",
            "steady_supersteps",
            "steady_allocations",
            "steady_resident_before",
            "steady_resident_after"
        ]
    );
    let median = |name: &str| -> f64 {
        let r = rows.iter().find(|r| r[0] == name).expect(name);
        r[2].parse()
            .unwrap_or_else(|e| panic!("{name}: {e}: {text}"))
    };
    // The same numbers (serde_json's float parsing may differ from Rust's in the last bit).
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    for (name, json) in [
        ("handoff", &v["handoff_ns"]),
        ("memcpy", &v["memcpy_ns"]),
        ("steady_allocations", &v["steady"]["allocations"]),
        ("steady_supersteps", &v["steady"]["supersteps"]),
    ] {
        let j = json.as_f64().unwrap_or_else(|| panic!("{name} in {v}"));
        assert!(
            same(median(name), j),
            "{name}: CSV {} JSON {j}",
            median(name)
        );
    }
}

/// `layouts --quick --json --csv`: a process per heap layout, the same figures in both; the
/// ratios are each figure over the empty sync (1 for the empty sync itself), the summary's
/// median and worst agree with the rows, and a layout count of 0 is refused with one line.
#[test]
fn quick_layouts_benchmark_csv_and_json() {
    let (v, text, _) = common::quick_json_csv("layouts", &[]);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0], ["layout", "figure", "ns", "ratio"]);
    let figures = [
        "empty sync",
        "put + sync",
        "send + sync + move",
        "Comm all-reduce",
    ];
    assert_eq!(rows.len(), 1 + 3 * figures.len(), "{text}");
    let layouts = v["layouts"].as_array().expect("layouts");
    assert_eq!(layouts.len(), 3, "{v}");
    for (k, l) in layouts.iter().enumerate() {
        assert_eq!(l["layout"], k, "{v}");
        let at = |f: usize| &rows[1 + k * figures.len() + f];
        assert_eq!(
            (at(0)[0], at(0)[1], at(0)[3]),
            (k.to_string().as_str(), "empty sync", "1")
        );
        for (f, name) in figures.iter().enumerate().skip(1) {
            assert_eq!(at(f)[1], *name, "{text}");
            let csv: f64 = at(f)[3].parse().expect("a ratio");
            let json = l["ratios"][name].as_f64().expect("a ratio");
            assert!(
                csv > 0.0 && (csv - json).abs() <= 1e-9 * csv,
                "{name}: {csv} {json}"
            );
        }
    }
    for name in &figures[1..] {
        let s = &v["summary"][name];
        let ratios: Vec<f64> = layouts
            .iter()
            .map(|l| l["ratios"][name].as_f64().unwrap())
            .collect();
        let worst = ratios.iter().copied().fold(f64::MIN, f64::max);
        assert_eq!(s["worst_ratio"].as_f64(), Some(worst), "{v}");
        let median = s["median_ratio"].as_f64().expect("median");
        assert!(
            ratios.iter().any(|&r| r <= median) && median <= worst,
            "{v}"
        );
    }
    for n in ["0", "4097"] {
        let (code, out, err) = common::bench(&["layouts", "--layouts", n]);
        assert_eq!((code, out.as_str()), (2, ""), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("--layouts {n}")), "{err}");
    }
}

/// `nested --quick --json --csv`: the sync table (p = 2, 4, 8, compact and scattered: flat,
/// inner, outer, start + end) and the five start rows (worker teams, threads per run), in both;
/// issue 42's three start targets judged on them in the JSON.
#[test]
fn quick_nested_benchmark_csv_and_json() {
    let (v, text, _) = common::quick_json_csv("nested", &[]);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("table,p,setting,figure,median_ns,min_ns,max_ns")
    );
    // [table, p, setting, figure, median, min, max]; a run's name (the setting) may contain
    // commas (it is quoted): the other fields are taken from either end.
    let rows: Vec<Vec<&str>> = lines
        .map(|l| {
            let mut right: Vec<&str> = l.rsplitn(5, ',').collect();
            let mut left: Vec<&str> = right.pop().expect("fields").splitn(3, ',').collect();
            right.reverse();
            left.extend(right);
            left
        })
        .collect();
    assert!(rows.iter().all(|r| r.len() == 7), "{text}");
    let syncs: Vec<(&str, &str, &str)> = rows
        .iter()
        .filter(|r| r[0] == "sync")
        .map(|r| (r[1], r[2], r[3]))
        .collect();
    let mut want = Vec::new();
    for p in ["2", "4", "8"] {
        for policy in ["\"compact\"", "\"scattered\""] {
            for figure in ["flat", "nested_inner", "nested_outer", "nested_start_end"] {
                want.push((p, policy, figure));
            }
        }
    }
    assert_eq!(syncs, want, "{text}");
    let starts = rows.iter().filter(|r| r[0] == "start").count();
    assert_eq!(starts, 12, "six runs, two figures each: {text}");
    for r in &rows {
        let (median, lo, hi): (f64, f64, f64) = (
            r[4].parse().unwrap(),
            r[5].parse().unwrap(),
            r[6].parse().unwrap(),
        );
        assert!(0.0 < lo && lo <= median && median <= hi, "{r:?}");
    }
    assert_eq!(v["syncs"].as_array().map(Vec::len), Some(6), "{v}");
    assert_eq!(v["starts"].as_array().map(Vec::len), Some(6), "{v}");
    assert!(v["syncs"][0]["inner_over_flat"].as_f64().is_some(), "{v}");
    let targets = v["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 3, "{v}");
    for (t, want) in targets
        .iter()
        .zip(["top-level run of 2", "nested run of 2", "unbound"])
    {
        assert!(t["met"].is_boolean(), "{t}");
        assert!(t["target"].as_str().unwrap().contains(want), "{t}");
        // Judged by the median's 95% interval: met only when all of it is within the target.
        let verdict = t["verdict"].as_str().expect("verdict");
        assert!(["met", "MISSED", "unclear"].contains(&verdict), "{t}");
        assert_eq!(t["met"].as_bool(), Some(verdict == "met"), "{t}");
    }
    // The binding pair is measured where threads are bound (this machine's tree, 2+ CPUs).
    assert!(v["binding_pair"].is_null() || v["binding_pair"]["median_ns"].as_f64().unwrap() > 0.0);
}

/// `wait --quick`: the oversubscription and run start rows (p = 2, 16; threads and
/// coroutines), the passes (4) and the put patterns
/// (3 patterns x 2 sizes), as CSV and JSON.
#[test]
fn quick_wait_benchmark_csv_and_json() {
    let dir = common::scratch("bench_cli", "wait");
    let csv = dir.join("wait.csv");
    let (code, out, err) =
        common::bench(&["wait", "--quick", "--json", "--csv", csv.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&csv).expect("CSV written");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "table,p,pass,syncs,mbsp_ns,mbsp_ns_min,mbsp_ns_max,std_barrier_ns,slept,preempted,\
             coroutines_ns"
        )
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 11), "{text}");
    // The oversubscription rows have the same sync with the processes as coroutines.
    assert!(
        rows.iter()
            .filter(|r| r[0] == "oversubscription" || r[0] == "start")
            .all(|r| r[10].parse::<f64>().unwrap() > 0.0),
        "{text}"
    );
    let tables: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(
        tables,
        [
            ("oversubscription", "2"),
            ("oversubscription", "16"),
            ("start", "2"),
            ("start", "16"),
            ("after_sleep", "2"),
            ("after_sleep", "2"),
            ("after_sleep", "2"),
            ("after_sleep", "2"),
            ("puts", "2"),
            ("puts", "2"),
            ("puts", "2"),
            ("puts", "2"),
            ("puts", "2"),
            ("puts", "2"),
        ]
    );
    let puts: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| r[0] == "puts")
        .map(|r| (r[2], r[3]))
        .collect();
    assert_eq!(
        puts,
        [
            ("all-to-all", "4096"),
            ("one-to-all", "4096"),
            ("all-to-one", "4096"),
            ("all-to-all", "49152"),
            ("one-to-all", "49152"),
            ("all-to-one", "49152"),
        ]
    );
    assert!(
        rows.iter().all(|r| r[4].parse::<f64>().unwrap() > 0.0),
        "{text}"
    );

    let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON: {e}: {out}"));
    assert_eq!(j["oversubscription"].as_array().map(Vec::len), Some(2));
    assert_eq!(j["oversubscription"][1]["p"], 16);
    assert!(
        j["oversubscription"][1]["coroutines_sync_ns"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // Run starts: threads and coroutines, each p of the table.
    assert_eq!(j["run_start"].as_array().map(Vec::len), Some(2));
    assert_eq!(j["run_start"][1]["p"], 16);
    for key in ["threads_ns", "coroutines_ns"] {
        assert!(j["run_start"][1][key].as_f64().unwrap() > 0.0, "{out}");
    }
    assert_eq!(j["after_sleep"]["passes"].as_array().map(Vec::len), Some(4));
    assert_eq!(j["puts"].as_array().map(Vec::len), Some(6));
    assert_eq!(j["puts"][4]["pattern"], "one-to-all");
    assert!(j["puts"][4]["over_all_to_all"].as_f64().unwrap() > 0.0);
    let (median, worst) = (
        j["after_sleep"]["median_ns"].as_f64().unwrap(),
        j["after_sleep"]["worst_ns"].as_f64().unwrap(),
    );
    assert!(0.0 < median && median <= worst, "{out}");
}

#[test]
fn bad_numbers_of_parts_are_refused() {
    let m = common::matrix("rajat01.mtx");
    let (code, out, err) = common::bench(&["partition", "--procs", "2,0", m.to_str().unwrap()]);
    assert_eq!(code, 2, "{out} {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("mbsp-bench partition: --procs 2,0"),
        "{err}"
    );
    refused(
        &["partition", "--procs", "1000000000", m.to_str().unwrap()],
        &["-p 1000000000 parts"],
    );
}

#[test]
fn benchmark_sizes_that_cannot_fit_are_refused() {
    refused(
        &["collectives", "--large-mib", "100000000", "--procs", "1"],
        &["--large-mib", "large case"],
    );
    refused(
        &["collectives", "--sort-n", "1000000000000", "--procs", "1"],
        &["--sort-n 1000000000000"],
    );
    refused(
        &["fft", "--min-log", "30", "--max-log", "30", "--procs", "1"],
        &["--max-log 30"],
    );
    refused(
        &["core", "--samples", "1000000000000000000"],
        &["--samples"],
    );
    refused(
        &["wait", "--passes", "1000000000000000000"],
        &["--passes 1000000000000000000"],
    );
    // 2^44 MiB is 2^64 bytes: it wrapped to 0 before and ran.
    let (code, _, err) = common::bench(&[
        "collectives",
        "--large-mib",
        "17592186044416",
        "--procs",
        "1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("more bytes than this machine can address"),
        "{err}"
    );
}

/// A tmpfs of `bytes` mounted at `dir`, unmounted when dropped; `None` (and a message) where
/// mounting is not permitted.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, bytes: u64) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs(dir.to_path_buf())),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs here ({}): the full-disk case is not tested",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount ({e}): the full-disk case is not tested");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// What an output file held before a run that must leave it alone.
const OLD: &[u8] = b"old contents\n";

#[test]
fn a_csv_onto_a_full_disk_leaves_the_old_file() {
    let dir = common::scratch("bench_cli", "full_disk");
    const PAGE: u64 = 4096;

    // A CSV onto a full disk: the old one stays.
    let mnt = dir.join("tmpfs-csv");
    let Some(_fs) = Tmpfs::mount(&mnt, 8 * PAGE) else {
        return;
    };
    let csv = mnt.join("partition.csv");
    std::fs::write(&csv, OLD).unwrap();
    // Fill the rest of the disk.
    let filler = mnt.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    while f.write_all(&[0u8; 4096]).is_ok() {}
    drop(f);
    let shared = common::matrix("rajat01.mtx");
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp-bench"))
        .args(["partition", "--procs", "2", "--csv"])
        .arg(&csv)
        .arg(&shared)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(last.contains("No space left on device"), "{err}");
    assert!(last.ends_with("no file was changed"), "{err}");
    assert_eq!(std::fs::read(&csv).unwrap(), OLD);
    assert_eq!(names(&mnt), ["filler", "partition.csv"]);
}

/// Under mpiexec, the commands that measure one machine refuse to run (their runs would go
/// over the ranks) with one line and status 2; `mbsp-bench mpi` runs.
#[test]
fn under_mpiexec_only_bench_mpi_runs() {
    let out = Command::new("timeout")
        .args(["60", "mpiexec", "-n", "2", env!("CARGO_BIN_EXE_mbsp-bench")])
        .args(["core", "--quick"])
        .output()
        .expect("mpiexec not found: install MPICH (scripts/setup does)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert_eq!(
        err.matches("mbsp-bench: under mpiexec only `mbsp-bench mpi` runs")
            .count(),
        2,
        "{err}"
    );
}

/// `fft --quick`: the Multi-BSP FFT on a top level of one process, in natural order
/// (`mbsp-top1`) and in the parts order (`mbsp-parts`), beside the flat one at the same p in
/// every round, right to rounding, and each one's nested/flat ratio per n with the range of the
/// rounds' ratios and the target.
#[test]
fn fft_reports_nested_over_flat_for_one_process_on_top() {
    let (code, out, err) = common::bench(&["fft", "--quick", "--procs", "1,2", "--json"]);
    assert_eq!(code, 0, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON: {e}: {out}"));
    let rows = j["rows"].as_array().expect("rows");
    for variant in ["mbsp-top1", "mbsp-parts"] {
        let top1: Vec<&Value> = rows.iter().filter(|r| r["variant"] == variant).collect();
        assert_eq!(top1.len(), 5, "one per n of 2^10 .. 2^14: {rows:?}");
        for r in &top1 {
            assert_eq!(r["p"], 2, "{r}");
            assert!(r["rel_error"].as_f64().unwrap() < 1e-12, "{r}");
        }
    }
    let ratios = j["top1_over_flat"].as_array().expect("top1_over_flat");
    assert_eq!(ratios.len(), 10, "{ratios:?}");
    for variant in ["mbsp-top1", "mbsp-parts"] {
        let of = ratios.iter().filter(|t| t["variant"] == variant).count();
        assert_eq!(of, 5, "{variant}: {ratios:?}");
    }
    for t in ratios {
        let (lo, hi) = (t["round_ratio_min"].as_f64(), t["round_ratio_max"].as_f64());
        let (ratio, lo, hi) = (t["ratio"].as_f64().unwrap(), lo.unwrap(), hi.unwrap());
        assert!(ratio > 0.0 && ratio.is_finite() && lo <= hi, "{t}");
        assert_eq!(t["target"].as_f64(), Some(1.05), "{t}");
        // The verdict follows the 95% interval of the ratio over all samples of both.
        let (ilo, ihi) = (t["interval_lo"].as_f64(), t["interval_hi"].as_f64());
        let (ilo, ihi) = (ilo.unwrap(), ihi.unwrap());
        assert!(0.0 < ilo && ilo <= ihi, "{t}");
        // (A quick run's few samples may not reach 95%: then nothing can be told.)
        let short = t["interval_level"].as_f64().unwrap() < 0.95;
        let want = if short {
            "unclear"
        } else if ihi <= 1.05 {
            "met"
        } else if ilo > 1.05 {
            "MISSED"
        } else {
            "unclear"
        };
        assert_eq!(t["verdict"].as_str(), Some(want), "{t}");
    }
    // The table says the same in words.
    let (code, out, err) = common::bench(&["fft", "--quick", "--procs", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("nested / flat: a top level of 1 process"),
        "{out}"
    );
    assert_eq!(out.matches(" p = 2  mbsp-top1 ").count(), 5, "{out}");
    assert_eq!(out.matches(" p = 2  mbsp-parts ").count(), 5, "{out}");
}

/// `checkpoint --quick`: the figures in order, each compared with its reference where it has
/// one (the bandwidth and CG targets named); the checkpoints go to `--dir`, which is left empty;
/// bad arguments are refused with exit status 2.
#[test]
fn quick_checkpoint_benchmark_csv_and_json() {
    let ckpt = std::env::temp_dir().join(format!("mbsp-bench-ckpt-{}", std::process::id()));
    let (v, text, _dir) = common::quick_json_csv(
        "checkpoint",
        &["--cg-seconds", "0.2", "--dir", ckpt.to_str().unwrap()],
    );
    let names: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "disk: sequential write, one thread",
            "checkpoint, foreground (p = 2)",
            "checkpoint, background: the call, first of the run",
            "checkpoint, background: the call, a later one",
            "checkpoint, background: until written",
            "sync (p = 2)",
            "sync_checkpoint, no checkpoint taken",
            "CG, no checkpoints",
            "CG, checkpoint every --every seconds",
        ]
    );
    assert_eq!(v["bytes"], 16 << 20);
    assert_eq!(v["rows"][1]["target"], 0.8);
    assert_eq!(v["rows"][8]["target"], 1.02);
    assert!(v["rows"][1]["ratio"].as_f64().unwrap() > 0.0);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("figure,median_s,min_s,max_s,samples,ratio,target")
    );
    assert_eq!(lines.count(), 9);
    let left: Vec<_> = std::fs::read_dir(&ckpt).unwrap().collect();
    assert!(left.is_empty(), "checkpoints removed: {left:?}");
    std::fs::remove_dir_all(&ckpt).unwrap();
    let (code, _, err) = common::bench(&["checkpoint", "--every", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--every 0: need a number of seconds above 0"),
        "{err}"
    );
}
