/* C code called from C++ SPMD code (cxx_destructors.cpp): ends the SPMD section from C. */
#include <bsp.h>
void mixed_end(void);
void mixed_end(void) {
    bsp_end();
}
