/* Every type, macro, constant, global and function that the headers give user code
 * (MulticoreBSP for C 2.0's bsp.h, mcbsp-affinity.h, mcbsp-resiliency.h, mcbsp-profiling.h),
 * each used at least once. Compiled in both modes, and as C++.
 *
 * Without arguments: settings, then two SPMD sections (bsp_* names, then mcbsp_* names).
 * With an argument: one of the aborts (bsp_abort, bsp_vabort, mcbsp_abort, mcbsp_vabort). */
#include <mcbsp.h>
#include <mcbsp-affinity.h>
#include <mcbsp-profiling.h>
#include <mcbsp-resiliency.h>
#include <string.h>
#include "check.h"

#ifndef MCBSP_ENABLE_HP_DIRECTIVES
#error "MCBSP_ENABLE_HP_DIRECTIVES must be defined"
#endif
#if MCBSP_MODE != 1
#error "MCBSP_MODE defaults to 1"
#endif

#ifdef __cplusplus
#define STATIC_ASSERT(c) static_assert(c, #c)
#else
#define STATIC_ASSERT(c) _Static_assert(c, #c)
#endif

/* MulticoreBSP's types, the same in both modes. */
STATIC_ASSERT(sizeof(bsp_pid_t) == sizeof(unsigned int) && (bsp_pid_t)-1 > 0);
STATIC_ASSERT(sizeof(bsp_nprocs_t) == sizeof(unsigned int) && (bsp_nprocs_t)-1 > 0);
STATIC_ASSERT(sizeof(bsp_size_t) == sizeof(size_t) && (bsp_size_t)-1 == SIZE_MAX);

#ifdef MCBSP_COMPATIBILITY_MODE
#ifndef MCBSP_ALLOW_MULTIPLE_REGS
#error "MCBSP_ALLOW_MULTIPLE_REGS must be defined in compatibility mode"
#endif
STATIC_ASSERT(sizeof(mbsp_pid_arg_t) == sizeof(int) && (mbsp_pid_arg_t)-1 < 0);
STATIC_ASSERT(sizeof(mbsp_size_arg_t) == sizeof(int) && (mbsp_size_arg_t)-1 < 0);
STATIC_ASSERT(sizeof(bsp_hpmove_t) == sizeof(int) && (bsp_hpmove_t)-1 < 0);
#define EMPTY (-1)
#define MODE "compat"
#else
STATIC_ASSERT(sizeof(mbsp_pid_arg_t) == sizeof(bsp_pid_t) && (mbsp_pid_arg_t)-1 > 0);
STATIC_ASSERT(sizeof(mbsp_size_arg_t) == sizeof(bsp_size_t) && (mbsp_size_arg_t)-1 > 0);
STATIC_ASSERT(sizeof(bsp_hpmove_t) == sizeof(bsp_size_t) && (bsp_hpmove_t)-1 > 0);
#define EMPTY SIZE_MAX
#define MODE "multicorebsp"
#endif

static unsigned P = 3;

/* The bsp_* names, with the current mode's types. */
static void spmd_bsp(void) {
    bsp_begin((mbsp_pid_arg_t)P);
    mbsp_pid_arg_t p = bsp_nprocs(), s = bsp_pid();
    CHECK((unsigned)p == P && bsp_time() >= 0.0);
    long x[2] = {0, 0}, one = 1 + (long)s, got[3] = {0, 0, 0};
    bsp_push_reg(x, (mbsp_size_arg_t)sizeof x);
    bsp_push_reg(x, (mbsp_size_arg_t)sizeof x); /* MCBSP_ALLOW_MULTIPLE_REGS */
    bsp_sync();
    bsp_pop_reg(x);
    bsp_put((s + 1) % p, &one, x, 0, (mbsp_size_arg_t)sizeof one);
    bsp_hpput((s + 1) % p, &one, x, (mbsp_size_arg_t)sizeof one, (mbsp_size_arg_t)sizeof one);
    bsp_sync();
    CHECK(x[0] == 1 + (long)((s + p - 1) % p) && x[1] == x[0]);
    bsp_get((s + 1) % p, x, 0, &got[0], (mbsp_size_arg_t)sizeof(long));
    bsp_hpget((s + 1) % p, x, 0, &got[1], (mbsp_size_arg_t)sizeof(long));
    bsp_direct_get((s + 1) % p, x, 0, &got[2], (mbsp_size_arg_t)sizeof(long));
    bsp_sync();
    CHECK(got[0] == 1 + (long)s && got[1] == got[0] && got[2] == got[0]);
    bsp_pop_reg(x);

    mbsp_size_arg_t tagsize = (mbsp_size_arg_t)sizeof(int);
    bsp_set_tagsize(&tagsize);
    bsp_sync();
    int tag = (int)s;
    bsp_send(0, &tag, &one, (mbsp_size_arg_t)sizeof one);
    bsp_hpsend(0, &tag, &one, (mbsp_size_arg_t)sizeof one);
    bsp_sync();
    mbsp_pid_arg_t packets;
    mbsp_size_arg_t bytes, status;
    bsp_qsize(&packets, &bytes);
    CHECK(packets == (s == 0 ? 2 * p : 0));
    if (s == 0) {
        for (mbsp_pid_arg_t i = 0; i < p; i++) {
            int t = -1;
            long v = 0;
            bsp_get_tag(&status, &t);
            CHECK(status == (mbsp_size_arg_t)sizeof(long) && t >= 0 && t < (int)p);
            bsp_move(&v, (mbsp_size_arg_t)sizeof v);
            CHECK(v == 1 + t);
            void *tp, *pp;
            bsp_hpmove_t n = bsp_hpmove(&tp, &pp);
            CHECK(n == (bsp_hpmove_t)sizeof(long) && *(long *)pp == 1 + *(int *)tp);
        }
    }
    bsp_get_tag(&status, NULL);
    CHECK(status == (mbsp_size_arg_t)EMPTY);
    bsp_end();
}

