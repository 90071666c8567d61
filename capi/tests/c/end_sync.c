/* bsp_end is a synchronisation of every process: the shape of MulticoreBSP for C's parallel
 * loop example. Each process integrates its share of 4 / (1 + x^2) over [0, 1] into a double
 * on its stack, registers it and syncs; then pid 0 reads every other process's value with
 * bsp_direct_get, and again with a bsp_get served at the end synchronisation, while the
 * others call bsp_end at once. No process may leave its SPMD function (and its stack) before
 * pid 0 has read it. */
#include <bsp.h>
#include <stdlib.h>
#include "check.h"

static unsigned P;

static void spmd(void) {
    bsp_begin(P);
    const unsigned s = bsp_pid(), p = bsp_nprocs();
    const long n = 1000000;
    double mine = 0.0;
    for (long i = s; i < n; i += p) {
        const double x = (i + 0.5) / n;
        mine += 4.0 / (1.0 + x * x) / n;
    }
    double got[64] = {0};
    CHECK(p <= 64);
    bsp_push_reg(&mine, sizeof mine);
    bsp_sync();
    if (s != 0) {
        bsp_end(); /* leaves at once: pid 0 still reads `mine` */
        return;
    }
    double direct = mine;
    for (unsigned k = 1; k < p; k++) {
        double v = 0.0;
        bsp_direct_get(k, &mine, 0, &v, sizeof v);
        direct += v;
        bsp_get(k, &mine, 0, &got[k], sizeof got[k]); /* served at the end */
    }
    bsp_end();
    double gathered = mine;
    for (unsigned k = 1; k < P; k++) gathered += got[k];
    printf("pi %.7f (direct_get) %.7f (get)\n", direct, gathered);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    P = (unsigned)atoi(argv[1]);
    bsp_init(spmd, argc, argv);
    spmd();
    return 0;
}
