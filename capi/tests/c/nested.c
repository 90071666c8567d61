/* Nested runs (MulticoreBSP 2.2): each of 2 processes starts a run of 3; nested processes have
 * their own pids, registrations and queue; the parent's registrations are valid again after. */
#include <bsp.h>
#include <string.h>
#include "check.h"

static int outer_value[2];
static int inner_seen[2][3];

static void inner(void) {
    bsp_begin(3);
    unsigned p = bsp_nprocs(), s = bsp_pid();
    CHECK(p == 3);
    int slot = -1;
    bsp_push_reg(&slot, sizeof slot);
    bsp_sync();
    int me = (int)s;
    bsp_put((s + 1) % p, &me, &slot, 0, sizeof me);
    bsp_send(0, NULL, &me, sizeof me);
    bsp_sync();
    CHECK(slot == (int)((s + p - 1) % p));
    if (s == 0) {
        unsigned n;
        bsp_qsize(&n, NULL);
        CHECK(n == 3);
    }
    bsp_pop_reg(&slot);
    bsp_sync();
    bsp_end();
}

static void outer(void) {
    bsp_begin(2);
    unsigned s = bsp_pid();
    int mine = 0;
    bsp_push_reg(&mine, sizeof mine);
    bsp_sync();
    int v = 10 + (int)s;
    bsp_put(1 - s, &v, &mine, 0, sizeof v); /* stays queued across the nested run */
    bsp_init(inner, 0, NULL);
    inner(); /* this process becomes pid 0 of a nested run of 3 */
    CHECK(bsp_pid() == s && bsp_nprocs() == 2);
    bsp_sync();
    CHECK(mine == 10 + (int)(1 - s));
    outer_value[s] = mine;
    (void)inner_seen;
    bsp_pop_reg(&mine);
    bsp_end();
}

int main(int argc, char **argv) {
    bsp_init(outer, argc, argv);
    outer();
    CHECK(outer_value[0] == 11 && outer_value[1] == 10);
    printf("nested ok\n");
    return 0;
}
