#include <bsp.h>
#include <stdio.h>
int main(void) { bsp_begin(3); if (bsp_pid() == 0) { printf("pid 0 returns without bsp_end\n"); return 0; } bsp_sync(); bsp_end(); return 0; }
