//! `mbsp` built with the feature `mpi` and started by `mpiexec -n 2` (MPICH): `fft` and `spmv`
//! run over the two ranks, rank 0 alone prints one result, checked against the sequential
//! baseline; a `-p` above the ranks and the commands that do not run over ranks are refused
//! with one line and status 2; `topo` prints once.
#![cfg(feature = "mpi")]

use crate::common;

use std::process::Command;

/// `mpiexec -n ranks mbsp args`: (exit status, stdout, stderr). A hung job is killed after a
/// minute (status 124, which fails every test).
fn mpiexec(ranks: usize, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("timeout")
        .args(["60", "mpiexec", "-n", &ranks.to_string()])
        .arg(env!("CARGO_BIN_EXE_mbsp"))
        .args(args)
        .env_remove("MBSP_MPI")
        .env_remove("MBSP_PARAMS")
        .output()
        .expect("mpiexec not found: install MPICH (scripts/setup does: mpich, libmpich-dev)");
    let code = out.status.code().unwrap_or(-1);
    assert_ne!(code, 124, "mpiexec -n {ranks} mbsp {args:?} hung");
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Lines of `text` that start with `prefix`.
fn count(text: &str, prefix: &str) -> usize {
    text.lines().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn fft_runs_over_the_ranks_and_rank_0_alone_prints() {
    let (code, out, err) = mpiexec(2, &["fft", "--n", "4096", "--reps", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    // The result line, the cost model's and the machine's state, once: rank 1 prints nothing.
    assert_eq!(out.lines().count(), 3, "{out}");
    assert_eq!(count(&out, "machine state during the runs: "), 1, "{out}");
    let line = out.lines().next().unwrap();
    assert!(
        line.starts_with("fft n = 4096 (forward), p = 2 (flat"),
        "{line}"
    );
    let error: f64 = line
        .split("relative error ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|e| e.parse().ok())
        .unwrap_or_else(|| panic!("no relative error in {line}"));
    assert!(error < 1e-10, "{line}");
    assert_eq!(count(&err, "fft: "), 1, "progress once: {err}");
}

#[test]
fn spmv_runs_over_the_ranks_and_rank_0_alone_prints() {
    // A small matrix: a 40 x 40 grid's Laplacian pattern with irregular values.
    let dir = common::scratch("over_ranks", "spmv");
    let file = dir.join("grid.mtx");
    let k = 40usize;
    let mut entries = Vec::new();
    for i in 0..k * k {
        let (r, c) = (i / k, i % k);
        entries.push((i, i, 4.0 + (i % 7) as f64 / 8.0));
        for (dr, dc) in [(0, 1), (1, 0)] {
            let (r2, c2) = (r + dr, c + dc);
            if r2 < k && c2 < k {
                let j = r2 * k + c2;
                entries.push((i, j, -1.0 - (i % 3) as f64 / 4.0));
                entries.push((j, i, -0.5));
            }
        }
    }
    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n{0} {0} {1}\n",
        k * k,
        entries.len()
    );
    for (i, j, v) in &entries {
        text.push_str(&format!("{} {} {v}\n", i + 1, j + 1));
    }
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();
    for variant in ["plain", "hp"] {
        let args = [
            "spmv",
            path,
            "-p",
            "2",
            "--variant",
            variant,
            "--reps",
            "18",
            "--json",
        ];
        let (code, out, err) = mpiexec(2, &args);
        assert_eq!(code, 0, "{variant}: {out}{err}");
        assert_eq!(out.lines().count(), 1, "{variant}: one result: {out}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(v["p"], 2, "{v}");
        assert_eq!(v["variant"], variant, "{v}");
        assert_eq!(v["nnz"].as_u64(), Some(entries.len() as u64), "{v}");
        let e = v["max_rel_error"].as_f64().expect("max_rel_error");
        assert!(e <= 1e-12, "{variant}: {v}");
        assert_eq!(count(&err, "spmv: "), 2, "{variant}: progress once: {err}");
    }
}

#[test]
fn refusals_are_one_line_with_status_2() {
    let dir = common::scratch("over_ranks", "refusals");
    let file = dir.join("tiny.mtx");
    std::fs::write(
        &file,
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n2 2 2.0\n",
    )
    .unwrap();
    let m = file.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["spmv", m, "-p", "3"], "-p 3 exceeds the 2 MPI ranks"),
        (
            &["fft", "--n", "4096", "-p", "4"],
            "-p 4 exceeds the 2 MPI ranks",
        ),
        (
            &["fft", "--n", "4096", "--nested"],
            "--nested does not run over MPI ranks",
        ),
        (
            &["spmv", m, "--variant", "hier"],
            "--variant hier does not run over MPI ranks",
        ),
        (
            &["spmv", m, "--variant", "shared"],
            "--variant shared does not run over MPI ranks",
        ),
        (&["params"], "does not run over MPI ranks"),
    ];
    for (args, want) in cases {
        let (code, out, err) = mpiexec(2, args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn topo_prints_once() {
    let (code, out, err) = mpiexec(2, &["topo"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(count(&out, "machine"), 1, "{out}");
}
