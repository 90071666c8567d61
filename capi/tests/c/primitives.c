/* Every primitive. Compiles in both modes: MulticoreBSP (size_t sizes, unsigned pids, SIZE_MAX
 * for empty) and, with -DMCBSP_COMPATIBILITY_MODE, BSPlib (int sizes and pids, -1 for empty). */
#include <mcbsp.h>
#include <stdint.h>
#include <string.h>
#include "check.h"

#ifdef MCBSP_COMPATIBILITY_MODE
typedef int size_arg;   /* sizes as the primitives take them */
typedef int count_arg;  /* message counts */
typedef int hpmove_ret; /* what bsp_hpmove returns */
#define EMPTY (-1)
#else
typedef bsp_size_t size_arg;
typedef bsp_nprocs_t count_arg;
typedef bsp_size_t hpmove_ret;
#define EMPTY SIZE_MAX
#endif

static unsigned P = 4;

static void spmd(void) {
    bsp_begin(P);
    const unsigned p = (unsigned)bsp_nprocs(), s = (unsigned)bsp_pid();
    CHECK(p == P && s < p);
    double t0 = bsp_time();
    CHECK(t0 >= 0.0);

    /* Registration with sizes that differ per process, and a NULL registration on pid 1. */
    long *x = calloc(p + s, sizeof(long));
    long y[4] = {0, 0, 0, 0};
    bsp_push_reg(s == 1 ? NULL : x, s == 1 ? 0 : (p + s) * sizeof(long));
    bsp_push_reg(y, sizeof y);
    bsp_sync();

    /* put: everyone but pid 1 (which registered NULL, so cannot name the slot) puts s*10 at
     * index s of every process that registered memory. */
    long v = (long)s * 10;
    for (unsigned q = 0; q < p; q++)
        if (q != 1 && s != 1) bsp_put(q, &v, x, s * sizeof(long), sizeof(long));
    v = -1; /* put copied its source: this must not matter */
    /* get reads y as it stands at the sync entry of its owner, before the puts land. */
    y[0] = 100 + (long)s;
    long got = 0;
    bsp_get((s + 1) % p, y, 0, &got, sizeof(long));
    bsp_sync();
    if (s != 1)
        for (unsigned q = 0; q < p; q++) CHECK(x[q] == (q == 1 ? 0 : (long)q * 10));
    CHECK(got == 100 + (long)((s + 1) % p));

    /* hpput / hpget / direct_get. */
    long w = 7 + (long)s;
    bsp_hpput((s + 1) % p, &w, y, sizeof(long), sizeof(long));
    bsp_sync();
    CHECK(y[1] == 7 + (long)((s + p - 1) % p));
    long h = 0, d = 0;
    bsp_hpget((s + 2) % p, y, sizeof(long), &h, sizeof(long));
    bsp_direct_get((s + 3) % p, y, sizeof(long), &d, sizeof(long));
    bsp_sync();
    CHECK(h == 7 + (long)((s + 1) % p));
    CHECK(d == 7 + (long)((s + 2) % p));

    /* Shadowing: y registered again with 1 long; the newest registration wins, pop restores. */
    bsp_push_reg(y, sizeof(long));
    bsp_sync();
    bsp_pop_reg(y);
    bsp_sync();
    long z = 5;
    bsp_put((s + 1) % p, &z, y, 3 * sizeof(long), sizeof(long)); /* fits only the old 4-long registration */
    bsp_pop_reg(y);
    if (s != 1) bsp_pop_reg(x); else bsp_pop_reg(NULL);
    bsp_sync();
    CHECK(y[3] == 5);

    /* BSMP: tag size, send, hpsend, qsize, get_tag, move (truncating, 0 drops), hpmove. */
    size_arg tag = sizeof(unsigned);
    bsp_set_tagsize(&tag);
    CHECK(tag == 0);
    bsp_sync();
    unsigned mytag = s;
    char msg[16];
    snprintf(msg, sizeof msg, "from %u", s);
    bsp_send(0, &mytag, msg, strlen(msg) + 1);
    static char hp[16][16];
    snprintf(hp[s], sizeof hp[s], "hp%u", s % 10);
    if (p > 1) bsp_hpsend(1, &mytag, hp[s], strlen(hp[s]) + 1);
    bsp_sync();
    count_arg packets = 0;
    size_arg bytes = 0;
    bsp_qsize(&packets, &bytes);
    if (s == 0) {
        CHECK(packets == (count_arg)p);
        unsigned seen = 0;
        for (unsigned i = 0; i < p; i++) {
            size_arg status = 0;
            unsigned t = 99;
            bsp_get_tag(&status, &t);
            CHECK(t < p && status == (size_arg)(strlen("from 0") + 1));
            char buf[16];
            if (i == 0) {
                bsp_move(buf, 3); /* truncated */
                CHECK(memcmp(buf, "fro", 3) == 0);
            } else if (i == 1) {
                bsp_move(NULL, 0); /* dropped */
            } else {
                bsp_move(buf, sizeof buf);
                CHECK(buf[5] == (char)('0' + t));
            }
            seen |= 1u << t;
        }
        CHECK(seen == (1u << p) - 1);
        size_arg status = 0;
        bsp_get_tag(&status, NULL);
        CHECK(status == (size_arg)EMPTY);
    } else if (s == 1) {
        CHECK(packets == (count_arg)p);
        CHECK(bytes == (size_arg)(4 * p));
        void *tp, *pp;
        hpmove_ret n;
        unsigned count = 0;
        while ((n = bsp_hpmove(&tp, &pp)) != (hpmove_ret)EMPTY) {
            unsigned t = *(unsigned *)tp;
            CHECK(n == 4 && ((char *)pp)[2] == (char)('0' + t));
            count++;
        }
        CHECK(count == p);
    } else {
        CHECK(packets == 0 && bytes == 0);
    }
    tag = 0;
    bsp_set_tagsize(&tag);
    CHECK(tag == sizeof(unsigned));
    bsp_sync();
    CHECK(bsp_time() >= t0);
    free(x);
    bsp_end();
}

int main(int argc, char **argv) {
    if (argc > 1) P = (unsigned)atoi(argv[1]);
    CHECK(bsp_nprocs() >= 1);
#ifdef MCBSP_COMPATIBILITY_MODE
    printf("(BSPlib compatibility mode) ");
#endif
    bsp_init(spmd, argc, argv);
    spmd();
    printf("primitives ok (p = %u)\n", P);
    return 0;
}
