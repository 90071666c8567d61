/*
 * bsp.h — the BSPlib / MulticoreBSP for C interface of mbsp (libmbsp).
 *
 * Build the library:   cargo build --release -p mbsp-capi
 * Compile a program:   cc prog.c -Icapi/include -Ltarget/release -Wl,-rpath,$PWD/target/release -lmbsp
 * Static instead:      cc prog.c -Icapi/include target/release/libmbsp.a -lmpich -lhwloc -lpthread -ldl -lm
 *
 * By default the MulticoreBSP for C 2.0 interface: sizes are size_t, pids and counts unsigned
 * int, and "empty" is SIZE_MAX. Define MCBSP_COMPATIBILITY_MODE before including this header
 * for the original BSPlib interface: the bsp_* functions take and return int (sizes, offsets,
 * pids, counts) and -1 means "empty"; a negative size, or a size or count to return that an int
 * cannot hold, is a misuse (never truncated).
 *
 * Types, as in MulticoreBSP, are the same in both modes: bsp_pid_t and bsp_nprocs_t are
 * unsigned int and bsp_size_t is size_t (BSPlib itself has no such types, so BSPlib programs do
 * not depend on them; in compatibility mode they are what the mcbsp_* functions take). The
 * mbsp_pid_arg_t / mbsp_size_arg_t typedefs below are the types the bsp_* functions take in
 * the current mode. (Earlier versions of mbsp made bsp_pid_t and bsp_size_t int in compatibility
 * mode.)
 *
 * Over MPI ranks (BSPlib's convention; libmbsp built with its default feature mpi): a program
 * started by an MPI launcher (mpiexec: PMI_SIZE, PMI_RANK, OMPI_COMM_WORLD_SIZE or PMIX_RANK
 * in its environment) runs its top-level SPMD section over the launcher's ranks, one process
 * per rank; MBSP_MPI=1 forces this, MBSP_MPI=0 keeps the program on threads. Outside a run,
 * bsp_nprocs() is then the number of ranks. (Rust programs ask for ranks explicitly instead.)
 *
 * Other headers: mcbsp.h (this one), mcbsp-affinity.h (thread placement), mcbsp-resiliency.h
 * (checkpoint and restart: MBSP_CHECKPOINT_DIR, mbsp_checkpoint_area, mbsp_restored; see
 * there), mcbsp-profiling.h (named regions of the profile, an
 * mbsp extension; superstep descriptions ignored), bsp.hpp (C++: the class mcbsp::BSP_program
 * of MulticoreBSP for C).
 *
 * Processes are threads: global variables are shared between processes, as in MulticoreBSP.
 * Every misuse, and bsp_abort, prints one line naming the primitive, the process, the superstep
 * and the values involved, and ends the program with exit status 1.
 *
 * Limits: every size and offset is checked without overflow. A tag size has at most 2^20 bytes
 * (1 MiB), a message payload at most 2^47 bytes (128 TiB); no area (registered memory, a source
 * or destination, a payload) can have more than PTRDIFF_MAX bytes or run past the end of the
 * address space. Beyond these limits a primitive is a misuse; a message, put or get within them
 * that the machine cannot find the memory for ends the program the same way ("could not
 * allocate ..."), never in the allocator. A run has at most as many processes as the machine
 * can hold (its thread limits, and about 64 KiB + 24 bytes per process of memory per process):
 * bsp_begin asking for more is a misuse naming the limit.
 *
 * C++: processes other than 0 leave their SPMD function at bsp_end by throwing an exception of
 * a private type (mbsp_cxx::end_of_process), caught where the library started the function,
 * so the destructors of the SPMD function's objects run, as with MulticoreBSP's pthread_exit.
 * A catch (...) in the SPMD function that does not rethrow would swallow this end of the
 * process: the process would then run on after its bsp_end. (C code leaves with longjmp; a C
 * function calling bsp_end from C++ SPMD code still works, skipping the C++ destructors, and so
 * does C++ compiled with -fno-exceptions, which gets the C functions.)
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

/* ---- Interface macros of MulticoreBSP ---- */

/* bsp_hpput, bsp_hpget and bsp_hpsend are real (unbuffered) primitives. */
#ifndef MCBSP_ENABLE_HP_DIRECTIVES
#define MCBSP_ENABLE_HP_DIRECTIVES
#endif
/* The same address may be registered more than once (the newest registration shadows the
 * older ones). mbsp allows this in both modes; the macro is defined where MulticoreBSP defines
 * it. */
#if defined(MCBSP_COMPATIBILITY_MODE) && !defined(MCBSP_ALLOW_MULTIPLE_REGS)
#define MCBSP_ALLOW_MULTIPLE_REGS
#endif
/* MulticoreBSP's 1 = performance, 2 = debug, 3 = profile mode. mbsp has one mode, which
 * checks every call; the value is accepted and ignored. */
