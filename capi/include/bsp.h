/*
 * bsp.h — the BSPlib / MulticoreBSP for C interface of mbsp (libmbsp).
 *
 * Build the library:   cargo build --release -p mbsp-capi
 * Compile a program:   cc prog.c -Icapi/include -Ltarget/release -Wl,-rpath,$PWD/target/release -lmbsp
 * Static instead:      cc prog.c -Icapi/include target/release/libmbsp.a -lhwloc -lpthread -ldl -lm
 *
 * By default the MulticoreBSP for C interface: sizes are size_t, pids and counts unsigned int,
 * and "empty" is SIZE_MAX. Define MCBSP_COMPATIBILITY_MODE before including this header for
 * the original BSPlib interface: int sizes and pids, -1 for "empty".
 *
 * Processes are threads: global variables are shared between processes, as in MulticoreBSP.
 * Every misuse, and bsp_abort, prints one line naming the primitive, the process, the superstep
 * and the values involved, and ends the program with exit status 1.
 *
 * Environment: MBSP_AFFINITY = compact | scattered (default) | none | manual:<cpus>;<cpus>;...
 *              MBSP_MAX_THREADS = the most processes a run may have
 *              MBSP_TOPOLOGY = synthetic:<hwloc description> | xml:<file>  (plan on another machine)
 */
#ifndef MBSP_BSP_H
#define MBSP_BSP_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef MCBSP_COMPATIBILITY_MODE
typedef int bsp_pid_t;   /* process ids and message counts */
typedef int bsp_size_t;  /* byte sizes and offsets */
/* BSPlib signatures are different functions of the library. */
#define bsp_push_reg    mcbsp_compat_push_reg
#define bsp_put         mcbsp_compat_put
#define bsp_hpput       mcbsp_compat_hpput
#define bsp_get         mcbsp_compat_get
#define bsp_hpget       mcbsp_compat_hpget
#define bsp_direct_get  mcbsp_compat_direct_get
#define bsp_set_tagsize mcbsp_compat_set_tagsize
#define bsp_send        mcbsp_compat_send
#define bsp_hpsend      mcbsp_compat_hpsend
#define bsp_qsize       mcbsp_compat_qsize
#define bsp_get_tag     mcbsp_compat_get_tag
#define bsp_move        mcbsp_compat_move
#define bsp_hpmove      mcbsp_compat_hpmove
typedef int bsp_hpmove_t; /* bsp_hpmove returns -1 when the queue is empty */
#else
typedef unsigned int bsp_pid_t;
typedef size_t bsp_size_t;
typedef size_t bsp_hpmove_t; /* bsp_hpmove returns SIZE_MAX when the queue is empty */
#endif

/* ---- SPMD sections ---- */

/* The function new processes start in: its first statement is bsp_begin, its last bsp_end.
 * Call before bsp_begin, unless the SPMD section is main itself. */
void bsp_init(void (*spmd)(void), int argc, char **argv);

/* Start an SPMD section of P processes: the caller becomes pid 0, P-1 threads run the SPMD
 * function (which join when they reach their bsp_begin). Inside an SPMD section, starts a
 * nested run over the part of the machine the calling process owns. */
void bsp_begin(bsp_pid_t P);

/* End the SPMD section: pid 0 waits for the others and continues; other processes leave
 * their SPMD function. */
void bsp_end(void);

/* Processes in the current run; outside a run, the hardware threads available. */
bsp_pid_t bsp_nprocs(void);
/* This process's id, 0 <= bsp_pid() < bsp_nprocs(). */
bsp_pid_t bsp_pid(void);
/* Seconds since this process's run started (high resolution, per process). */
double bsp_time(void);
/* End the superstep: all communication requested in it takes effect. */
void bsp_sync(void);

/* bsp_abort(format, ...): print the printf-style message, stop every process, exit status 1. */
void mcbsp_abort_message(const char *message);
static inline void bsp_vabort(const char *format, va_list args) {
    char small[512];
    va_list again;
    va_copy(again, args);
    int n = vsnprintf(small, sizeof small, format, args);
    if (n >= 0 && (size_t)n >= sizeof small) {
        char *big = (char *)malloc((size_t)n + 1);
        if (big != NULL) {
            vsnprintf(big, (size_t)n + 1, format, again);
            va_end(again);
            mcbsp_abort_message(big);
        }
    }
    va_end(again);
    mcbsp_abort_message(small);
}
static inline void bsp_abort(const char *format, ...) {
    va_list args;
    va_start(args, format);
    bsp_vabort(format, args);
    va_end(args);
}

/* ---- Direct remote memory access ---- */

