/* BSPlib-era sizes are int: a negative one is misuse. */
#define MCBSP_COMPATIBILITY_MODE
#include <bsp.h>
int main(void) {
    bsp_begin(2);
    int x = 0;
    bsp_push_reg(&x, -4);
    bsp_sync();
    bsp_end();
    return 0;
}