/* The mcbsp_* names, with MulticoreBSP's types in both modes. */
static void spmd_mcbsp(void) {
    mcbsp_begin(P);
    bsp_pid_t p = mcbsp_nprocs(), s = mcbsp_pid();
    CHECK(p == P && mcbsp_time() >= 0.0);
    mcbsp_profiling_set_description("the mcbsp_* names");
    long x[2] = {0, 0}, one = 1 + (long)s, got[3] = {0, 0, 0};
    mcbsp_push_reg(x, sizeof x);
    mcbsp_sync();
    mcbsp_put((s + 1) % p, &one, x, 0, sizeof one);
    mcbsp_hpput((s + 1) % p, &one, x, sizeof one, sizeof one);
    mcbsp_checkpoint(); /* a sync in mbsp */
    CHECK(x[0] == 1 + (long)((s + p - 1) % p) && x[1] == x[0]);
    mcbsp_get((s + 1) % p, x, 0, &got[0], sizeof(long));
    mcbsp_hpget((s + 1) % p, x, 0, &got[1], sizeof(long));
    mcbsp_direct_get((s + 1) % p, x, 0, &got[2], sizeof(long));
    mcbsp_sync();
    CHECK(got[0] == 1 + (long)s && got[1] == got[0] && got[2] == got[0]);
    mcbsp_pop_reg(x);

    bsp_size_t tagsize = sizeof(int);
    mcbsp_set_tagsize(&tagsize);
    mcbsp_sync();
    int tag = (int)s;
    mcbsp_send(0, &tag, &one, sizeof one);
    mcbsp_hpsend(0, &tag, &one, sizeof one);
    mcbsp_sync();
    bsp_nprocs_t packets;
    bsp_size_t bytes, status;
    mcbsp_qsize(&packets, &bytes);
    CHECK(packets == (s == 0 ? 2 * p : 0) && bytes == packets * sizeof(long));
    if (s == 0) {
        for (bsp_pid_t i = 0; i < p; i++) {
            int t = -1;
            long v = 0;
            mcbsp_get_tag(&status, &t);
            CHECK(status == sizeof(long) && t >= 0 && t < (int)p);
            mcbsp_move(&v, sizeof v);
            CHECK(v == 1 + t);
            void *tp, *pp;
            bsp_size_t n = mcbsp_hpmove(&tp, &pp);
            CHECK(n == sizeof(long) && *(long *)pp == 1 + *(int *)tp);
        }
    }
    mcbsp_get_tag(&status, NULL);
    CHECK(status == SIZE_MAX);
    mcbsp_end();
}

static void abort_with(void (*vabort)(const char *, va_list), const char *format, ...) {
    va_list args;
    va_start(args, format);
    vabort(format, args);
    va_end(args);
}

static const char *abort_mode = NULL;

static void spmd_abort(void) {
    bsp_begin(2);
    if (bsp_pid() == 1) {
        if (!strcmp(abort_mode, "bsp_abort")) bsp_abort("by %s %d", "bsp_abort", 1);
        if (!strcmp(abort_mode, "mcbsp_abort")) mcbsp_abort("by %s %d", "mcbsp_abort", 2);
        if (!strcmp(abort_mode, "bsp_vabort")) abort_with(bsp_vabort, "by %s %d", "bsp_vabort", 3);
        if (!strcmp(abort_mode, "mcbsp_vabort"))
            abort_with(mcbsp_vabort, "by %s %d", "mcbsp_vabort", 4);
    }
    bsp_sync();
    bsp_end();
}

