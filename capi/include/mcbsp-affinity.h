/*
 * mcbsp-affinity.h — thread placement and machine description (MulticoreBSP for C's affinity
 * interface, as mbsp implements it).
 *
 * Settings apply to top-level runs started after the call (a nested run is placed inside the
 * part of the machine its parent process owns). They are global to the program (MulticoreBSP
 * keeps them per thread). Precedence: these setters, then the environment (MBSP_AFFINITY,
 * MBSP_MAX_THREADS: the counterpart of MulticoreBSP's machine.info), then the MCBSP_DEFAULT_*
 * globals.
 *
 * What mbsp does with each setting:
 *   maximum threads, affinity mode, pinning: honoured (see each function).
 *   available cores, threads per core, unused threads per core, thread numbering, reserved
 *   cores: mbsp reads the cores and hardware threads of the machine from hwloc, so these are
 *   accepted, stored and returned by the getters, but do not change where processes run.
 */
#ifndef MBSP_MCBSP_AFFINITY_H
#define MBSP_MCBSP_AFFINITY_H

#include <stddef.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Placement strategies. SCATTER, COMPACT and MANUAL are MulticoreBSP's (same values);
 * MCBSP_NO_AFFINITY and the MCBSP_-prefixed names are mbsp's. */
enum mcbsp_affinity_mode {
    /* Spread processes over packages, NUMA nodes, caches and cores (the default). */
    SCATTER = 0,
    /* Fill a core, NUMA node, package before using the next. */
    COMPACT = 1,
    /* Process i on the CPU given as pinning[i] to mcbsp_set_pinning. */
    MANUAL = 2,
    /* Plan as SCATTER, but do not bind threads to CPUs. */
    MCBSP_NO_AFFINITY = 3,
    MCBSP_SCATTER = SCATTER,
    MCBSP_COMPACT = COMPACT,
    MCBSP_MANUAL_AFFINITY = MANUAL
};
typedef enum mcbsp_affinity_mode mcbsp_affinity_mode_t;

/* How the OS numbers hardware threads: CONSECUTIVE gives the threads of a core consecutive
 * numbers; WRAPPED numbers one thread of every core before the second of any. (Stored and
 * returned; mbsp reads the real numbering from hwloc.) */
enum mcbsp_thread_numbering { CONSECUTIVE = 0, WRAPPED = 1 };

/* ---- Defaults: a program may assign these before its first bsp_begin ---- */

/* The affinity mode when neither mcbsp_set_affinity_mode nor MBSP_AFFINITY chose one
 * (SCATTER). */
extern enum mcbsp_affinity_mode MCBSP_DEFAULT_AFFINITY;
/* What mcbsp_get_threads_per_core returns unless set (1). */
extern size_t MCBSP_DEFAULT_THREADS_PER_CORE;
/* What mcbsp_get_thread_numbering returns unless set (CONSECUTIVE). */
extern enum mcbsp_thread_numbering MCBSP_DEFAULT_THREAD_NUMBERING;

/* ---- Setters and getters ---- */

/* At most max processes per run: bsp_begin(P) starts min(P, max) (as BSPlib allows), and
 * bsp_nprocs() outside a run returns max. 0 removes the limit (overrides MBSP_MAX_THREADS). */
void mcbsp_set_maximum_threads(size_t max);
/* The limit, else MBSP_MAX_THREADS, else the number of hardware threads. */
size_t mcbsp_get_maximum_threads(void);

/* The processes MBSP_SHAPE asks for at level (0: the top-level run, 1: the runs nested in its
 * processes, ...), or 0 when it is unset or has no such level: `mbsp affinity --shape` sets it
 * (e.g. "2x4") for the program it runs, so that a program that nests can take its shape from
 * the experiment. A value that is not a shape ends the program with one line naming it. */
unsigned int mbsp_shape_level(int level);

/* Placement of runs started from now on (overrides MBSP_AFFINITY). An unknown mode is a
 * misuse. */
void mcbsp_set_affinity_mode(enum mcbsp_affinity_mode mode);
/* The mode set, else the one MBSP_AFFINITY names, else MCBSP_DEFAULT_AFFINITY. */
enum mcbsp_affinity_mode mcbsp_get_affinity_mode(void);

/* Manual placement: process i of a top-level run on CPU pinning[i] (OS index); the array is
 * copied. Selects MANUAL, as in MulticoreBSP. A run of P processes needs length >= P. */
void mcbsp_set_pinning(const size_t *pinning, size_t length);
/* A malloc'ed copy of the pinning (free it), of max(mcbsp_get_maximum_threads(), length)
 * entries (SIZE_MAX after the CPUs given), or NULL if none was set. */
size_t *mcbsp_get_pinning(void);

/* The number of cores (stored and returned). */
void mcbsp_set_available_cores(size_t num_cores);
/* The number set, else the hardware threads divided by mcbsp_get_threads_per_core(). */
size_t mcbsp_get_available_cores(void);

/* Hardware threads per core (stored and returned). */
void mcbsp_set_threads_per_core(size_t threads_per_core);
/* The number set, else MCBSP_DEFAULT_THREADS_PER_CORE. */
size_t mcbsp_get_threads_per_core(void);

/* Hardware threads per core that processes must not use (stored and returned). */
void mcbsp_set_unused_threads_per_core(size_t unused_threads_per_core);
/* The number set, else 0. */
size_t mcbsp_get_unused_threads_per_core(void);

/* The machine's thread numbering (stored and returned). An unknown value is a misuse. */
void mcbsp_set_thread_numbering(enum mcbsp_thread_numbering numbering);
/* The numbering set, else MCBSP_DEFAULT_THREAD_NUMBERING. */
enum mcbsp_thread_numbering mcbsp_get_thread_numbering(void);

/* Cores that processes must not use (copied; stored and returned). */
void mcbsp_set_reserved_cores(const size_t *reserved, size_t length);
/* How many cores are reserved (0 if none). */
size_t mcbsp_get_reserved_cores_number(void);
/* A malloc'ed copy of the reserved cores (free it), or NULL if none are reserved. */
size_t *mcbsp_get_reserved_cores(void);

#ifdef __cplusplus
}
#endif

#endif /* MBSP_MCBSP_AFFINITY_H */
