//! mbsp's top level over real MPI ranks: `mpiexec -n 1, 2, 3` (MPICH on localhost; 3 ranks
//! oversubscribe a 2-core machine) running `mbsp-mpi-selftest`, its semantic checks and its
//! failure modes. Every launch has a deadline (the hang detector): a run that does not end
//! within it is killed and the test fails.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(120);

/// Runs `mpiexec -n ranks selftest mode`: (exit success, stdout, stderr).
fn launch(ranks: usize, mode: &str) -> (bool, String, String) {
    launch_with(ranks, mode, &[])
}

/// [`launch`] with extra environment variables.
fn launch_with(ranks: usize, mode: &str, env: &[(&str, &str)]) -> (bool, String, String) {
    launch_full(ranks, &[], mode, env)
}

/// [`launch`] with extra arguments of mpiexec and extra environment variables.
fn launch_full(
    ranks: usize,
    mpiexec: &[&str],
    mode: &str,
    env: &[(&str, &str)],
) -> (bool, String, String) {
    let exe = env!("CARGO_BIN_EXE_mbsp-mpi-selftest");
    let mut args: Vec<String> = mpiexec.iter().map(|a| a.to_string()).collect();
    args.extend(["-n".to_string(), ranks.to_string(), exe.to_string()]);
    if !mode.is_empty() {
        args.push(mode.to_string());
    }
    mpiexec_with(&args, env)
}

