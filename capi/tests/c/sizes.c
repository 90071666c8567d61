/* Hostile sizes through the C interface: each mode must end the program with status 1 and one
 * clear line naming the primitive and the value (never a signal, heap corruption or an
 * allocator abort); "ok" checks that sizes within the limits still work. */
#include <bsp.h>
#include <mcbsp-affinity.h>
#include <stdint.h>
#include <string.h>
#include "check.h"

static const char *mode = "";

static void spmd(void) {
    bsp_begin(2);
    unsigned s = bsp_pid();
    char buf[64];
    memset(buf, (int)s, sizeof buf);
    bsp_push_reg(buf, sizeof buf);
    bsp_sync();
    if (s == 0) {
        if (!strcmp(mode, "send_max")) bsp_send(1, NULL, buf, SIZE_MAX);
        if (!strcmp(mode, "send_max_7")) bsp_send(1, NULL, buf, SIZE_MAX - 7);
        if (!strcmp(mode, "send_2_62")) bsp_send(1, NULL, buf, (size_t)1 << 62);
        if (!strcmp(mode, "send_2_40")) bsp_send(1, NULL, buf, (size_t)1 << 40);
        if (!strcmp(mode, "hpsend_max")) bsp_hpsend(1, NULL, buf, SIZE_MAX);
        if (!strcmp(mode, "put_max")) bsp_put(1, buf, buf, 0, SIZE_MAX);
        if (!strcmp(mode, "put_offset")) bsp_put(1, buf, buf, SIZE_MAX - 3, 8);
        if (!strcmp(mode, "get_max")) bsp_get(1, buf, 0, buf, SIZE_MAX);
        if (!strcmp(mode, "get_offset")) bsp_get(1, buf, SIZE_MAX, buf, 1);
        if (!strcmp(mode, "hpget_max")) bsp_hpget(1, buf, 0, buf, SIZE_MAX);
        if (!strcmp(mode, "direct_get_max")) bsp_direct_get(1, buf, 0, buf, SIZE_MAX);
    }
    if (!strcmp(mode, "push_reg_max")) bsp_push_reg(buf + 8, SIZE_MAX);
    if (!strcmp(mode, "tagsize_max") || !strcmp(mode, "tagsize_2_40")) {
        size_t t = !strcmp(mode, "tagsize_max") ? SIZE_MAX : (size_t)1 << 40;
        bsp_set_tagsize(&t);
        bsp_sync();
        bsp_send(1 - s, buf, buf, 8); /* must not be reached */
    }
    if (!strcmp(mode, "ok")) {
        /* The largest tag size, and bsp_move with any bound. */
        const size_t t = (size_t)1 << 20;
        size_t ask = t;
        bsp_set_tagsize(&ask);
        CHECK(ask == 0); /* the tag size in force until the sync */
        bsp_sync();
        char *tag = malloc(t);
        CHECK(tag != NULL);
        memset(tag, 'a' + (int)s, t);
        bsp_send(1 - s, tag, "hello", 5);
        bsp_sync();
        size_t status = 0;
        memset(tag, 0, t);
        bsp_get_tag(&status, tag);
        CHECK(status == 5 && tag[t - 1] == 'a' + (int)(1 - s));
        char got[8] = {0};
        bsp_move(got, SIZE_MAX);
        CHECK(!strcmp(got, "hello"));
        free(tag);
    }
    bsp_sync();
    bsp_end();
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    mode = argv[1];
    size_t pins[2] = {0, 0};
    if (!strcmp(mode, "pinning_max")) mcbsp_set_pinning(pins, SIZE_MAX);
    if (!strcmp(mode, "get_pinning_max")) {
        mcbsp_set_pinning(pins, 2);
        /* 2^61 + 1 entries: their byte size wraps around to 8 */
        mcbsp_set_maximum_threads(SIZE_MAX / sizeof(size_t) + 2);
        free(mcbsp_get_pinning());
        printf("should not get here\n");
        return 0;
    }
    if (!strcmp(mode, "begin_huge")) {
        bsp_begin(1000000000);
        printf("should not get here\n");
        bsp_end();
        return 0;
    }
    bsp_init(spmd, argc, argv);
    spmd();
    printf("sizes ok\n");
    return 0;
}
