//! Checkpoint and restart (issue 43): a run stopped at any superstep and restarted from its
//! checkpoints ends with the uninterrupted run's answer, bit for bit; damaged checkpoints are
//! skipped for older ones; a checkpoint that cannot be this run's is an error that says why.

mod kill;
mod model;

use mbsp::{Checkpoints, Ctx, ErrorKind, Result, Run};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The program's own variables, handed to every checkpoint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct State {
    /// Iterations done.
    pub it: u64,
    /// A running value fed by every message received.
    pub acc: f64,
    /// The tags of every message received, in order.
    pub log: Vec<u64>,
}

/// Cells per process.
const N: usize = 6;

/// A 1D stencil on a ring of row blocks (halo cells by put) that also sends a message to the
/// right neighbour every superstep, read in the next: the checkpoint's superstep always has
/// messages in flight, and every value depends on all of them. `stop_at`: process `who`
/// aborts when iteration `k` begins (a crash). Returns the cells and the state.
pub fn stencil(
    ctx: &mut Ctx,
    iters: u64,
    stop_at: Option<(u64, usize)>,
) -> Result<(Vec<f64>, State)> {
    let (p, me) = (ctx.nprocs(), ctx.pid());
    let mut u = ctx.push_reg(vec![0.0f64; N + 2])?; // cells 1..=N, halos 0 and N+1
    ctx.sync()?;
    let mut s = match ctx.resume::<State>()? {
        Some(s) => s,
        None => {
            for (i, x) in ctx.local_mut(&mut u)?.iter_mut().enumerate() {
                *x = ((me * N + i) % 7) as f64 * 0.5;
            }
            ctx.set_tagsize(8)?;
            ctx.sync()?;
            State {
                it: 0,
                acc: 0.0,
                log: Vec::new(),
            }
        }
    };
    let (left, right) = ((me + p - 1) % p, (me + 1) % p);
    while s.it < iters {
        while let Some(m) = ctx.hpmove()? {
            let tag: u64 = m.tag_as();
            s.acc = s.acc * 0.5 + m.payload_as::<f64>()[0] + tag as f64 * 1e-3;
            s.log.push(tag);
        }
        if stop_at == Some((s.it, me)) {
            return Err(ctx.abort("stopped here by the test"));
        }
        let w = ctx.local_mut(&mut u)?;
        let old = w.to_vec();
        for i in 1..=N {
            w[i] = 0.25 * old[i - 1] + 0.5 * old[i] + 0.25 * old[i + 1] + 1e-3 * s.acc;
        }
        let (first, last) = (w[1], w[N]);
        ctx.put(left, &[first], &u, N + 1)?;
        ctx.put(right, &[last], &u, 0)?;
        ctx.send_pod(right, &(s.it * 100 + me as u64), &[s.acc + first])?;
        s.it += 1;
        ctx.sync_checkpoint(&s)?;
    }
    Ok((ctx.local(&u)?.to_vec(), s))
}

/// A fresh folder for one test.
pub fn folder(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mbsp-ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The complete checkpoints in `dir`, oldest first.
fn complete(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|d| d.join("MANIFEST").is_file());
    v.sort();
    v
}

fn uninterrupted(p: usize, iters: u64) -> Vec<(Vec<f64>, State)> {
    Run::new(p).run(|ctx| stencil(ctx, iters, None)).unwrap()
}

/// Bit-for-bit equality (f64 compared by bits).
fn same(a: &[(Vec<f64>, State)], b: &[(Vec<f64>, State)]) -> bool {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    a.len() == b.len()
        && a.iter().zip(b).all(|((ua, sa), (ub, sb))| {
            bits(ua) == bits(ub)
                && (sa.it, sa.acc.to_bits(), &sa.log) == (sb.it, sb.acc.to_bits(), &sb.log)
        })
}

