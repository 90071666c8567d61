/* Checkpoint and restart from C (issue 43): a ring stencil whose state is registered memory
 * (cells, halos and the iteration counter) and one variable given to mbsp_checkpoint_area, with
 * a message to the right neighbour in flight at every sync. With MBSP_CHECKPOINT_DIR set, it
 * checkpoints every 5 syncs (mcbsp_set_checkpoint_frequency) and a restarted run resumes at the
 * sync that completes its registrations, with no other change to the program. Arguments:
 * processes, iterations, and optionally the iteration at which pid 0 kills the program with
 * SIGKILL (a crash). Prints, per process, the iteration count and a hash of the bits of its
 * final state, and "restored" when the run resumed from a checkpoint. */
#include <mcbsp.h>
#include <mcbsp-resiliency.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define N 6
static unsigned nprocs = 2;
static long iters = 50, die_at = -1;

/* FNV-1a over the bytes of v. */
static uint64_t hash(uint64_t h, const void *v, size_t len) {
    const unsigned char *b = v;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ b[i]) * 1099511628211ull;
    }
    return h;
}

static void spmd(void) {
    bsp_begin(nprocs);
    unsigned p = bsp_nprocs(), s = bsp_pid();
    double u[N + 2]; /* cells 1..N, halos 0 and N+1 */
    long it = 0;
    double acc = 0;
    for (int i = 0; i < N + 2; i++) {
        u[i] = (double)((s * N + (unsigned)i) % 7) * 0.5;
    }
    bsp_push_reg(u, sizeof u);
    bsp_push_reg(&it, sizeof it);
    mbsp_checkpoint_area(&acc, sizeof acc);
    mcbsp_set_checkpoint_frequency(5);
    size_t tagsize = sizeof(long);
    bsp_set_tagsize(&tagsize);
    bsp_sync(); /* completes the registrations: a restored run gets its state back here */
    int restored = mbsp_restored();
    while (it < iters) {
        bsp_nprocs_t n;
        bsp_qsize(&n, NULL);
        for (bsp_nprocs_t k = 0; k < n; k++) {
            long tag = 0;
            size_t len;
            double x = 0;
            bsp_get_tag(&len, &tag);
            CHECK(len == sizeof x);
            bsp_move(&x, sizeof x);
            acc = acc * 0.5 + x + (double)tag * 1e-3;
        }
        if (s == 0 && it == die_at) {
            raise(SIGKILL);
        }
        double old[N + 2];
        memcpy(old, u, sizeof u);
        for (int i = 1; i <= N; i++) {
            u[i] = 0.25 * old[i - 1] + 0.5 * old[i] + 0.25 * old[i + 1] + 1e-3 * acc;
        }
        bsp_put((s + p - 1) % p, &u[1], u, (N + 1) * sizeof(double), sizeof(double));
        bsp_put((s + 1) % p, &u[N], u, 0, sizeof(double));
        long tag = it * 100 + (long)s;
        double x = acc + u[1];
        bsp_send((s + 1) % p, &tag, &x, sizeof x);
        it++;
        bsp_sync();
    }
    uint64_t h = hash(hash(1469598103934665603ull, u, sizeof u), &acc, sizeof acc);
    printf("pid %u it %ld hash %016llx%s\n", s, it, (unsigned long long)h,
           restored ? " restored" : "");
    bsp_end();
}

int main(int argc, char **argv) {
    if (argc > 1) {
        nprocs = (unsigned)atoi(argv[1]);
    }
    if (argc > 2) {
        iters = atol(argv[2]);
    }
    if (argc > 3) {
        die_at = atol(argv[3]);
    }
    bsp_init(spmd, argc, argv);
    spmd();
    return 0;
}
