/* Each mode is a misuse (or bsp_abort) that must end the program with status 1 and one clear
 * line on stderr, with nothing hanging. */
#include <bsp.h>
#include <string.h>
#include "check.h"

static const char *mode = "";
static int depth = 0;

/* A nested run that starts itself again and again (runaway recursion). */
static void recurse(void) {
    bsp_begin(1);
    if (++depth < 1000) {
        bsp_init(recurse, 0, NULL);
        recurse();
    }
    bsp_end();
}

static void spmd(void) {
    bsp_begin(4);
    unsigned s = bsp_pid();
    long buf[2] = {0, 0};
    bsp_push_reg(buf, sizeof buf);
    bsp_sync();
    if (!strcmp(mode, "abort")) {
        if (s == 2) bsp_abort("input %s is broken (code %d)", "matrix.mtx", 42);
        bsp_sync(); /* the others wait here when the abort comes */
    } else if (!strcmp(mode, "bounds")) {
        if (s == 1) bsp_put(3, buf, buf, 8, 16);
    } else if (!strcmp(mode, "pid")) {
        if (s == 3) bsp_put(9, buf, buf, 0, 8);
    } else if (!strcmp(mode, "unregistered")) {
        long other;
        if (s == 0) bsp_get(1, &other, 0, buf, 8);
    } else if (!strcmp(mode, "no_end")) {
        if (s == 3) return; /* leaves the SPMD function without bsp_end */
    } else if (!strcmp(mode, "sync_mismatch")) {
        if (s != 1) bsp_sync();
    } else if (!strcmp(mode, "tagsize")) {
        size_t t = s == 2 ? 8 : 4;
        bsp_set_tagsize(&t);
        bsp_sync();
    } else if (!strcmp(mode, "move_empty")) {
        bsp_move(buf, 8);
    } else if (!strcmp(mode, "null_tag")) {
        size_t t = 4;
        bsp_set_tagsize(&t);
        bsp_sync();
        bsp_send(0, NULL, buf, 8);
    } else if (!strcmp(mode, "pop_unregistered")) {
        long x;
        bsp_pop_reg(&x);
    } else if (!strcmp(mode, "begin_twice")) {
        if (s == 2) bsp_begin(4); /* a second bsp_begin in the same SPMD section */
    } else if (!strcmp(mode, "deep")) {
        if (s == 1) {
            bsp_init(recurse, 0, NULL);
            recurse();
        }
    }
    bsp_sync();
    bsp_end();
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    mode = argv[1];
    if (!strcmp(mode, "outside")) {
        bsp_sync(); /* no SPMD section */
        return 0;
    }
    bsp_init(spmd, argc, argv);
    spmd();
    printf("should not get here\n");
    return 0;
}
