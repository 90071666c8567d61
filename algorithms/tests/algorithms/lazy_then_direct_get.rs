//! What the direct-get forms of the algorithms (`HpSpmv` with `Fanout::DirectGet`, the FFT)
//! rely on when the superstep before theirs ends with a lazy sync (a `Comm` all-reduce, a halo
//! exchange): a process may leave a lazy sync while another is still in the superstep before, so
//! a `direct_get` in the next superstep must still see what its owner wrote in that superstep.

/// Superstep 1 ends with a lazy sync in which nobody receives anything, so pid 0 may leave it at
/// once while pid 1 is still writing `x` (it sleeps first). In superstep 2 pid 0 reads pid 1's
/// `x` with `direct_get`: it sees the value pid 1 wrote in superstep 1.
#[test]
fn direct_get_after_a_lazy_sync_sees_the_owners_write() {
    let got = mbsp::run(2, |ctx| {
        let mut x = ctx.push_reg(vec![0u64; 1])?;
        ctx.sync()?;
        if ctx.pid() == 1 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            ctx.local_mut(&mut x)?[0] = 7;
        }
        ctx.declare_incoming(0)?;
        ctx.sync()?;
        let mut seen = [0u64];
        if ctx.pid() == 0 {
            // SAFETY: in superstep 1 nobody writes `x` (pid 1 wrote it in superstep 0).
            unsafe { ctx.direct_get(1, &x, 0, &mut seen)? };
        }
        ctx.sync()?;
        Ok(seen[0])
    })
    .unwrap();
    assert_eq!(
        got[0], 7,
        "pid 0 read pid 1's x before pid 1's superstep-0 write"
    );
}