/* Register size bytes at ident for communication from the next superstep on (NULL: take part
 * without memory). All processes register in the same order; sizes may differ. */
void bsp_push_reg(const void *ident, bsp_size_t size);
/* Remove the newest registration of ident at the next sync. */
void bsp_pop_reg(const void *ident);
/* Copy size bytes from src into pid's memory registered as dst, at offset, at the next sync
 * (src is copied now). */
void bsp_put(bsp_pid_t pid, const void *src, void *dst, bsp_size_t offset, bsp_size_t size);
/* Unbuffered put: src and the destination must not change during the superstep. */
void bsp_hpput(bsp_pid_t pid, const void *src, void *dst, bsp_size_t offset, bsp_size_t size);
/* Copy size bytes from pid's memory registered as src, at offset, into dst at the next sync
 * (read as they stand when pid enters the sync). */
void bsp_get(bsp_pid_t pid, const void *src, bsp_size_t offset, void *dst, bsp_size_t size);
/* Unbuffered get: the source must not change during the superstep. */
void bsp_hpget(bsp_pid_t pid, const void *src, bsp_size_t offset, void *dst, bsp_size_t size);
/* Get now, blocking until done (MulticoreBSP); the source must not change in the superstep. */
void bsp_direct_get(bsp_pid_t pid, const void *src, bsp_size_t offset, void *dst, bsp_size_t size);

/* ---- Bulk synchronous message passing ---- */

/* Set the tag size (bytes) of messages from the next superstep on; *size becomes the current
 * tag size. Collective: every process, same value, same superstep. */
void bsp_set_tagsize(bsp_size_t *size);
/* Send tag (tag-size bytes) and size bytes of payload to pid; both are copied now. */
void bsp_send(bsp_pid_t pid, const void *tag, const void *payload, bsp_size_t size);
/* Send without copying the payload now: it must not change until the sync. */
void bsp_hpsend(bsp_pid_t pid, const void *tag, const void *payload, bsp_size_t size);
/* Messages in the queue and (if not NULL) the total size of their payloads. */
void bsp_qsize(bsp_pid_t *packets, bsp_size_t *accumulated_size);
/* Payload size of the first message in *status (SIZE_MAX, or -1 in compatibility mode, if the
 * queue is empty) and its tag in tag; the message stays in the queue. */
void bsp_get_tag(bsp_size_t *status, void *tag);
/* Copy at most max_copy_size bytes of the first message's payload and remove it (0: drop). */
void bsp_move(void *payload, bsp_size_t max_copy_size);
/* Remove the first message and point *p_tag and *p_payload at it (valid until the next sync);
 * returns the payload size, or SIZE_MAX (-1 in compatibility mode) if the queue is empty. */
bsp_hpmove_t bsp_hpmove(void **p_tag, void **p_payload);

/* ---- Affinity and threads (mbsp / MulticoreBSP extensions) ---- */

typedef enum {
    MCBSP_COMPACT = 0,         /* fill a core, NUMA node, package before the next */
    MCBSP_SCATTER = 1,         /* spread over packages, NUMA nodes, caches, cores (default) */
    MCBSP_MANUAL_AFFINITY = 2, /* process i on the i-th CPU given to mcbsp_set_pinning */
    MCBSP_NO_AFFINITY = 3      /* plan, but do not bind threads */
} mcbsp_affinity_mode_t;

/* Placement of runs started from now on (overrides MBSP_AFFINITY). */
void mcbsp_set_affinity_mode(mcbsp_affinity_mode_t mode);
mcbsp_affinity_mode_t mcbsp_get_affinity_mode(void);
/* For MCBSP_MANUAL_AFFINITY: CPU (OS index) of each process of a top-level run. */
void mcbsp_set_pinning(const size_t *cpus, size_t length);
/* At most max processes per run (bsp_begin(P) starts min(P, max)); 0 removes the limit
 * (overrides MBSP_MAX_THREADS). */
void mcbsp_set_maximum_threads(size_t max);
size_t mcbsp_get_maximum_threads(void);

/* In C, bsp_begin also passes main, so that an SPMD section can be main itself without
 * bsp_init. (C++ and C23 use the function; with libmbsp.so they then need -rdynamic for
 * main-as-SPMD.) */
void mcbsp_begin(bsp_pid_t P, int (*main_function)());
#if !defined(__cplusplus) && (!defined(__STDC_VERSION__) || __STDC_VERSION__ < 202311L)
extern int main();
#define bsp_begin(P) mcbsp_begin((P), main)
#endif

#ifdef __cplusplus
}
#endif

#endif /* MBSP_BSP_H */
