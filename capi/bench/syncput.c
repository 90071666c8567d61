/* Empty syncs, one-word puts and one-word messages through the BSPlib interface, on every
 * process at once.
 *
 * Only BSPlib calls, so that scripts/bench-mcbsp compiles this one source against libmbsp and
 * against MulticoreBSP for C and compares the two in alternating runs. Each loop is timed by
 * process 0 between two syncs (the processes leave every sync together, so its time is
 * theirs). Usage: syncput [REPETITIONS]
 */
#include <bsp.h>
#include <stdio.h>
#include <stdlib.h>

static long reps = 200000;

static void spmd(void) {
    bsp_begin(bsp_nprocs());
    const bsp_pid_t p = bsp_nprocs();
    const bsp_pid_t s = bsp_pid();
    double x[2] = {0.0, 0.0};
    bsp_push_reg(x, sizeof x);
    bsp_sync();
    /* Warm-up: threads settled, caches and branch predictors trained. */
    for (long i = 0; i < reps / 10; i++) {
        bsp_sync();
    }
    double t0 = bsp_time();
    for (long i = 0; i < reps; i++) {
        bsp_sync();
    }
    const double empty = (bsp_time() - t0) / (double)reps;
    const double v = (double)s;
    bsp_sync();
    t0 = bsp_time();
    for (long i = 0; i < reps; i++) {
        bsp_put((s + 1) % p, &v, x, sizeof(double), sizeof(double));
        bsp_sync();
    }
    const double put = (bsp_time() - t0) / (double)reps;
    if (x[1] != (double)((s + p - 1) % p)) {
        bsp_abort("syncput: the one-word put did not arrive\n");
    }
    /* A message each way (tag size 0), moved out after the sync. */
    double got = -1.0;
    bsp_sync();
    t0 = bsp_time();
    for (long i = 0; i < reps; i++) {
        bsp_send((s + 1) % p, NULL, &v, sizeof(double));
        bsp_sync();
        bsp_move(&got, sizeof(double));
    }
    const double send = (bsp_time() - t0) / (double)reps;
    if (got != (double)((s + p - 1) % p)) {
        bsp_abort("syncput: the one-word message did not arrive\n");
    }
    if (s == 0) {
        printf("empty sync: %.4f us\n", empty * 1e6);
        printf("one-word put + sync: %.4f us\n", put * 1e6);
        printf("one-word send + sync + move: %.4f us\n", send * 1e6);
    }
    bsp_pop_reg(x);
    bsp_sync();
    bsp_end();
}

int main(int argc, char **argv) {
    if (argc > 1) {
        reps = atol(argv[1]);
        if (reps < 10) {
            fprintf(stderr, "syncput: REPETITIONS must be at least 10, not %s\n", argv[1]);
            return 2;
        }
    }
    bsp_init(spmd, argc, argv);
    spmd();
    return 0;
}
