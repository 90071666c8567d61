//! Restarts after SIGKILL: a child process (this test binary, running the ignored test
//! `child_stencil`) computes a long stencil with checkpoints; the parent kills it at random
//! moments (computing, syncing, writing a checkpoint), starts it again, and finally compares the
//! answer with an uninterrupted run's, bit for bit.

use super::{State, folder, stencil};
use mbsp::{Checkpoints, Run};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The child's folder and process count, from the parent.
const CHILD_ENV: &str = "MBSP_TEST_CHECKPOINT_CHILD";
const ITERS: u64 = 3000;

/// The child: run the stencil from the folder's checkpoints (every 7 supersteps), and write the
/// answer next to them. Ignored unless the parent starts it.
#[test]
#[ignore = "started by restarts_after_sigkill_give_the_uninterrupted_answer"]
fn child_stencil() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut spec = spec.splitn(3, ':');
    let p: usize = spec.next().unwrap().parse().unwrap();
    let background = spec.next() == Some("background");
    let dir = spec.next().expect("p:mode:folder");
    let policy = Checkpoints::in_folder(dir)
        .every_supersteps(7)
        .keep(2)
        .background(background);
    let r = Run::new(p)
        .checkpoints(policy)
        .run(|ctx| stencil(ctx, ITERS, None))
        .unwrap();
    let text = answer_text(&r);
    let out = std::path::Path::new(dir).join("answer");
    std::fs::write(out.with_extension("tmp"), text).unwrap();
    std::fs::rename(out.with_extension("tmp"), out).unwrap();
}

/// The answer as text, f64s by their bits.
fn answer_text(r: &[(Vec<f64>, State)]) -> String {
    r.iter()
        .map(|(u, s)| {
            let bits: Vec<String> = u.iter().map(|x| format!("{:x}", x.to_bits())).collect();
            format!(
                "{} {:x} {:?} {}\n",
                s.it,
                s.acc.to_bits(),
                s.log,
                bits.join(",")
            )
        })
        .collect()
}

#[test]
fn restarts_after_sigkill_give_the_uninterrupted_answer() {
    let exe = std::env::current_exe().unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = mbsp::rng::SplitMix64::new(seed);
    for (p, mode) in [(2, "foreground"), (3, "background")] {
        let dir = folder(&format!("sigkill-{p}"));
        let want = Run::new(p).run(|ctx| stencil(ctx, ITERS, None)).unwrap();
        let child = || {
            Command::new(&exe)
                .args([
                    "--exact",
                    "kill::child_stencil",
                    "--ignored",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, format!("{p}:{mode}:{}", dir.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        };
        // How long a whole run takes here, to kill at moments spread over it.
        let t = Instant::now();
        let mut c = child();
        assert!(c.wait().unwrap().success());
        let whole = t.elapsed();
        std::fs::remove_dir_all(&dir).unwrap();
        let mut kills = 0;
        for _ in 0..8 {
            let mut c = child();
            let at = whole.mul_f64(0.02 + 0.2 * (rng.next_u64() % 1000) as f64 / 1000.0);
            std::thread::sleep(at);
            if c.try_wait().unwrap().is_none() {
                c.kill().unwrap(); // SIGKILL
                kills += 1;
            }
            c.wait().unwrap();
        }
        let mut c = child();
        let status = c.wait().unwrap();
        assert!(
            status.success(),
            "seed {seed}, p = {p}: the last child failed"
        );
        let got = std::fs::read_to_string(dir.join("answer")).unwrap();
        assert_eq!(
            got,
            answer_text(&want),
            "seed {seed}, p = {p}, {kills} kills"
        );
        eprintln!("p = {p}, {mode}: {kills} kills (whole run {whole:?}, seed {seed})");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
