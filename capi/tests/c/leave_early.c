/* A process that leaves its SPMD section without bsp_end: the program must end with status 1
 * and a line saying so, and the process must not run on into main. argv[1]:
 *   return       pid 1 returns from its SPMD function (bsp_init style)
 *   exit         pid 1 calls exit(0) inside its SPMD function
 *   main_return  the SPMD section is main; pid 1 returns from main */
#include <bsp.h>
#include <string.h>
#include "check.h"

static const char *mode = "";

static void spmd(void) {
    bsp_begin(2);
    bsp_sync();
    if (bsp_pid() == 1) {
        if (!strcmp(mode, "exit")) exit(0);
        return; /* "return" */
    }
    bsp_sync();
    bsp_end();
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    mode = argv[1];
    if (!strcmp(mode, "main_return")) {
        bsp_begin(2);
        bsp_sync();
        if (bsp_pid() == 1) return 0;
        bsp_sync();
        bsp_end();
        printf("main goes on\n");
        return 0;
    }
    bsp_init(spmd, argc, argv);
    spmd();
    printf("main goes on\n");
    return 0;
}
