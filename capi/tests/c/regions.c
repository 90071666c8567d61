/* Named regions of the profile from C (mbsp_region_begin/end, mcbsp-profiling.h), for
 * MBSP_PROFILE=FILE.json: superstep 0 in "setup", supersteps 1-3 in "solve/halo" (one word to
 * the other process each), superstep 4 in "solve", superstep 5 (to bsp_end) outside regions.
 * With the argument "unbalanced", ends a region that is not open (a misuse). */
#include <bsp.h>
#include <mcbsp-profiling.h>
#include <string.h>
#include "check.h"

static int unbalanced;

static void spmd(void) {
    bsp_begin(2);
    static long x[2];
    long *mine = &x[bsp_pid()];
    mbsp_region_begin("setup");
    bsp_push_reg(mine, sizeof *mine);
    bsp_sync();
    mbsp_region_end();
    mbsp_region_begin("solve");
    for (long i = 0; i < 3; i++) {
        mbsp_region_begin("halo");
        bsp_put(1 - bsp_pid(), &i, mine, 0, sizeof i);
        bsp_sync();
        mbsp_region_end();
    }
    bsp_sync();
    mbsp_region_end();
    CHECK(*mine == 2);
    if (unbalanced) mbsp_region_end();
    bsp_pop_reg(mine);
    bsp_end();
}

int main(int argc, char **argv) {
    unbalanced = argc > 1 && strcmp(argv[1], "unbalanced") == 0;
    bsp_init(spmd, argc, argv);
    spmd();
    printf("regions ok\n");
    return 0;
}
