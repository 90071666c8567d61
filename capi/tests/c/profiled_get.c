/* A 1000-word bsp_get and the same amount as a bsp_put, for the profile (MBSP_PROFILE=1): both
 * supersteps must show h = 1000 words. */
#include <bsp.h>
#include <string.h>
#include "check.h"

#define N 1000

static void spmd(void) {
    bsp_begin(2);
    static long x[2][N];
    long *mine = x[bsp_pid()];
    for (int i = 0; i < N; i++) mine[i] = (long)bsp_pid() * N + i;
    bsp_push_reg(mine, sizeof x[0]);
    bsp_sync();
    if (bsp_pid() == 0) bsp_get(1, mine, 0, mine, sizeof x[0]); /* superstep 1 */
    bsp_sync();
    if (bsp_pid() == 0) {
        CHECK(mine[N - 1] == 2 * N - 1);
        bsp_put(1, mine, mine, 0, sizeof x[0]); /* superstep 2 */
    }
    bsp_sync();
    bsp_pop_reg(mine);
    bsp_end();
}

int main(int argc, char **argv) {
    bsp_init(spmd, argc, argv);
    spmd();
    printf("profiled get ok\n");
    return 0;
}
