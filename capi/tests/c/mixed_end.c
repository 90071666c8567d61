/* The C side of cxx_destructors.cpp's mixed programs. */
#include <bsp.h>

void mixed_end(void);
void cxx_end(void); /* cxx_destructors.cpp: calls bsp_end from C++ */
void c_spmd(void);
int c_after_end; /* processes that ran the code after bsp_end in c_spmd */

/* Called from C++ SPMD code: ends the SPMD section from C. */
void mixed_end(void) {
    bsp_end();
}

/* A C SPMD function (its run is started from C) whose bsp_end is called from C++. */
void c_spmd(void) {
    bsp_begin(4);
    bsp_pid_t s = bsp_pid();
    bsp_sync();
    cxx_end();
    if (s != 0) bsp_abort("pid %u continued after bsp_end", s);
    c_after_end++;
}