#ifndef MCBSP_MODE
#define MCBSP_MODE 1
#endif

/* ---- Types ---- */

typedef unsigned int bsp_pid_t;    /* process ids and counts of processes */
typedef unsigned int bsp_nprocs_t; /* numbers of messages (bsp_qsize) */
typedef size_t bsp_size_t;         /* byte sizes and offsets */

#ifdef MCBSP_COMPATIBILITY_MODE
typedef int mbsp_pid_arg_t;  /* pids and counts as the bsp_* functions take them: int */
typedef int mbsp_size_arg_t; /* sizes as the bsp_* functions take them: int */
typedef int bsp_hpmove_t;    /* bsp_hpmove returns -1 when the queue is empty */
/* The BSPlib signatures are different functions of the library. */
#define bsp_nprocs      mcbsp_compat_nprocs
#define bsp_pid         mcbsp_compat_pid
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
#else
typedef bsp_pid_t mbsp_pid_arg_t;
typedef bsp_size_t mbsp_size_arg_t;
typedef bsp_size_t bsp_hpmove_t; /* bsp_hpmove returns SIZE_MAX when the queue is empty */
#endif

/* C++ with exceptions: bsp_begin, bsp_end, mcbsp_begin and mcbsp_end are inline functions at
 * the end of this header (see above). */
#if defined(__cplusplus) && (defined(__cpp_exceptions) || defined(__EXCEPTIONS))
#define MBSP_CXX_UNWIND 1
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- SPMD sections ---- */

/* The function new processes start in: its first statement is bsp_begin, its last bsp_end.
 * Call before bsp_begin, unless the SPMD section is main itself.
 * Over MPI ranks (BSPlib over MPI's convention), every rank but 0 goes from the top-level
 * bsp_init straight into spmd, so main's code after bsp_init (reading parameters, say) runs on
 * rank 0 only; the P of bsp_begin is rank 0's. A program has one top-level SPMD section there. */
void bsp_init(void (*spmd)(void), int argc, char **argv);

#ifndef MBSP_CXX_UNWIND
/* Start an SPMD section of P processes: the caller becomes pid 0, P-1 threads run the SPMD
 * function (which join when they reach their bsp_begin). Inside an SPMD section, bsp_init then
 * bsp_begin start a nested run over the part of the machine the calling process owns (at most
 * 64 levels deep); bsp_begin again without bsp_init is a misuse. (C: a macro below, which also
 * passes main; C++: an inline function below.) */
void bsp_begin(bsp_pid_t P);

/* End the SPMD section, a synchronisation of every process: the last superstep's
 * communication is delivered, and no process leaves before all have reached bsp_end (so memory
 * registered on their stacks stays readable until then). Then pid 0 continues; the other
 * processes leave their SPMD function. Every process must end its section this way: leaving it
 * otherwise (returning from the function that called bsp_begin, calling exit) is a misuse.
 * Over MPI ranks, the ranks other than 0 end (exit) at the top-level bsp_end, so none returns
 * into main. (C++: an inline function below.) */
void bsp_end(void);
#endif

/* Processes in the current run; outside a run, the most processes a run may have (see
 * mcbsp_set_maximum_threads), by default the hardware threads (over MPI ranks: the ranks). */
mbsp_pid_arg_t bsp_nprocs(void);
/* This process's id, 0 <= bsp_pid() < bsp_nprocs(). */
mbsp_pid_arg_t bsp_pid(void);
/* Seconds since this process's run started (high resolution, per process). */
double bsp_time(void);
/* End the superstep: all communication requested in it takes effect. */
void bsp_sync(void);

/* bsp_abort(format, ...): print the printf-style message, stop every process, exit status 1
 * (defined below). bsp_vabort(format, args) takes a va_list. */

/* ---- Direct remote memory access ---- */

/* Register size bytes at ident for communication from the next superstep on (NULL: take part
 * without memory). All processes register in the same order; sizes may differ. The area must
 * be one that can exist: at most PTRDIFF_MAX bytes, not past the end of the address space. */
void bsp_push_reg(const void *ident, mbsp_size_arg_t size);
/* Remove the newest registration of ident at the next sync. */
void bsp_pop_reg(const void *ident);
/* Copy size bytes from src into pid's memory registered as dst, at offset, at the next sync
 * (src is copied now). */
void bsp_put(mbsp_pid_arg_t pid, const void *src, const void *dst, mbsp_size_arg_t offset,
             mbsp_size_arg_t size);
/* Unbuffered put: src and the destination must not change during the superstep. */
void bsp_hpput(mbsp_pid_arg_t pid, const void *src, const void *dst, mbsp_size_arg_t offset,
               mbsp_size_arg_t size);