static void settings(void) {
    /* Affinity: MulticoreBSP's names and values, mbsp's aliases. */
    CHECK(SCATTER == 0 && COMPACT == 1 && MANUAL == 2 && MCBSP_NO_AFFINITY == 3);
    CHECK(MCBSP_SCATTER == SCATTER && MCBSP_COMPACT == COMPACT && MCBSP_MANUAL_AFFINITY == MANUAL);
    CHECK(CONSECUTIVE == 0 && WRAPPED == 1);
    CHECK(MCBSP_DEFAULT_AFFINITY == SCATTER && mcbsp_get_affinity_mode() == SCATTER);
    MCBSP_DEFAULT_AFFINITY = COMPACT;
    CHECK(mcbsp_get_affinity_mode() == COMPACT);
    mcbsp_set_affinity_mode(MCBSP_NO_AFFINITY);
    mcbsp_affinity_mode_t mode = mcbsp_get_affinity_mode();
    CHECK(mode == MCBSP_NO_AFFINITY);
    enum mcbsp_affinity_mode scatter = SCATTER;
    mcbsp_set_affinity_mode(scatter);
    CHECK(mcbsp_get_affinity_mode() == MCBSP_SCATTER);

    size_t max = mcbsp_get_maximum_threads();
    CHECK(max >= 1 && (size_t)bsp_nprocs() == max);
    mcbsp_set_maximum_threads(P);
    CHECK(mcbsp_get_maximum_threads() == P && (unsigned)bsp_nprocs() == P);

    CHECK(mcbsp_get_pinning() == NULL);
    size_t pins[2] = {0, 0};
    mcbsp_set_pinning(pins, 2); /* selects MANUAL */
    CHECK(mcbsp_get_affinity_mode() == MANUAL);
    size_t *copy = mcbsp_get_pinning();
    CHECK(copy != NULL && copy[0] == 0 && copy[1] == 0 && copy[P - 1] == SIZE_MAX);
    free(copy);
    mcbsp_set_affinity_mode(COMPACT);

    CHECK(MCBSP_DEFAULT_THREADS_PER_CORE == 1 && mcbsp_get_threads_per_core() == 1);
    CHECK(mcbsp_get_available_cores() >= 1);
    MCBSP_DEFAULT_THREADS_PER_CORE = 2;
    CHECK(mcbsp_get_threads_per_core() == 2);
    mcbsp_set_threads_per_core(4);
    CHECK(mcbsp_get_threads_per_core() == 4 && mcbsp_get_available_cores() >= 1);
    mcbsp_set_available_cores(3);
    CHECK(mcbsp_get_available_cores() == 3);
    CHECK(mcbsp_get_unused_threads_per_core() == 0);
    mcbsp_set_unused_threads_per_core(1);
    CHECK(mcbsp_get_unused_threads_per_core() == 1);
    CHECK(MCBSP_DEFAULT_THREAD_NUMBERING == CONSECUTIVE);
    CHECK(mcbsp_get_thread_numbering() == CONSECUTIVE);
    MCBSP_DEFAULT_THREAD_NUMBERING = WRAPPED;
    CHECK(mcbsp_get_thread_numbering() == WRAPPED);
    enum mcbsp_thread_numbering consecutive = CONSECUTIVE;
    mcbsp_set_thread_numbering(consecutive);
    CHECK(mcbsp_get_thread_numbering() == CONSECUTIVE);
    CHECK(mcbsp_get_reserved_cores() == NULL && mcbsp_get_reserved_cores_number() == 0);
    size_t reserved[2] = {5, 7};
    mcbsp_set_reserved_cores(reserved, 2);
    size_t *r = mcbsp_get_reserved_cores();
    CHECK(mcbsp_get_reserved_cores_number() == 2 && r != NULL && r[0] == 5 && r[1] == 7);
    free(r);

    /* Checkpoints: stored and returned; one warning line in all. */
    CHECK(MCBSP_DEFAULT_CHECKPOINT_FREQUENCY == 0 && mcbsp_get_checkpoint_frequency() == 0);
    MCBSP_DEFAULT_CHECKPOINT_FREQUENCY = 5;
    CHECK(mcbsp_get_checkpoint_frequency() == 5 && mcbsp_get_safe_checkpoint_frequency() == 5);
    mcbsp_set_checkpoint_frequency(10);
    mcbsp_set_safe_checkpoint_frequency(2);
    CHECK(mcbsp_get_checkpoint_frequency() == 10 && mcbsp_get_safe_checkpoint_frequency() == 2);
    mcbsp_enable_checkpoints();
    mcbsp_disable_checkpoints();
    mcbsp_profiling_set_description("outside a run");
}

int main(int argc, char **argv) {
    if (argc > 1) {
        abort_mode = argv[1];
        bsp_init(spmd_abort, argc, argv);
        spmd_abort();
        printf("should not get here\n");
        return 0;
    }
    settings();
    bsp_init(spmd_bsp, argc, argv);
    spmd_bsp();
    mcbsp_init(spmd_mcbsp, argc, argv);
    spmd_mcbsp();
    printf("api complete (%s) ok\n", MODE);
    return 0;
}