#[test]
fn restarts_after_crashes_give_the_uninterrupted_answer() {
    // p = 5 and 8 on this machine's cores are oversubscribed.
    for (p, background) in [
        (1, false),
        (2, false),
        (2, true),
        (3, true),
        (5, false),
        (8, true),
    ] {
        let iters = 20;
        let want = uninterrupted(p, iters);
        let dir = folder(&format!("crash-{p}-{background}"));
        let policy = Checkpoints::in_folder(&dir)
            .every_supersteps(3)
            .keep(2)
            .background(background);
        // Crash at several iterations, each restart resuming from the last checkpoint.
        let mut got = None;
        for (k, stop) in [
            (4, 0),
            (5, p - 1),
            (11, p / 2),
            (12, 0),
            (19, p - 1),
            (u64::MAX, 0),
        ] {
            let r = Run::new(p)
                .checkpoints(policy.clone())
                .run(|ctx| stencil(ctx, iters, Some((k, stop))));
            match r {
                Ok(r) => got = Some(r),
                Err(e) => assert_eq!(e.message(), "stopped here by the test", "p = {p}: {e}"),
            }
        }
        assert!(same(&got.expect("the last run ends"), &want), "p = {p}");
        assert_eq!(complete(&dir).len(), 2, "keep(2)");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_run_without_checkpoints_to_resume_starts_fresh_and_a_finished_one_resumes_at_its_end() {
    let dir = folder("fresh");
    let policy = Checkpoints::in_folder(&dir).every_supersteps(4);
    let first = Run::new(2)
        .checkpoints(policy.clone())
        .run(|ctx| stencil(ctx, 8, None))
        .unwrap();
    assert!(same(&first, &uninterrupted(2, 8)));
    // The folder's newest checkpoint is the end (superstep 8 + 2): a longer run goes on from it.
    let longer = Run::new(2)
        .checkpoints(policy)
        .run(|ctx| stencil(ctx, 12, None))
        .unwrap();
    assert!(same(&longer, &uninterrupted(2, 12)));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_superstep_count_and_the_tag_size_come_back() {
    let dir = folder("count");
    let policy = Checkpoints::in_folder(&dir);
    let _ = Run::new(3).checkpoints(policy.clone()).run(|ctx| {
        ctx.resume::<()>()?;
        ctx.set_tagsize(3)?;
        for _ in 0..4 {
            ctx.sync()?;
        }
        ctx.send(0, &[1, 2, ctx.pid() as u8], b"hi")?;
        ctx.checkpoint(&())?;
        assert_eq!(ctx.superstep(), 6);
        Err::<(), _>(ctx.abort("crash"))
    });
    let r = Run::new(3)
        .checkpoints(policy)
        .run(|ctx| {
            assert!(ctx.resume::<()>()?.is_some());
            let mut tags = Vec::new();
            while let Some(m) = ctx.hpmove()? {
                assert_eq!(m.payload, b"hi");
                tags.push((m.from, m.tag.to_vec()));
            }
            Ok((ctx.superstep(), ctx.tagsize(), tags))
        })
        .unwrap();
    assert_eq!(r[0].0, 6);
    assert_eq!(r[0].1, 3);
    let mut tags = r[0].2.clone();
    tags.sort();
    assert_eq!(
        tags,
        (0..3).map(|i| (i, vec![1, 2, i as u8])).collect::<Vec<_>>()
    );
    assert!(r[1].2.is_empty() && r[2].2.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Run `iters` supersteps checkpointing every one, then damage the newest checkpoint with `f`;
/// the next run must resume from the one before (superstep `iters + 1`, as `stencil` counts).
fn resume_after_damage(name: &str, damage: impl Fn(&Path)) -> Vec<(Vec<f64>, State)> {
    let dir = folder(name);
    let policy = Checkpoints::in_folder(&dir).every_supersteps(1).keep(3);
    let _ = Run::new(2)
        .checkpoints(policy.clone())
        .run(|ctx| stencil(ctx, 9, Some((6, 1))));
    let newest = complete(&dir).pop().expect("checkpoints");
    damage(&newest);
    let had_manifest = newest.join("MANIFEST").exists();
    let r = Run::new(2)
        .checkpoints(policy)
        .run(|ctx| stencil(ctx, 9, None))
        .unwrap();
    // A damaged checkpoint the restart went past is set aside; one without a manifest was
    // never a candidate (and is pruned once newer ones are complete).
    let aside = PathBuf::from(format!("{}.damaged", newest.display()));
    assert_eq!(aside.exists(), had_manifest, "{}", aside.display());
    std::fs::remove_dir_all(&dir).unwrap();
    r
}

#[test]
fn a_damaged_checkpoint_is_skipped_for_the_previous_one() {
    let want = uninterrupted(2, 9);
    let truncated = resume_after_damage("truncated", |d| {
        let f = d.join("part-1");
        let len = std::fs::metadata(&f).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
    });
    assert!(same(&truncated, &want));
    let flipped = resume_after_damage("flipped", |d| {
        let f = d.join("part-0");
        let mut b = std::fs::read(&f).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 1;
        std::fs::write(&f, b).unwrap();
    });
    assert!(same(&flipped, &want));
    let missing = resume_after_damage("missing", |d| {
        std::fs::remove_file(d.join("part-1")).unwrap()
    });
    assert!(same(&missing, &want));
    // Killed before its manifest: not complete, never read.
    let unfinished = resume_after_damage("unfinished", |d| {
        std::fs::remove_file(d.join("MANIFEST")).unwrap()
    });
    assert!(same(&unfinished, &want));
}

#[test]
fn a_folder_of_damaged_checkpoints_only_is_an_error_naming_them() {
    let dir = folder("all-damaged");
    let policy = Checkpoints::in_folder(&dir).every_supersteps(2);
    let _ = Run::new(2)
        .checkpoints(policy.clone())
        .run(|ctx| stencil(ctx, 3, Some((3, 0))));
    for d in complete(&dir) {
        std::fs::write(d.join("part-0"), b"nonsense").unwrap();
    }
    let e = Run::new(2)
        .checkpoints(policy)
        .run(|ctx| stencil(ctx, 3, None))
        .unwrap_err();
    assert_eq!((e.kind(), e.op()), (ErrorKind::System, "resume"));
    assert!(e.message().starts_with("no usable checkpoint in "), "{e}");
    assert!(
        e.message().contains("part-0: 8 bytes; the manifest says"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Make one checkpoint of `stencil` at p = 2 in a fresh folder; the policy.
fn one_checkpoint(name: &str) -> (PathBuf, Checkpoints) {
    let dir = folder(name);
    let policy = Checkpoints::in_folder(&dir).every_supersteps(2);
    let _ = Run::new(2)
        .checkpoints(policy.clone())
        .run(|ctx| stencil(ctx, 1, Some((1, 0))));
    assert_eq!(complete(&dir).len(), 1);
    (dir, policy)
}

#[test]
fn a_checkpoint_that_is_not_this_runs_is_refused_with_the_reason() {
    let (dir, policy) = one_checkpoint("foreign");
    let e = Run::new(3)
        .checkpoints(policy.clone())
        .run(|ctx| stencil(ctx, 1, None))
        .unwrap_err();
    assert_eq!((e.kind(), e.op()), (ErrorKind::Misuse, "resume"));
    assert!(
        e.message().ends_with(
            "written by a run of 2 processes; this run has 3 (a restart needs the same number)"
        ),
        "{e}"
    );
    // Another registration.
    let e = Run::new(2)
        .checkpoints(policy.clone())
        .run(|ctx| {
            let _u = ctx.push_reg(vec![0.0f32; N + 2])?;
            ctx.sync()?;
            ctx.resume::<State>()
        })
        .unwrap_err();
    assert!(
        e.message().ends_with(
            "registration 0 (in push order) was 64 bytes of f64 at the checkpoint; it is 32 \
             bytes of f32 now"
        ),
        "{e}"
    );
    let e = Run::new(2)
        .checkpoints(policy.clone())
        .run(|ctx| {
            let _u = ctx.push_reg(vec![0.0f64; N + 2])?;
            ctx.sync()?;
            ctx.resume::<(u64, f64)>()
        })
        .unwrap_err();
    assert!(
        e.message()
            .ends_with("its state is a checkpoint::State; resume asked for a (u64, f64)"),
        "{e}"
    );
    // A checkpoint another program wrote.
    let manifest = complete(&dir)[0].join("MANIFEST");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mine = text.lines().nth(1).unwrap().to_string();
    let body: String = text
        .replace(&mine, "program heat")
        .lines()
        .filter(|l| !l.starts_with("crc "))
        .map(|l| format!("{l}\n"))
        .collect();
    let crc = crc32fast::hash(body.as_bytes());
    std::fs::write(&manifest, format!("{body}crc {crc:08x}\n")).unwrap();
    let e = Run::new(2)
        .checkpoints(policy)
        .run(|ctx| stencil(ctx, 1, None))
        .unwrap_err();
    let me = mine.strip_prefix("program ").unwrap();
    assert!(
        e.message()
            .ends_with(&format!("written by program \"heat\"; this is \"{me}\"")),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn misuses_are_errors_that_say_what_to_do() {
    let dir = folder("misuse");
    let policy = Checkpoints::in_folder(&dir);
    let run = || Run::new(2).checkpoints(policy.clone());
    let e = run()
        .run(|ctx| {
            ctx.resume::<State>()?;
            ctx.resume::<State>()
        })
        .unwrap_err();
    assert!(
        e.message().starts_with("called a second time in this run"),
        "{e}"
    );
    let e = run()
        .run(|ctx| {
            ctx.send(0, &[], b"x")?;
            ctx.resume::<State>()
        })
        .unwrap_err();
    assert!(
        e.message()
            .starts_with("called after this run communicated"),
        "{e}"
    );
    let e = run()
        .run(|ctx| {
            ctx.run(2, |nested| nested.sync_checkpoint(&1u8))?;
            Ok(())
        })
        .unwrap_err();
    assert_eq!(e.op(), "sync_checkpoint");
    assert!(
        e.message().starts_with("a nested run cannot checkpoint"),
        "{e}"
    );
    // One process checkpoints where another makes a plain sync: an error, not a hang, whether
    // the checkpoint is forced or due by the policy's superstep count.
    let every = Checkpoints::in_folder(&dir).every_supersteps(1);
    for (policy, forced) in [(policy.clone(), true), (every, false)] {
        let e = Run::new(3)
            .checkpoints(policy)
            .run(|ctx| {
                if ctx.pid() == 1 {
                    ctx.sync()
                } else if forced {
                    ctx.checkpoint(&0u8)
                } else {
                    ctx.sync_checkpoint(&0u8)
                }
            })
            .unwrap_err();
        assert_eq!((e.op(), e.pid()), ("sync", Some(1)), "{e}");
        assert!(
            e.message().starts_with(
                "pid 1 called sync where the other processes called sync_checkpoint or \
                 checkpoint and took a checkpoint"
            ),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    let e = Run::new(1).run(|ctx| ctx.checkpoint(&0u8)).unwrap_err();
    assert!(
        e.message().starts_with("this run has no checkpoint policy"),
        "{e}"
    );
    // Without a policy: a plain sync, and nothing to resume.
    let r = Run::new(2)
        .run(|ctx| {
            let none = ctx.resume::<State>()?.is_none();
            ctx.sync_checkpoint(&0u8)?;
            Ok((none, ctx.superstep()))
        })
        .unwrap();
    assert_eq!(r, vec![(true, 1), (true, 1)]);
    assert!(!dir.exists(), "nothing was written");
}

#[test]
fn a_checkpoint_that_cannot_be_written_warns_or_fails_as_asked() {
    // A folder below a regular file cannot be made: as a full disk, the write fails.
    let base = folder("unwritable");
    std::fs::create_dir_all(&base).unwrap();
    let file = base.join("a-file");
    std::fs::write(&file, b"").unwrap();
    let policy = Checkpoints::in_folder(file.join("ckpt")).every_supersteps(2);
    let steps = |ctx: &mut Ctx| {
        for i in 0..4u8 {
            ctx.sync_checkpoint(&i)?;
        }
        Ok(ctx.superstep())
    };
    let r = Run::new(2).checkpoints(policy.clone()).run(steps).unwrap();
    assert_eq!(r, vec![4, 4], "the run goes on");
    let e = Run::new(2)
        .checkpoints(policy.clone())
        .run(|ctx| ctx.resume::<u8>())
        .unwrap_err();
    assert!(
        e.message()
            .starts_with("cannot read the checkpoint folder "),
        "{e}"
    );
    for background in [false, true] {
        let e = Run::new(2)
            .checkpoints(policy.clone().required(true).background(background))
            .run(steps)
            .unwrap_err();
        assert_eq!((e.kind(), e.op()), (ErrorKind::System, "checkpoint"));
        assert!(
            e.message()
                .starts_with("the checkpoint of superstep 2 was not written ("),
            "{e}"
        );
        assert!(e.message().contains("a-file/ckpt/c"), "{e}");
    }
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn any_process_may_ask_for_a_checkpoint() {
    let dir = folder("ask");
    let policy = Checkpoints::in_folder(&dir);
    Run::new(3)
        .checkpoints(policy)
        .run(|ctx| {
            for i in 0..5u32 {
                if i == 3 && ctx.pid() == 2 {
                    ctx.request_checkpoint();
                }
                ctx.sync_checkpoint(&i)?;
            }
            Ok(())
        })
        .unwrap();
    let taken = complete(&dir);
    assert_eq!(taken.len(), 1);
    let manifest = std::fs::read_to_string(taken[0].join("MANIFEST")).unwrap();
    assert!(manifest.contains("\nsuperstep 4\n"), "{manifest}");
    std::fs::remove_dir_all(&dir).unwrap();
    // Alone (p = 1) too, asked or forced.
    Run::new(1)
        .checkpoints(Checkpoints::in_folder(&dir).keep(5))
        .run(|ctx| {
            ctx.request_checkpoint();
            ctx.sync_checkpoint(&1u8)?;
            ctx.sync_checkpoint(&2u8)?;
            ctx.checkpoint(&3u8)
        })
        .unwrap();
    let supersteps: Vec<String> = complete(&dir)
        .iter()
        .map(|d| std::fs::read_to_string(d.join("MANIFEST")).unwrap())
        .map(|m| m.lines().nth(3).unwrap().to_string())
        .collect();
    assert_eq!(supersteps, ["superstep 1", "superstep 3"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