/// `mpiexec args` with extra environment variables (and without `MBSP_PROFILE`, unless
/// given): (exit success, stdout, stderr), killed at the deadline.
fn mpiexec_with(args: &[String], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = Command::new("mpiexec");
    cmd.env_remove("MBSP_PROFILE");
    cmd.envs(env.iter().copied());
    cmd.args(args);
    let mut child = cmd
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpiexec not found: install MPICH (scripts/setup does: mpich, libmpich-dev)");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for mpiexec") {
            break s;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("mpiexec {args:?} still running after {DEADLINE:?}: hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.success(), out, err)
}

/// Runs `mode` on 1, 2 and 3 ranks and checks that every rank printed `line` (with the rank
/// count) and the launch succeeded.
fn every_rank_succeeds(mode: &str, line: &str) {
    for ranks in 1..=3 {
        let (ok, out, err) = launch(ranks, mode);
        assert!(ok, "{mode:?} on {ranks} ranks failed:\n{out}\n{err}");
        let line = format!("{line} ok on {ranks} ranks");
        assert_eq!(
            out.lines().filter(|l| *l == line).count(),
            ranks,
            "every rank reports success:\n{out}\n{err}"
        );
    }
}

#[test]
fn semantics_on_one_two_and_three_ranks() {
    every_rank_succeeds("", "selftest");
}

#[test]
fn random_programs_match_the_sequential_model_on_one_two_and_three_ranks() {
    every_rank_succeeds("model", "selftest model");
}

/// The runtime's own model check (`runtime/tests/semantics/model.rs`, shared through
/// `runtime/tests/common/bsplib_model.rs`) with the processes as ranks.
#[test]
fn the_runtime_model_check_over_one_two_and_three_ranks() {
    every_rank_succeeds("bsplib-model", "selftest bsplib-model");
}

#[test]
fn profiles_with_regions_are_gathered_over_the_ranks() {
    every_rank_succeeds("profile", "selftest profile");
}

/// `MBSP_PROFILE` over ranks: every way a run goes over them (`World::run`,
/// `World::run_profiled`, `World::begin`/`Spmd::end`) is reported once, by rank 0 — text on
/// its stderr, or the JSON file — with the lazy superstep marked and the nested runs
/// summarised; and a variable set on some ranks only is agreed on (no rank waits for a gather
/// the others skip).
#[test]
fn mbsp_profile_reports_every_run_over_ranks_from_rank_0() {
    let head = "mbsp profile: top-level run: p = 2, 4 supersteps (1 lazy), ";
    for value in ["1", "full"] {
        let (ok, out, err) = launch_with(2, "profile-env", &[("MBSP_PROFILE", value)]);
        assert!(ok, "{out}\n{err}");
        assert_eq!(out.matches("selftest profile-env ok on 2 ranks").count(), 2);
        assert_eq!(err.matches(head).count(), 3, "one report per run:\n{err}");
        assert_eq!(err.matches("mbsp profile: BSP parameters: ").count(), 3);
        let (summaries, full) = (
            err.matches("  runs nested 1 deep: 2 runs, 4 supersteps")
                .count(),
            err.matches("  run nested in process 1 (superstep 2): p = 2")
                .count(),
        );
        let want = if value == "full" { (0, 3) } else { (3, 0) };
        assert_eq!((summaries, full), want, "MBSP_PROFILE={value}:\n{err}");
    }
    let json = std::env::temp_dir().join(format!("mbsp-ranks-profile-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&json);
    let (ok, out, err) = launch_with(
        2,
        "profile-env",
        &[("MBSP_PROFILE", json.to_str().unwrap())],
    );
    assert!(ok, "{out}\n{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("rank 0 wrote the JSON"))
            .unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(v["p"], 2);
    let lazy: Vec<bool> = v["supersteps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["lazy"].as_bool().unwrap())
        .collect();
    assert_eq!(lazy, [false, true, false, false]);
    assert_eq!(v["nested"].as_array().unwrap().len(), 2);
    assert_eq!(v["nested"][1]["path"][0], 1);
    assert_eq!(v["nested"][1]["started_in"], 2);
    assert!(
        v["processes"][1]["place"]
            .as_str()
            .unwrap()
            .starts_with("node "),
        "{v}"
    );
    // Set on one rank only: the runs are profiled on both, and rank 0 reports when it asked.
    let exe = env!("CARGO_BIN_EXE_mbsp-mpi-selftest");
    for (on, reports) in [(0, 3), (1, 0)] {
        let mut args: Vec<String> = Vec::new();
        for rank in 0..2 {
            if rank > 0 {
                args.push(":".into());
            }
            args.extend(["-n", "1"].map(String::from));
            if rank == on {
                args.extend(["-env", "MBSP_PROFILE", "1"].map(String::from));
            }
            args.extend([exe, "profile-env"].map(String::from));
        }
        let (ok, out, err) = mpiexec_with(&args, &[]);
        assert!(ok, "MBSP_PROFILE on rank {on} only:\n{out}\n{err}");
        assert_eq!(err.matches(head).count(), reports, "{err}");
    }
}

#[test]
fn nested_thread_runs_inside_every_rank() {
    every_rank_succeeds("hybrid", "selftest hybrid");
}

/// With the launcher binding each rank to one core, nested runs stay on the rank's PUs (the
/// selftest checks every nested process's placement against its rank's cpuset).
#[test]
fn nested_runs_stay_inside_a_bound_ranks_cpuset() {
    let (ok, out, err) = launch_full(2, &["-bind-to", "core"], "hybrid", &[]);
    assert!(ok, "{out}\n{err}");
    assert_eq!(
        out.matches("selftest hybrid ok on 2 ranks").count(),
        2,
        "{out}\n{err}"
    );
}

/// Ranks sharing a node divide it, and their nested runs stay in their shares with every
/// binding restored after them: unbound (the ranks split the node), under `-bind-to core` (the
/// launcher's binding stands), and with the split turned off (`MBSP_RANK_SHARE=launcher`).
#[test]
fn ranks_sharing_a_node_divide_it() {
    every_rank_succeeds("shares", "selftest shares");
    for (args, env) in [
        (&["-bind-to", "core"][..], &[][..]),
        (&[][..], &[("MBSP_RANK_SHARE", "launcher")][..]),
        (&[][..], &[("MBSP_AFFINITY", "compact")][..]),
    ] {
        for ranks in [2, 3] {
            let (ok, out, err) = launch_full(ranks, args, "shares", env);
            assert!(ok, "{args:?} {env:?}: {out}\n{err}");
            let line = format!("selftest shares ok on {ranks} ranks");
            assert_eq!(
                out.matches(&line).count(),
                ranks,
                "{args:?} {env:?}: {out}\n{err}"
            );
        }
    }
}

/// `MBSP_PLACEMENT=1`: every rank reports its share of the node and how it got it, and the
/// plans of the runs nested in it.
#[test]
fn ranks_report_their_shares() {
    let (ok, out, err) = launch_with(2, "shares", &[("MBSP_PLACEMENT", "1")]);
    assert!(ok, "{out}\n{err}");
    for rank in 0..2 {
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("mbsp placement: rank {rank} of 2 (node ")))
            .unwrap_or_else(|| panic!("no report of rank {rank}:\n{err}"));
        assert!(line.contains(&format!("local rank {rank} of 2")), "{line}");
        assert!(
            line.contains("split scattered between the node's 2 ranks"),
            "{line}"
        );
    }
    assert!(
        err.lines()
            .any(|l| l.starts_with("mbsp placement: run of 2 nested in process 1 (")),
        "{err}"
    );
}

#[test]
fn fft_and_spmv_with_the_top_level_over_ranks() {
    every_rank_succeeds("algorithms", "selftest algorithms");
}

#[test]
fn one_ranks_abort_panic_or_misuse_ends_every_rank_with_its_error() {
    for ranks in [2, 3] {
        for (mode, says) in [
            (
                "abort",
                "abort (pid {last}, superstep 1): aborted: rank asked to abort",
            ),
            (
                "panic",
                "spmd (pid {last}, superstep 1): panicked: rank asked to panic",
            ),
            (
                "misuse",
                "put (pid {last}, superstep 1): the registration pushed in superstep 1",
            ),
        ] {
            let (ok, out, err) = launch(ranks, mode);
            assert!(!ok, "{mode} on {ranks} ranks exited 0:\n{out}\n{err}");
            let last = ranks - 1;
            let own = says.replace("{last}", &last.to_string());
            // Every rank reports the failing rank's own error (kind, pid, superstep, message).
            assert_eq!(
                err.matches(&own).count(),
                ranks,
                "{mode}, {ranks} ranks:\n{err}"
            );
        }
    }
}

/// A rank that aborted (and waits in its last exchange) is not read by the others' `hpget`:
/// they get the stopped error, as in the thread runtime, and every rank then reports the
/// aborting rank's error (the root cause, not the others' stopped errors).
#[test]
fn an_hpget_from_a_rank_that_aborted_stops_with_its_error() {
    for ranks in [2, 3] {
        let (ok, out, err) = launch(ranks, "abort-hpget");
        assert!(!ok, "{out}\n{err}");
        let last = ranks - 1;
        for me in 0..last {
            let line = format!(
                "rank {me}: hpget (pid {me}, superstep 1): stopped because the run was aborted"
            );
            assert!(out.contains(&line), "{ranks} ranks:\n{out}\n{err}");
        }
        let own = format!("abort (pid {last}, superstep 1): aborted: rank asked to abort");
        assert_eq!(err.matches(&own).count(), ranks, "{ranks} ranks:\n{err}");
    }
}

/// A rank killed from outside cannot tell the others; MPICH's process manager (hydra) sees it
/// die and ends the rest, so nobody waits forever in a collective.
#[test]
fn a_killed_rank_does_not_leave_the_others_hanging() {
    for ranks in [2, 3] {
        let start = Instant::now();
        let (ok, out, err) = launch(ranks, "die");
        assert!(!ok, "{out}\n{err}");
        assert!(
            (out.clone() + &err).contains("BAD TERMINATION"),
            "mpiexec reports the dead rank (on its stdout):\n{out}\n{err}"
        );
        eprintln!(
            "{ranks} ranks, one killed: mpiexec ended in {:?}",
            start.elapsed()
        );
    }
}

/// A rank that stops syncing without dying (hung): the others give up after
/// MBSP_MPI_TIMEOUT seconds with a clear line, and the launcher ends the job.
#[test]
fn a_rank_that_stops_syncing_ends_the_job_after_the_timeout() {
    let start = Instant::now();
    let (ok, out, err) = launch_with(2, "stall", &[("MBSP_MPI_TIMEOUT", "2")]);
    assert!(!ok, "{out}\n{err}");
    assert!(
        err.contains("sync (pid 1, superstep 1): no word from the other ranks for 2 s"),
        "{out}\n{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_rank_that_ends_while_others_sync_is_a_misuse_on_every_rank() {
    for ranks in [2, 3] {
        let (ok, _, err) = launch(ranks, "mismatch");
        assert!(!ok);
        let what = format!(
            "pid(s) [{}] returned from the SPMD function while pid(s)",
            ranks - 1
        );
        assert_eq!(err.matches(&what).count(), ranks, "{err}");
        // The same error on every rank: named after pid 0, in its sync.
        assert_eq!(
            err.matches("sync (pid 0, superstep").count(),
            ranks,
            "{err}"
        );
    }
}

/// Declared counts (`Ctx::declare_incoming`) over ranks: puts, messages in every pattern, owned
/// messages and large puts observe exactly what full syncs observe.
#[test]
fn lazy_syncs_over_ranks_observe_what_full_syncs_observe() {
    every_rank_succeeds("lazy", "selftest lazy");
}

/// A count that cannot be met, a count exceeded, a full sync among lazy ones (where the lazy
/// ones wait, and where they declared nothing and went on) and a panic
/// during lazy syncs each end the run on every rank with one error, without a hang (every
/// launch has the hang detector's deadline).
#[test]
fn lazy_misuse_and_failure_end_every_rank_with_one_error() {
    for ranks in [2, 3] {
        let last = ranks - 1;
        for (mode, says) in [
            (
                "lazy-short",
                "sync (pid 0, superstep 2): pid 0 called declare_incoming(2) in superstep 2 but received \
                 1 puts/messages, and every other process has already synced"
                    .to_string(),
            ),
            (
                "lazy-many",
                format!(
                    "sync (pid 0, superstep 2): pid 0 called declare_incoming(1) in superstep 2 but \
                     received 2 puts/messages (from pid(s) [{last}])"
                ),
            ),
            (
                "lazy-mixed",
                format!("pid(s) [{last}] made a full sync in superstep 2 while pid"),
            ),
            // The lazy ranks went on to a full sync of superstep 3 (the headers' supersteps
            // differ), unless one of them noticed while waiting for its streams to be matched.
            (
                "lazy-mixed-late",
                format!("pid(s) [{last}] made a full sync in superstep 2 while pid"),
            ),
            // A star's senders declare nothing and pass the superstep in which its receiver
            // made a full sync; they notice when they come to wait for it.
            (
                "lazy-star",
                format!("pid(s) [{last}] made a full sync in superstep 2 while pid"),
            ),
            (
                "lazy-panic",
                format!("spmd (pid {last}, superstep 2): panicked: rank asked to panic"),
            ),
        ] {
            let (ok, out, err) = launch(ranks, mode);
            assert!(!ok, "{mode} on {ranks} ranks exited 0:\n{out}\n{err}");
            let line = |l: &&str| l.starts_with("mbsp-mpi-selftest: ");
            let lines: Vec<&str> = err.lines().filter(line).collect();
            assert_eq!(lines.len(), ranks, "{mode}, {ranks} ranks:\n{err}");
            assert!(
                lines.iter().all(|l| l.contains(&says) && *l == lines[0]),
                "{mode}, {ranks} ranks: every rank reports the same error, {says:?}:\n{err}"
            );
        }
    }
}
