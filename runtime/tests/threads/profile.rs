//! Superstep profiles: exact counts for a known program (puts, gets, sends, hp primitives),
//! superstep boundaries, nested runs attached to their parent, the report and its JSON, the
//! environment variable through a child process, and a failing profiled run.

use crate::common;

use common::within;
use mbsp::Run;
use mbsp::params::Params;
use mbsp::profile::Profile;

/// p = 3. Superstep 0: register. Superstep 1: pid i puts (i + 1) words to i + 1 and one word
/// to itself (not counted). Superstep 2: pid i gets 2 words from i + 2 and sends a message
/// with a 4-byte tag and 10 bytes of payload to pid 0. Superstep 3 (to the end): nothing.
/// On a synthetic machine of four hardware threads, so that no two processes take turns on
/// one whatever the machine running the test (the report would price them together).
fn known_program() -> Profile {
    within(60, || {
        let four = mbsp::Machine::synthetic("package:1 core:4 pu:1").unwrap();
        Run::new(3)
            .machine(four)
            .run_profiled(|ctx| {
                let (me, p) = (ctx.pid(), ctx.nprocs());
                let x = ctx.push_reg(vec![0u64; 8])?;
                ctx.set_tagsize(4)?;
                ctx.sync()?;
                let words = vec![7u64; me + 1];
                ctx.put((me + 1) % p, &words, &x, 0)?;
                ctx.put(me, &[1u64], &x, 7)?;
                ctx.sync()?;
                let y = x.id();
                ctx.get((me + 2) % p, y, 0..2, y, 4)?;
                ctx.send(0, &[1, 2, 3, 4], &[0u8; 10])?;
                ctx.sync()?;
                Ok(())
            })
            .unwrap()
            .1
    })
}

#[test]
fn counts_of_a_known_program() {
    let prof = known_program();
    assert_eq!(prof.p, 3);
    assert!(prof.path.is_empty() && prof.nested.is_empty());
    // Three syncs, then the end.
    assert_eq!(prof.supersteps.len(), 4);
    let s0 = &prof.supersteps[0];
    assert!(
        s0.procs
            .iter()
            .all(|s| s.words_sent == 0 && s.words_received == 0)
    );
    // Superstep 1: pid i sends i + 1 words to i + 1, receives i words from i - 1 (pid 0 gets
    // 3 from pid 2); the put to itself is not counted.
    let s1 = &prof.supersteps[1];
    for i in 0..3 {
        let me = &s1.procs[i];
        let from = (i + 2) % 3;
        assert_eq!(me.words_sent, i as u64 + 1, "pid {i}");
        assert_eq!(me.bytes_sent, 8 * (i as u64 + 1));
        assert_eq!(me.words_received, from as u64 + 1, "pid {i}");
        assert_eq!((me.messages_sent, me.messages_received), (0, 0));
    }
    assert_eq!(s1.h(), 3);
    // Superstep 2: everyone reads 2 words from i + 2 (sent by the source); messages of 14
    // bytes (2 words) to pid 0, pid 0's own not counted.
    let s2 = &prof.supersteps[2];
    for i in 0..3 {
        let me = &s2.procs[i];
        let to_zero = u64::from(i != 0);
        assert_eq!(me.messages_sent, to_zero, "pid {i}");
        assert_eq!(
            me.words_sent,
            2 + 2 * to_zero,
            "pid {i}: read by i + 1, message"
        );
        assert_eq!(me.bytes_sent, 16 + 14 * to_zero);
    }
    assert_eq!(s2.procs[0].messages_received, 2);
    assert_eq!(s2.procs[0].words_received, 2 + 4);
    assert_eq!(s2.procs[1].words_received, 2);
    assert_eq!(s2.h(), 6);
    assert_eq!(prof.supersteps[3].h(), 0);
    for s in &prof.supersteps {
        for p in &s.procs {
            assert!(p.compute >= 0.0 && p.sync >= 0.0 && p.compute.is_finite());
        }
        assert!(s.imbalance() >= 1.0 || s.w() == 0.0);
    }
}

