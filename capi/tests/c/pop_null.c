/* Null registrations popped by NULL (BSPlib: a process without memory for a variable registers
 * and pops NULL, the others the variable's address). Every process pops the same slot. */
#include <bsp.h>
#include "check.h"

static void spmd(void) {
    bsp_begin(4);
    unsigned s = bsp_pid();
    int x = -1, y = -1;

    /* The same variable registered twice (shadowing), popped once, then used, then popped. */
    bsp_push_reg(s ? &x : NULL, sizeof x);
    bsp_push_reg(s ? &x : NULL, sizeof x);
    bsp_pop_reg(s ? &x : NULL);
    bsp_sync();
    int v = (int)s;
    if (s != 0) bsp_put(s % 3 + 1, &v, &x, 0, sizeof v); /* 1 -> 2 -> 3 -> 1 */
    bsp_sync();
    if (s != 0) CHECK(x == (int)((s + 1) % 3 + 1));
    bsp_pop_reg(s ? &x : NULL);
    bsp_sync();

    /* Again with a sync between the pushes and the pop. */
    bsp_push_reg(s ? &x : NULL, sizeof x);
    bsp_push_reg(s ? &x : NULL, sizeof x);
    bsp_sync();
    bsp_pop_reg(s ? &x : NULL);
    bsp_sync();
    bsp_pop_reg(s ? &x : NULL);
    bsp_sync();

    /* Two variables, null on pid 0, popped newest first. */
    bsp_push_reg(s ? &x : NULL, sizeof x);
    bsp_push_reg(s ? &y : NULL, sizeof y);
    bsp_sync();
    bsp_pop_reg(s ? &y : NULL);
    bsp_sync();
    if (s != 0) bsp_put(s % 3 + 1, &v, &x, 0, sizeof v);
    bsp_sync();
    if (s != 0) CHECK(x == (int)((s + 1) % 3 + 1));
    bsp_pop_reg(s ? &x : NULL);
    bsp_sync();
    bsp_end();
}

int main(int argc, char **argv) {
    bsp_init(spmd, argc, argv);
    spmd();
    printf("pop null ok\n");
    return 0;
}