/* Copy size bytes from pid's memory registered as src, at offset, into dst at the next sync
 * (read as they stand when pid enters the sync). */
void bsp_get(mbsp_pid_arg_t pid, const void *src, mbsp_size_arg_t offset, void *dst,
             mbsp_size_arg_t size);
/* Unbuffered get: the source must not change during the superstep. */
void bsp_hpget(mbsp_pid_arg_t pid, const void *src, mbsp_size_arg_t offset, void *dst,
               mbsp_size_arg_t size);
/* Get now, blocking until done (MulticoreBSP); the source must not change in the superstep. */
void bsp_direct_get(mbsp_pid_arg_t pid, const void *src, mbsp_size_arg_t offset, void *dst,
                    mbsp_size_arg_t size);

/* ---- Bulk synchronous message passing ---- */

/* Set the tag size (bytes) of messages from the next superstep on; *size becomes the current
 * tag size. Collective: every process, same value, same superstep. size must not be NULL. The
 * tag size is at most 2^20 bytes (1 MiB): a tag is a header copied with every message. */
void bsp_set_tagsize(mbsp_size_arg_t *size);
/* Send tag (tag-size bytes) and size bytes of payload to pid; both are copied now. The payload
 * has at most 2^47 bytes (128 TiB); one the machine cannot find the memory for is an error. */
void bsp_send(mbsp_pid_arg_t pid, const void *tag, const void *payload, mbsp_size_arg_t size);
/* Send without copying the payload now: it must not change until the sync. */
void bsp_hpsend(mbsp_pid_arg_t pid, const void *tag, const void *payload, mbsp_size_arg_t size);
/* Messages in the queue (packets must not be NULL) and, if accumulated_size is not NULL, the
 * total size of their payloads. */
void bsp_qsize(mbsp_pid_arg_t *packets, mbsp_size_arg_t *accumulated_size);
/* Payload size of the first message in *status (SIZE_MAX, or -1 in compatibility mode, if the
 * queue is empty) and its tag in tag; the message stays in the queue. status must not be
 * NULL. */
void bsp_get_tag(mbsp_size_arg_t *status, void *tag);
/* Copy at most max_copy_size bytes of the first message's payload and remove it (0: drop). Only
 * the bytes copied are touched, so max_copy_size may be any bound (SIZE_MAX: all of it). */
void bsp_move(void *payload, mbsp_size_arg_t max_copy_size);
/* Remove the first message and point *p_tag and *p_payload at it (valid until the next sync);
 * returns the payload size, or SIZE_MAX (-1 in compatibility mode) if the queue is empty.
 * Neither pointer may be NULL. */
bsp_hpmove_t bsp_hpmove(void **p_tag, void **p_payload);

/* ---- mbsp extensions ---- */

/* Lazy barrier (BSPk's message counting): declare that this process receives exactly records
 * puts and messages (one per non-empty bsp_put and one per bsp_send or
 * bsp_hpsend addressed to it, its own included) in this superstep; the next bsp_sync then waits
 * only for them instead of for every process. Every process declares in the same superstep.
 * Such a superstep allows only puts and messages: bsp_get, bsp_push_reg, bsp_pop_reg and
 * bsp_set_tagsize end the run at the sync, bsp_hpput, bsp_hpget and bsp_direct_get at the call.
 * A count that does not match what arrives ends the run with an error. Over MPI ranks too, the
 * sync is lazy (point to point, without the header exchange). The name is BSPk's (bspk_expect);
 * the errors name the Rust method it calls, Ctx::declare_incoming. */
void bsp_expect(bsp_nprocs_t records);

/* ---- MulticoreBSP's names of the primitives ----
 * The same functions as bsp_*, with MulticoreBSP's signatures in both modes. */

void mcbsp_init(void (*spmd)(void), int argc, char **argv);
#ifndef MBSP_CXX_UNWIND
void mcbsp_begin(bsp_pid_t P); /* C: a macro below; C++: an inline function below */
void mcbsp_end(void);          /* C++: an inline function below */
#endif
bsp_pid_t mcbsp_nprocs(void);
bsp_pid_t mcbsp_pid(void);
double mcbsp_time(void);
void mcbsp_sync(void);
void mcbsp_push_reg(const void *address, bsp_size_t size);
void mcbsp_pop_reg(const void *address);
void mcbsp_put(bsp_pid_t pid, const void *source, const void *destination, bsp_size_t offset,
               bsp_size_t size);
void mcbsp_hpput(bsp_pid_t pid, const void *source, const void *destination, bsp_size_t offset,
                 bsp_size_t size);
void mcbsp_get(bsp_pid_t pid, const void *source, bsp_size_t offset, void *destination,
               bsp_size_t size);
void mcbsp_hpget(bsp_pid_t pid, const void *source, bsp_size_t offset, void *destination,
                 bsp_size_t size);
