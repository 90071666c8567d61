/* A tiny assertion for the C test programs: print where and exit with status 3. */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>
#include <stdlib.h>
#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);              \
            fflush(stderr);                                                                      \
            _Exit(3);                                                                            \
        }                                                                                        \
    } while (0)
#endif
