#include <bsp.h>
#include <stdio.h>
int shared_counter[8];
int main(int argc, char **argv) {
    bsp_begin(4);
    shared_counter[bsp_pid()] = (int)bsp_pid() + 1;
    bsp_sync();
    if (bsp_pid() == 0) {
        int s = 0;
        for (int i = 0; i < 4; i++) s += shared_counter[i];
        printf("sum %d, argc %d\n", s, argc);
    }
    bsp_end();
    printf("after end: only pid 0 prints this (%s)\n", argv[0]);
    return 0;
}
