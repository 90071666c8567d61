/* NULL where a primitive must store a result is a misuse (one line, exit status 1), in both
 * modes. The mode (argv[1]) names the case; pid 1 makes the call, the others wait in a sync. */
#include <bsp.h>
#include <string.h>
#include "check.h"

static const char *mode = "";

static void spmd(void) {
    bsp_begin(3);
    void *p = NULL;
    mbsp_size_arg_t size = 0;
    mbsp_pid_arg_t packets = 0;
    if (bsp_pid() == 1) {
        if (!strcmp(mode, "set_tagsize")) bsp_set_tagsize(NULL);
        if (!strcmp(mode, "get_tag")) bsp_get_tag(NULL, &size);
        if (!strcmp(mode, "qsize")) bsp_qsize(NULL, &size);
        if (!strcmp(mode, "hpmove_tag")) (void)bsp_hpmove(NULL, &p);
        if (!strcmp(mode, "hpmove_payload")) (void)bsp_hpmove(&p, NULL);
        if (!strcmp(mode, "none")) {
            bsp_qsize(&packets, NULL); /* NULL accumulated size is allowed */
            bsp_get_tag(&size, NULL);  /* NULL tag with an empty queue is allowed */
        }
    }
    bsp_sync();
    bsp_end();
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    mode = argv[1];
    bsp_init(spmd, argc, argv);
    spmd();
    printf(strcmp(mode, "none") ? "should not get here\n" : "null results ok\n");
    return 0;
}