#[test]
fn high_performance_primitives_are_counted() {
    let (_, prof) = within(60, || {
        Run::new(2)
            .run_profiled(|ctx| {
                let other = 1 - ctx.pid();
                let x = ctx.push_reg(vec![1.0f64; 16])?;
                ctx.sync()?;
                let mut local = [0.0f64; 5];
                // SAFETY: `x` is only read in this superstep; `local` is ours.
                unsafe { ctx.direct_get(other, &x, 0, &mut local)? };
                ctx.sync()?;
                let data = [0u8; 24];
                // SAFETY: `data` lives unchanged until the sync; `x` is written only by the
                // other process's hpput at offset 8..11 (disjoint from anyone's reads).
                unsafe {
                    ctx.hpsend(other, &[], &data)?;
                    ctx.hpput(other, &[2.0f64; 3], &x, 8)?;
                }
                ctx.sync()?;
                while ctx.hpmove()?.is_some() {}
                Ok(())
            })
            .unwrap()
    });
    // direct_get copies at once: counted, as immediate, and left out of the sync's h.
    let s1 = &prof.supersteps[1];
    assert_eq!((s1.procs[0].words_received, s1.procs[0].words_sent), (5, 5));
    let p0 = &s1.procs[0];
    assert_eq!(
        (p0.immediate_words_received, p0.immediate_words_sent),
        (5, 5)
    );
    assert_eq!((s1.h(), s1.h_immediate()), (0, 5));
    // hpput is immediate too; hpsend's message is delivered by the sync.
    let s2 = &prof.supersteps[2];
    assert_eq!(s2.procs[1].words_sent, 3 + 3);
    assert_eq!(s2.procs[1].immediate_words_sent, 3);
    assert_eq!(s2.procs[1].messages_received, 1);
    assert_eq!((s2.h(), s2.h_immediate()), (3, 3));
}

/// A buffered get counts the same through the typed and the raw (C ABI) primitive.
#[test]
fn raw_gets_are_counted_as_typed_ones() {
    let (_, prof) = within(60, || {
        Run::new(2)
            .run_profiled(|ctx| {
                let other = 1 - ctx.pid();
                let x = ctx.push_reg(vec![7u64; 1000])?;
                let mut raw = Box::new([0u64; 1000]);
                let at = raw.as_mut_ptr() as *mut u8;
                // SAFETY: `raw` outlives the run's use of it (popped and synced below), and no
                // reference to it is held across a sync.
                unsafe { ctx.push_reg_raw(at, 8000)? };
                ctx.sync()?;
                ctx.get(other, &x, .., &x, 0)?;
                ctx.sync()?;
                // SAFETY: `raw` stays allocated until after the sync, unreferenced.
                unsafe { ctx.get_raw(other, at, 0, at, 8000)? };
                ctx.sync()?;
                ctx.pop_reg_raw(at)?;
                ctx.sync()?;
                Ok(raw[999])
            })
            .unwrap()
    });
    for step in [1, 2] {
        let s = &prof.supersteps[step];
        assert_eq!(
            (s.procs[0].words_received, s.procs[1].words_sent, s.h()),
            (1000, 1000, 1000),
            "superstep {step}"
        );
    }
}

#[test]
fn nested_runs_are_attached_to_their_parent() {
    let (_, prof) = within(60, || {
        Run::new(2)
            .run_profiled(|ctx| {
                ctx.run(2, |n| {
                    n.send(1 - n.pid(), &[], &[0u8; 8])?;
                    n.sync()
                })?;
                ctx.sync()
            })
            .unwrap()
    });
    assert_eq!(prof.nested.len(), 2, "one nested run per top-level process");
    let mut paths: Vec<Vec<usize>> = prof.nested.iter().map(|n| n.path.clone()).collect();
    paths.sort();
    assert_eq!(paths, [vec![0], vec![1]]);
    for n in &prof.nested {
        assert_eq!((n.p, n.supersteps.len()), (2, 2));
        assert_eq!(n.supersteps[0].h(), 1);
    }
    // Not profiled when told so.
    let (_, prof) = Run::new(2)
        .run_profiled(|ctx| {
            ctx.run_with(Run::new(2).profile(false), |n| n.sync())?;
            Ok(())
        })
        .unwrap();
    assert!(prof.nested.is_empty());
}