void mcbsp_direct_get(bsp_pid_t pid, const void *source, bsp_size_t offset, void *destination,
                      bsp_size_t size);
void mcbsp_set_tagsize(bsp_size_t *size);
void mcbsp_send(bsp_pid_t pid, const void *tag, const void *payload, bsp_size_t size);
void mcbsp_hpsend(bsp_pid_t pid, const void *tag, const void *payload, bsp_size_t size);
void mcbsp_qsize(bsp_nprocs_t *packets, bsp_size_t *accumulated_size);
void mcbsp_get_tag(bsp_size_t *status, void *tag);
void mcbsp_move(void *payload, bsp_size_t max_copy_size);
bsp_size_t mcbsp_hpmove(void **p_tag, void **p_payload);

/* ---- Implementation: bsp_abort and the entry points behind bsp_begin/bsp_end ---- */

/* Ends the program with the formatted message of bsp_abort. */
void mcbsp_abort_message(const char *message);

static inline void mcbsp_vabort(const char *format, va_list args) {
    char small[512];
    va_list again;
    int n;
#ifdef va_copy
    va_copy(again, args);
#else
    __va_copy(again, args); /* C++98 */
#endif
    n = vsnprintf(small, sizeof small, format, args);
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
static inline void mcbsp_abort(const char *format, ...) {
    va_list args;
    va_start(args, format);
    mcbsp_vabort(format, args);
    va_end(args);
}
static inline void bsp_vabort(const char *format, va_list args) {
    mcbsp_vabort(format, args);
}
static inline void bsp_abort(const char *format, ...) {
    va_list args;
    va_start(args, format);
    mcbsp_vabort(format, args);
    va_end(args);
}

/* Calls an SPMD function (or main_fn) and returns 1 if it was left through bsp_end. */
typedef int (*mbsp_trampoline_t)(void (*spmd)(void), int (*main_fn)(int, char **), int argc,
                                 char **argv);
/* bsp_begin(P) with the address of the program's main (C passes it, so that an SPMD section
 * can be main itself without bsp_init; NULL: looked up as a symbol, which needs -rdynamic with
 * libmbsp.so) and, from C++, the trampoline that catches bsp_end's exception. */
#if !defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* main may have either signature */
#endif
void mbsp_begin_with(int64_t P, int (*main_function)(), mbsp_trampoline_t trampoline);
/* bsp_end for C++: returns 1 if the caller must leave its SPMD function by throwing. */
int mbsp_end_cxx(void);

#if !defined(__cplusplus) && (!defined(__STDC_VERSION__) || __STDC_VERSION__ < 202311L)
extern int main();
#ifdef MCBSP_COMPATIBILITY_MODE
#define bsp_begin(P) mbsp_begin_with((int64_t)(int)(P), main, (mbsp_trampoline_t)0)
#else
#define bsp_begin(P) mbsp_begin_with((int64_t)(bsp_pid_t)(P), main, (mbsp_trampoline_t)0)
#endif
#define mcbsp_begin(P) mbsp_begin_with((int64_t)(bsp_pid_t)(P), main, (mbsp_trampoline_t)0)
#endif
#if !defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#ifdef __cplusplus
}
#endif

#ifdef MBSP_CXX_UNWIND
#if __cplusplus >= 201103L
#define MBSP_CXX_NOTHROW noexcept
#else
#define MBSP_CXX_NOTHROW throw()
#endif

extern "C++" {
namespace mbsp_cxx {
/* What bsp_end throws on processes other than 0. Private: do not catch it (or rethrow it). */
class end_of_process {};

/* Calls the SPMD function (or main) of a process started by a run begun from C++; returns 1
 * if it left through bsp_end. Any other exception escaping it ends the program. */
inline int trampoline(void (*spmd)(void), int (*main_fn)(int, char **), int argc,
                      char **argv) MBSP_CXX_NOTHROW {
    try {
        if (spmd != 0) {
            spmd();
        } else {
            main_fn(argc, argv);
        }
    } catch (const end_of_process &) {
        return 1;
    }
    return 0;
}
} /* namespace mbsp_cxx */

inline void bsp_begin(mbsp_pid_arg_t P) {
    mbsp_begin_with(int64_t(P), 0, &mbsp_cxx::trampoline);
}
inline void mcbsp_begin(bsp_pid_t P) {
    mbsp_begin_with(int64_t(P), 0, &mbsp_cxx::trampoline);
}
inline void bsp_end() {
    if (mbsp_end_cxx() != 0) {
        throw mbsp_cxx::end_of_process();
    }
}
inline void mcbsp_end() {
    bsp_end();
}
} /* extern "C++" */

#undef MBSP_CXX_NOTHROW
#undef MBSP_CXX_UNWIND
#endif /* MBSP_CXX_UNWIND */

#endif /* MBSP_BSP_H */
