/* Lazy barriers from C (mbsp's bsp_expect): a 1D halo exchange on a ring of 4 with declared
 * counts gives the same values as with full syncs; with an argument "wrong", pid 1 declares one
 * record too many and the run ends with one clear line instead of hanging. A numeric argument
 * sets the number of processes (default 4). */
#include <bsp.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static int wrong = 0;
static unsigned nprocs = 4; /* an argument that is a number sets it */

static void spmd(void) {
    bsp_begin(nprocs);
    unsigned p = bsp_nprocs(), s = bsp_pid();
    long halo[2] = {-1, -1}; /* from the left, from the right */
    bsp_push_reg(halo, sizeof halo);
    bsp_set_tagsize(&(size_t){sizeof(long)});
    bsp_sync();
    for (long step = 1; step <= 200; step++) {
        long mine = step * 10 + (long)s;
        bsp_put((s + 1) % p, &mine, halo, 0, sizeof mine);
        bsp_put((s + p - 1) % p, &mine, halo, sizeof(long), sizeof mine);
        if (s == 0) {
            bsp_send(p - 1, &step, &mine, sizeof mine); /* one message too */
        }
        unsigned expect = 2 + (s == p - 1);
        if (wrong && s == 1 && step == 100) {
            expect += 1;
        }
        bsp_expect(expect);
        bsp_sync();
        CHECK(halo[0] == step * 10 + (long)((s + p - 1) % p));
        CHECK(halo[1] == step * 10 + (long)((s + 1) % p));
        unsigned n;
        bsp_qsize(&n, NULL);
        CHECK(n == (s == p - 1 ? 1u : 0u));
        if (n == 1) {
            long tag = 0, payload = 0;
            size_t status;
            bsp_get_tag(&status, &tag);
            bsp_move(&payload, sizeof payload);
            CHECK(tag == step && payload == step * 10);
        }
    }
    bsp_pop_reg(halo);
    bsp_sync();
    if (s == 0) {
        printf("lazy ok\n");
    }
    bsp_end();
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "wrong") == 0) {
            wrong = 1;
        } else {
            nprocs = (unsigned)atoi(argv[i]);
        }
    }
    bsp_init(spmd, argc, argv);
    spmd();
    return 0;
}
