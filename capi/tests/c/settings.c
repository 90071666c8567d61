/* Affinity and thread-count settings from C and from the environment. */
#include <bsp.h>
#include <mcbsp-affinity.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static unsigned seen_p;

static void spmd(void) {
    bsp_begin(4);
    if (bsp_pid() == 0) seen_p = bsp_nprocs();
    bsp_sync();
    bsp_end();
}

int main(int argc, char **argv) {
    const char *want = getenv("EXPECT_MAX");
    if (want != NULL) {
        /* MBSP_MAX_THREADS is set: bsp_nprocs() outside a run and bsp_begin(4) respect it. */
        unsigned m = (unsigned)atoi(want);
        CHECK(bsp_nprocs() == m && mcbsp_get_maximum_threads() == m);
        bsp_init(spmd, argc, argv);
        spmd();
        CHECK(seen_p == (m < 4 ? m : 4));
    }
    const char *mode = getenv("EXPECT_MODE");
    if (mode != NULL) CHECK(mcbsp_get_affinity_mode() == (mcbsp_affinity_mode_t)atoi(mode));

    mcbsp_set_maximum_threads(3);
    CHECK(mcbsp_get_maximum_threads() == 3 && bsp_nprocs() == 3);
    bsp_init(spmd, argc, argv);
    spmd();
    CHECK(seen_p == 3);
    mcbsp_set_maximum_threads(0);

    mcbsp_set_affinity_mode(MCBSP_COMPACT);
    CHECK(mcbsp_get_affinity_mode() == MCBSP_COMPACT);
    bsp_init(spmd, argc, argv);
    spmd();
    size_t pins[4] = {0, 0, 0, 0};
    mcbsp_set_affinity_mode(MCBSP_MANUAL_AFFINITY);
    mcbsp_set_pinning(pins, 4);
    bsp_init(spmd, argc, argv);
    spmd();
    CHECK(seen_p == (want != NULL && atoi(want) < 4 ? (unsigned)atoi(want) : 4u));
    mcbsp_set_affinity_mode(MCBSP_NO_AFFINITY);
    bsp_init(spmd, argc, argv);
    spmd();
    if (argc > 1 && !strcmp(argv[1], "bad_pinning")) {
        mcbsp_set_affinity_mode(MCBSP_MANUAL_AFFINITY);
        mcbsp_set_pinning(pins, 2);
        bsp_init(spmd, argc, argv);
        spmd(); /* 2 CPUs for 4 processes: error */
    }
    printf("settings ok\n");
    return 0;
}
