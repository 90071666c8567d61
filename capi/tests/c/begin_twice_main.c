/* main as the SPMD section, with bsp_begin twice: a misuse, not a nested run of main. */
#include <bsp.h>
#include <stdio.h>
int main(void) {
    bsp_begin(2);
    bsp_begin(2);
    printf("should not get here\n");
    bsp_end();
    return 0;
}
