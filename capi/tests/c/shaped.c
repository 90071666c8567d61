/* A program that takes its shape from the experiment that runs it (mbsp affinity sets
 * MBSP_SHAPE, e.g. "2x3"): a top-level run of mbsp_shape_level(0) processes (else
 * bsp_nprocs()), each nesting a run of mbsp_shape_level(1) (none when 0). It prints the
 * processes it ran per level and its own figure, the time of its supersteps. */
#include <bsp.h>
#include <mcbsp-affinity.h>
#include <stdio.h>
#include "check.h"

static unsigned leaves[64];

static void inner(void) {
    unsigned q = mbsp_shape_level(1);
    bsp_begin(q);
    CHECK(bsp_nprocs() == q);
    bsp_sync();
    bsp_end();
}

static void outer(void) {
    unsigned p = mbsp_shape_level(0);
    bsp_begin(p ? p : bsp_nprocs());
    double t0 = bsp_time();
    unsigned q = mbsp_shape_level(1);
    if (q > 0) {
        bsp_init(inner, 0, NULL);
        inner();
    }
    bsp_sync();
    leaves[bsp_pid()] = q ? q : 1;
    bsp_sync();
    if (bsp_pid() == 0) {
        unsigned total = 0;
        for (unsigned s = 0; s < bsp_nprocs(); s++) total += leaves[s];
        printf("shaped ok: %u processes, %u leaves\n", bsp_nprocs(), total);
        printf("mbsp-figure: %.9f\n", bsp_time() - t0);
    }
    bsp_end();
}

int main(int argc, char **argv) {
    bsp_init(outer, argc, argv);
    outer();
    return 0;
}
