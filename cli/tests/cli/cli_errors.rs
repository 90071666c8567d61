//! What every command does with bad input that is not its own arguments: a parameter file that
//! cannot be used, and an interrupt (Ctrl-C) in the middle of a run that writes files.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_bad_saved_parameter_file_is_an_error_and_mbsp_params_overrides_it() {
    let dir = common::scratch("cli_errors", "saved_params");
    let saved = dir.join("mbsp").join("params.json");
    std::fs::create_dir_all(saved.parent().unwrap()).unwrap();
    std::fs::write(&saved, "{ not json").unwrap();
    let topo = |params: Option<&std::path::Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mbsp"));
        c.arg("topo")
            .env("XDG_CONFIG_HOME", &dir)
            .env_remove("MBSP_PARAMS");
        if let Some(p) = params {
            c.env("MBSP_PARAMS", p);
        }
        c.output().unwrap()
    };
    let out = topo(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!("mbsp: {}: not JSON", saved.display()))
            && err.contains("mbsp params --save"),
        "{err}"
    );
    // MBSP_PARAMS is looked at first: the saved file is not read.
    let good = dir.join("good.json");
    std::fs::write(&good, r#"{"g": 2e-9}"#).unwrap();
    let out = topo(Some(&good));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn params_save_without_a_directory_is_refused_before_measuring() {
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(["params", "--quick", "--save"])
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("HOME")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("mbsp params: --save: neither XDG_CONFIG_HOME nor HOME"),
        "{err}"
    );
    assert!(!err.contains("measuring"), "{err}");
}

#[test]
fn a_bad_parameter_file_is_an_error_of_every_command() {
    let dir = common::scratch("cli_errors", "params_file");
    let bad_json = dir.join("bad.json");
    std::fs::write(&bad_json, "{ not json").unwrap();
    let negative = dir.join("negative.json");
    std::fs::write(&negative, r#"{"g": -1e-9}"#).unwrap();
    let missing = dir.join("missing.json");
    for file in [&bad_json, &negative, &missing] {
        for args in [&["fft", "--n", "1024"][..], &["demo", "--quick"], &["topo"]] {
            let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
                .args(args)
                .env("MBSP_PARAMS", file)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{args:?} {}: {err}",
                file.display()
            );
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.starts_with("mbsp: MBSP_PARAMS="), "{err}");
        }
    }
    // A good one is taken.
    let good = dir.join("good.json");
    std::fs::write(&good, r#"{"g": 2e-9, "l": 1e-6}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(["fft", "--n", "1024", "-p", "2"])
        .env("MBSP_PARAMS", &good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_interrupt_leaves_no_output_file_behind() {
    let dir = common::scratch("cli_errors", "interrupt");
    let (json, plot) = (dir.join("params.json"), dir.join("params.svg"));
    // A long measurement (many samples), interrupted well before its end.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(["params", "--samples", "400", "--json"])
        .arg(&json)
        .arg("--plot")
        .arg(&plot)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The signal handler is in place before any command runs; the measurement's first progress
    // line on stderr says that it has started. Stderr is read to its end (a full pipe would
    // block the command).
    let stderr = child.stderr.take().unwrap();
    let (started, ready) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap();
            // "mbsp params: round 1/3: measuring the machine level, ..."
            if line.starts_with("mbsp params: ") && line.contains("measuring") {
                let _ = started.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    ready
        .recv_timeout(Duration::from_secs(60))
        .expect("mbsp params announces its measurement on stderr");
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let t = Instant::now();
    let out = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "mbsp did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(out.code(), Some(130));
    let text = reader.join().unwrap();
    assert!(
        text.contains("mbsp: interrupted; no output file was changed"),
        "{text}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `mbsp` is built without MPI: an MPI launcher's environment does not make it refuse to run
/// (the benchmarks' binary, built over MPI, does: bench/tests/bench/bench_cli.rs).
#[test]
fn an_mpi_launchers_environment_is_not_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(["topo", "--synthetic", "package:1 core:2 pu:1", "-p", "2"])
        .envs([
            ("PMI_SIZE", "2"),
            ("PMI_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("plan: 2 processes"));
}