#[test]
fn report_predicts_from_the_parameters() {
    let prof = known_program();
    let params = Params {
        g: 1e-6,
        l: 1e-3,
        ..Params::DEFAULT
    };
    let report = prof.report(&params);
    assert_eq!(report.rows.len(), 4);
    for (row, s) in report.rows.iter().zip(&prof.supersteps) {
        let want = s.w() + s.h() as f64 * 1e-6 + 1e-3;
        assert!((row.predicted - want).abs() < 1e-15, "{row:?}");
        assert_eq!(row.h, s.h());
        assert_eq!(row.measured, s.measured());
    }
    let text = report.to_string();
    assert!(
        text.contains("top-level run: p = 3, 4 supersteps"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(v["supersteps"].as_array().unwrap().len(), 4);
    assert_eq!(v["supersteps"][2]["h"], 6);
    let (m, p) = report.totals();
    // (serde_json's default float parsing may be off by an ulp)
    assert!((v["measured_seconds"].as_f64().unwrap() - m).abs() <= 1e-12 * m);
    assert!((v["predicted_seconds"].as_f64().unwrap() - p).abs() <= 1e-12 * p);
}

#[test]
fn a_failing_profiled_run_returns_its_error() {
    let r = within(60, || {
        Run::new(3).run_profiled(|ctx| {
            ctx.sync()?;
            if ctx.pid() == 1 {
                return Err(ctx.abort("stop here"));
            }
            ctx.sync()
        })
    });
    let e = r.unwrap_err();
    assert!(e.to_string().contains("stop here"), "{e}");
}

/// The environment variable, through a child process (it is read once per process): this
/// test binary re-run with `MBSP_PROFILE` set, running only the child half below.
#[test]
fn environment_variable_reports_every_top_level_run() {
    if std::env::var_os("MBSP_PROFILE_CHILD").is_some() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let dir = std::env::temp_dir().join(format!("mbsp-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("run.json");
    let svg = dir.join("run.svg");
    for (value, text) in [
        ("1", true),
        (json.to_str().unwrap(), false),
        (svg.to_str().unwrap(), false),
    ] {
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                &common::test_name(module_path!(), "child_runs_a_program"),
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MBSP_PROFILE", value)
            .env("MBSP_PROFILE_CHILD", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        if text {
            assert!(
                err.contains("mbsp profile: top-level run: p = 2, 2 supersteps"),
                "{err}"
            );
            assert!(err.contains("mbsp profile: BSP parameters: "), "{err}");
        } else if value.ends_with(".svg") {
            let pic = std::fs::read_to_string(&svg).unwrap();
            assert!(pic.starts_with("<svg") && pic.trim_end().ends_with("</svg>"));
            // Two lanes; the region's name marks where it starts.
            assert!(pic.contains(">pid 1<") && pic.contains(">talk<"), "{pic}");
        } else {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            assert_eq!(v["p"], 2);
            assert_eq!(v["supersteps"][0]["h"], 1);
            assert_eq!(v["supersteps"][0]["region"], "talk");
            assert_eq!(v["regions"][0]["name"], "talk");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The program the environment test runs in a child process (a no-op otherwise).
#[test]
fn child_runs_a_program() {
    if std::env::var_os("MBSP_PROFILE_CHILD").is_none() {
        return;
    }
    mbsp::run(2, |ctx| {
        ctx.region("talk", |ctx| {
            ctx.send(1 - ctx.pid(), &[], &[0u8; 8])?;
            ctx.sync()
        })
    })
    .unwrap();
}

/// p = 2: superstep 0 in "setup"; supersteps 1-3 in "solve/halo" (one word to the other
/// process each); superstep 4 in "solve", where pid 0 is in "solve/a" and pid 1 in "solve/b"
/// (their innermost common region is "solve"); superstep 5 (to the end) outside regions.
fn program_with_regions() -> Profile {
    within(60, || {
        Run::new(2)
            .run_profiled(|ctx| {
                let other = 1 - ctx.pid();
                let x = ctx.region("setup", |ctx| {
                    let x = ctx.push_reg(vec![0u64; 4])?;
                    ctx.sync()?;
                    Ok::<_, mbsp::Error>(x)
                })?;
                ctx.region("solve", |ctx| {
                    for i in 0..3 {
                        ctx.region("halo", |ctx| {
                            ctx.put(other, &[i as u64], &x, 0)?;
                            ctx.sync()
                        })?;
                    }
                    // Begun and not ended: closed with "solve".
                    ctx.region_begin(if ctx.pid() == 0 { "a" } else { "b" });
                    ctx.sync()
                })?;
                Ok(())
            })
            .unwrap()
            .1
    })
}

#[test]
fn regions_nest_and_their_totals_add_up() {
    let prof = program_with_regions();
    assert_eq!(prof.supersteps.len(), 6);
    let names: Vec<String> = (0..6)
        .map(|i| {
            prof.superstep_region(i)
                .map_or(String::new(), |r| prof.region_path(r))
        })
        .collect();
    assert_eq!(
        names,
        [
            "setup",
            "solve/halo",
            "solve/halo",
            "solve/halo",
            "solve",
            ""
        ]
    );
    // Each process's own region is kept.
    assert_eq!(
        prof.region_path(prof.supersteps[4].procs[0].region.unwrap()),
        "solve/a"
    );
    assert_eq!(
        prof.region_path(prof.supersteps[4].procs[1].region.unwrap()),
        "solve/b"
    );

    let report = prof.report(&Params::DEFAULT);
    let regions: Vec<(&str, usize, usize, u64)> = report
        .regions
        .iter()
        .map(|t| (t.name.as_str(), t.depth, t.supersteps, t.h))
        .collect();
    assert_eq!(
        regions,
        [
            ("setup", 1, 1, 0),
            ("solve", 1, 4, 3),
            ("solve/halo", 2, 3, 3),
            ("solve/a", 2, 0, 0),
            ("solve/b", 2, 0, 0),
            ("(outside regions)", 0, 1, 0),
        ]
    );
    // The regions outside any other and the supersteps outside regions make the run.
    let run = report.run_totals();
    let outer: Vec<_> = report.regions.iter().filter(|t| t.depth <= 1).collect();
    let sum = |f: &dyn Fn(&mbsp::profile::Totals) -> f64| outer.iter().map(|t| f(t)).sum::<f64>();
    assert_eq!(
        outer.iter().map(|t| t.supersteps).sum::<usize>(),
        run.supersteps
    );
    assert_eq!(outer.iter().map(|t| t.h).sum::<u64>(), run.h);
    for (what, part, whole) in [
        ("measured", sum(&|t| t.measured), run.measured),
        ("predicted", sum(&|t| t.predicted), run.predicted),
        ("w", sum(&|t| t.w), run.w),
        ("wait", sum(&|t| t.wait), run.wait),
    ] {
        assert!(
            (part - whole).abs() <= 1e-9 * whole.max(1e-9),
            "{what}: {part} vs {whole}"
        );
    }
    // A region's rows are its own: the report's rows name it.
    let halo = report.regions.iter().position(|t| t.name == "solve/halo");
    assert_eq!(report.rows.iter().filter(|r| r.region == halo).count(), 3);

    // Text and JSON carry the regions and the per-process wait.
    let text = report.to_string();
    assert!(text.contains("regions (a superstep counts"), "{text}");
    assert!(text.contains("    halo"), "{text}");
    assert!(
        text.contains("processes (wait: time in syncs waiting"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(v["regions"][2]["name"], "solve/halo");
    assert_eq!(v["regions"][2]["supersteps"], 3);
    assert_eq!(v["supersteps"][4]["region"], "solve");
    assert!(v["supersteps"][5]["region"].is_null());
    assert_eq!(v["processes"].as_array().unwrap().len(), 2);
    assert_eq!(v["levels"][0]["supersteps"], 6);
}

#[test]
fn each_process_waits_at_most_its_time_in_syncs() {
    let prof = program_with_regions();
    let report = prof.report(&Params::DEFAULT);
    assert_eq!(report.processes.len(), 2);
    for (pid, t) in report.processes.iter().enumerate() {
        assert_eq!(t.pid, pid);
        assert!(t.wait >= 0.0 && t.wait <= t.sync + 1e-12, "{t:?}");
        let sync: f64 = prof.supersteps.iter().map(|s| s.procs[pid].sync).sum();
        assert!((t.sync - sync).abs() <= 1e-12);
        // 3 words out in the halo supersteps.
        assert_eq!((t.words_sent, t.words_received), (3, 3));
    }
    // In every superstep some process (the last to arrive) waited for no one.
    for s in &prof.supersteps {
        assert!((0..2).any(|pid| s.wait(pid) == 0.0));
    }
}

#[test]
fn levels_total_the_nested_runs() {
    let (_, prof) = within(60, || {
        Run::new(2)
            .run_profiled(|ctx| {
                ctx.run(2, |inner| {
                    inner.region("inner", |c| c.sync())?;
                    inner.sync()
                })?;
                ctx.sync()
            })
            .unwrap()
    });
    let report = prof.report(&Params::DEFAULT);
    let levels = report.levels();
    assert_eq!(levels.len(), 2);
    assert_eq!((levels[0].depth, levels[0].supersteps), (0, 2));
    assert_eq!(levels[1].name, "2 runs nested 1 deep");
    // Three supersteps per nested run (two syncs, then the end).
    assert_eq!(levels[1].supersteps, 6);
    let nested_measured: f64 = report.nested.iter().map(|n| n.totals().0).sum();
    assert!((levels[1].measured - nested_measured).abs() <= 1e-12);
    // The nested runs have their own regions.
    assert!(report.regions.is_empty());
    assert_eq!(report.nested[0].regions[0].name, "inner");
    assert!(report.to_string().contains("per level of nesting:"));
}

#[test]
fn ending_a_region_that_is_not_open_is_a_misuse() {
    for profiled in [false, true] {
        let e = within(60, move || {
            Run::new(2)
                .profile(profiled)
                .run(|ctx| {
                    ctx.region("r", |ctx| ctx.sync())?;
                    ctx.region_end()
                })
                .unwrap_err()
        });
        let text = e.to_string();
        assert!(
            text.contains("region_end") && text.contains("no region is open"),
            "{text}"
        );
        assert!(text.contains("superstep 1"), "{text}");
    }
}

/// The profile says where every process ran (its placement), in nested runs too, and the
/// report and its JSON show it.
#[test]
fn the_profile_names_where_each_process_ran() {
    let machine = mbsp::Machine::synthetic("package:2 core:2 pu:1").unwrap();
    let (_, prof) = within(60, move || {
        Run::new(2)
            .machine(machine)
            .run_profiled(|ctx| {
                ctx.run(2, |n| n.sync())?;
                ctx.sync()
            })
            .unwrap()
    });
    assert_eq!(
        prof.places,
        [
            "package 0, NUMA -, cores 0-1, PUs 0-1 (not bound: planned for another machine \
             (synthetic \"package:2 core:2 pu:1\"))",
            "package 1, NUMA -, cores 2-3, PUs 2-3 (not bound: planned for another machine \
             (synthetic \"package:2 core:2 pu:1\"))"
        ]
    );
    let inner: Vec<&str> = prof
        .nested
        .iter()
        .flat_map(|n| &n.places)
        .map(|w| &w[..18])
        .collect();
    assert_eq!(inner.len(), 4);
    assert!(inner.iter().all(|w| w.starts_with("package ")), "{inner:?}");
    let report = prof.report(&Params::DEFAULT);
    assert_eq!(report.processes[1].place, prof.places[1]);
    assert!(
        report.to_string().contains("cores 2-3, PUs 2-3"),
        "{report}"
    );
    assert!(
        report.to_json().contains("\"place\":\"package 1, NUMA -"),
        "{}",
        report.to_json()
    );
}

/// p = 2, 100 iterations: process 0 starts a nested run of 2 (one sync), then the top level
/// syncs; in iteration 50 the nested run's processes each start a run of their own (2 deep),
/// in a region of the nested run that also syncs.
fn hundred_nested_runs() -> Profile {
    within(60, || {
        Run::new(2)
            .run_profiled(|ctx| {
                for i in 0..100 {
                    if ctx.pid() == 0 {
                        ctx.run(2, |inner| {
                            if i == 50 {
                                inner.region("deep", |c| {
                                    c.run(2, |d| d.sync())?;
                                    c.sync()
                                })?;
                            }
                            inner.sync()
                        })?;
                    }
                    ctx.sync()?;
                }
                Ok(())
            })
            .unwrap()
            .1
    })
}

#[test]
fn nested_runs_are_summarised_per_level() {
    let prof = hundred_nested_runs();
    assert_eq!(prof.nested.len(), 100);
    assert_eq!(prof.nested[37].started_in, Some(37));
    let report = prof.report(&Params::DEFAULT);
    let text = report.to_string();
    assert!(text.lines().count() <= 60, "{text}");
    assert!(
        text.contains("  runs nested 1 deep: 100 runs, 201 supersteps, measured "),
        "{text}"
    );
    assert!(
        text.contains("    each run: p = 2, 2-3 supersteps, measured "),
        "{text}"
    );
    assert!(
        text.contains("    the 3 longest of the 100 runs (every run: MBSP_PROFILE=full"),
        "{text}"
    );
    assert!(
        text.contains("  runs nested 2 deep: 2 runs, 4 supersteps"),
        "{text}"
    );
    assert!(text.contains("    regions, over all 100 runs:"), "{text}");
    assert!(!text.contains("run nested in process"), "{text}");
    assert!(text.contains("per level of nesting:"), "{text}");
    // In full, every run, each saying where it ran.
    let full = report.text(mbsp::profile::Detail::Full).to_string();
    assert_eq!(
        full.matches("  run nested in process 0 (superstep ")
            .count(),
        100
    );
    assert!(full.contains("  run nested in process 0 (superstep 37): p = 2, 2 supersteps"));
    assert!(full.contains("    run nested in process 0/0 (superstep 0): p = 2"));
    // The JSON has every run.
    let v: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(v["nested"].as_array().unwrap().len(), 100);
    assert_eq!(v["nested"][37]["started_in"], 37);
    assert_eq!(v["nested"][50]["nested"][0]["path"][0], 0);
}

/// Supersteps whose sync was lazy (declared counts) are marked: in the profile, the report's
/// rows and totals, the text and the JSON.
#[test]
fn lazy_supersteps_are_marked() {
    for p in [2, 3] {
        let (_, prof) = within(60, move || {
            Run::new(p)
                .run_profiled(|ctx| {
                    let (me, p) = (ctx.pid(), ctx.nprocs());
                    let x = ctx.push_reg(vec![0u64; 1])?;
                    ctx.sync()?;
                    for _ in 0..3 {
                        ctx.put((me + 1) % p, &[me as u64], &x, 0)?;
                        ctx.declare_incoming(1)?;
                        ctx.sync()?;
                    }
                    ctx.put((me + 1) % p, &[me as u64], &x, 0)?;
                    ctx.sync()?;
                    // Declared before the end: the final sync is a full one all the same.
                    ctx.declare_incoming(0)
                })
                .unwrap()
        });
        let lazy: Vec<bool> = prof.supersteps.iter().map(|s| s.lazy()).collect();
        assert_eq!(lazy, [false, true, true, true, false, false], "p = {p}");
        assert_eq!(prof.supersteps[2].procs[1].declared, Some(1));
        assert_eq!(prof.supersteps[4].procs[1].declared, None);
        let report = prof.report(&Params::DEFAULT);
        assert!(report.rows[1].lazy && !report.rows[4].lazy);
        assert_eq!(report.run_totals().lazy, 3);
        let text = report.to_string();
        assert!(
            text.contains(&format!("top-level run: p = {p}, 6 supersteps (3 lazy), ")),
            "{text}"
        );
        let marks: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("superstep "))
            .skip(1)
            .map(|l| l.split_whitespace().nth(13).unwrap()) // after 4 times with their units
            .collect();
        assert_eq!(
            marks,
            ["full", "lazy", "lazy", "lazy", "full", "full"],
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(v["supersteps"][1]["lazy"], true);
        assert_eq!(v["supersteps"][4]["lazy"], false);
        assert_eq!(v["levels"][0]["lazy"], 3);
    }
}

/// Many one-word puts pay the per-message g: the profile counts the buffered requests, and the
/// prediction charges `g_msg - g` for each beyond its word.
#[test]
fn requests_are_counted_and_priced_by_the_per_message_g() {
    let (_, prof) = mbsp::Run::new(2)
        .run_profiled(|ctx| {
            let r = ctx.push_reg(vec![0u64; 16])?;
            ctx.sync()?;
            let other = 1 - ctx.pid();
            if ctx.pid() == 0 {
                for i in 0..10 {
                    ctx.put(other, &[i as u64], &r, i)?; // 10 requests of one word
                }
                ctx.get(other, &r, 0..4, &r, 12)?; // one request of 4 words
                // SAFETY: nothing writes `r` in this superstep but the sync.
                unsafe { ctx.hpput(other, &[7u64], &r, 15)? }; // copied at once: no request
            }
            ctx.sync()?;
            Ok(())
        })
        .unwrap();
    let s = &prof.supersteps[1];
    assert_eq!(
        (s.procs[0].requests_sent, s.procs[0].requests_received),
        (10, 1)
    );
    assert_eq!(
        (s.procs[1].requests_sent, s.procs[1].requests_received),
        (1, 10)
    );
    assert_eq!(s.requests(), 10, "the most any process sent or received");
    let params = Params {
        g: 1e-9,
        g_msg: 21e-9,
        l: 1e-6,
        ..Params::DEFAULT
    };
    let row = &prof.report(&params).rows[1];
    let want = s.w() + s.h() as f64 * 1e-9 + 10.0 * 20e-9 + 1e-6;
    assert!((row.predicted - want).abs() < 1e-15, "{row:?}");
}

/// Six processes on a synthetic machine of two hardware threads, three per thread (compact:
/// pids 0-2 on the first), each putting `pid + 1` one-word puts to the next: the report says
/// that they took turns, prices each thread's words, requests and computation together (as
/// threads and as coroutines), where one process per thread would have priced the largest
/// process's alone, and adds two turns per superstep at the parameters' price (and their
/// communication's where the superstep communicates).
#[test]
fn processes_that_take_turns_are_priced_by_their_hardware_thread() {
    for coroutines in [false, true] {
        let two = mbsp::Machine::synthetic("package:1 core:2 pu:1").unwrap();
        let (_, prof) = Run::new(6)
            .machine(two)
            .policy(mbsp::Policy::Compact)
            .coroutines(coroutines)
            .run_profiled(|ctx| {
                let r = ctx.push_reg(vec![0u64; 8])?;
                ctx.sync()?;
                let (me, p) = (ctx.pid(), ctx.nprocs());
                for i in 0..=me {
                    ctx.put((me + 1) % p, &[i as u64], &r, i)?;
                }
                ctx.sync()
            })
            .unwrap();
        assert_eq!(prof.turns(), 3, "coroutines: {coroutines}");
        assert_eq!(prof.coroutines, coroutines);
        let params = Params {
            g: 1e-9,
            g_msg: 21e-9,
            l: 1e-6,
            turn: 3e-6,
            turn_coroutine: 5e-8,
            turn_comm: 7e-7,
            turn_comm_coroutine: 9e-9,
            ..Params::DEFAULT
        };
        let report = prof.report(&params);
        assert_eq!((report.turns, report.coroutines), (3, coroutines));
        let (turn, comm) = if coroutines {
            (5e-8, 9e-9)
        } else {
            (3e-6, 7e-7)
        };
        assert_eq!(report.turn, turn);
        assert!(
            (report.turn_comm - comm).abs() < 1e-18,
            "{}",
            report.turn_comm
        );
        let s = &prof.supersteps[1];
        // Words and requests of pids 0-2 and of 3-5, each process's larger side: 1 + 2 + 3
        // received by pids 1-3 ... the second thread's pids 3, 4, 5 send 4, 5, 6 and receive
        // 3, 4, 5: 15; the first's send 1, 2, 3 and receive 6, 1, 2: 6 + 2 + 3 = 11.
        let sum = |pids: std::ops::Range<usize>, f: &dyn Fn(&mbsp::profile::ProcStep) -> f64| {
            pids.map(|q| f(&s.procs[q])).sum::<f64>()
        };
        let compute = |q: &mbsp::profile::ProcStep| q.compute;
        let w = sum(0..3, &compute).max(sum(3..6, &compute));
        let want = w + 15.0 * 1e-9 + 15.0 * 20e-9 + 1e-6 + 2.0 * (turn + comm);
        let row = &report.rows[1];
        assert!((row.predicted - want).abs() < 1e-15, "{row:?}, want {want}");
        // The first superstep only registers: its turns are an empty one's.
        let s0 = &prof.supersteps[0];
        let w0 = {
            let sum = |pids: std::ops::Range<usize>| pids.map(|q| s0.procs[q].compute).sum::<f64>();
            sum(0..3).max(sum(3..6))
        };
        let row = &report.rows[0];
        let want = w0 + 1e-6 + 2.0 * turn;
        assert!((row.predicted - want).abs() < 1e-15, "{row:?}, want {want}");
        let text = report.to_string();
        assert!(
            text.contains("up to 3 processes took turns on each hardware thread"),
            "{text}"
        );
        let comm_key = if coroutines {
            "`turn_comm_coroutine`"
        } else {
            "`turn_comm`"
        };
        assert!(text.contains(comm_key), "{text}");
        let v: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(v["turns"], 3);
        assert_eq!(v["coroutines"], coroutines);
        assert_eq!(v["turn"].as_f64(), Some(turn));
        assert!((v["turn_comm"].as_f64().unwrap() - comm).abs() < 1e-18);
    }
    // One process per hardware thread: no turns to price.
    let two = mbsp::Machine::synthetic("package:1 core:2 pu:1").unwrap();
    let (_, prof) = Run::new(2)
        .machine(two)
        .run_profiled(|ctx| ctx.sync())
        .unwrap();
    let report = prof.report(&Params::DEFAULT);
    assert_eq!((prof.turns(), report.turns), (1, 1));
    let s = &prof.supersteps[0];
    let want = s.w() + Params::DEFAULT.time_of(1, s.h() as f64, s.requests() as f64);
    assert!((report.rows[0].predicted - want).abs() < 1e-15);
    assert!(!report.to_string().contains("took turns"));
}
