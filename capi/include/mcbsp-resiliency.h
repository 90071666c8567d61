/*
 * mcbsp-resiliency.h — checkpoint and restart (MulticoreBSP for C's interface, as mbsp
 * implements it, plus two mbsp extensions).
 *
 * MulticoreBSP checkpoints whole processes through DMTCP. mbsp writes its own checkpoints at
 * superstep boundaries, of what the library sees: every process's registered areas, its message
 * queue and tag size, the superstep count, and the areas the program adds with
 * mbsp_checkpoint_area. A run checkpoints when the environment names a folder:
 *
 *   MBSP_CHECKPOINT_DIR=ckpt   the folder (one sub-folder per checkpoint; a manifest written
 *                              last makes it complete; every file checksummed)
 *   MBSP_CHECKPOINT_EVERY=k    also every k supersteps;  MBSP_CHECKPOINT_SECONDS=t: every t s
 *   MBSP_CHECKPOINT_KEEP=n     complete checkpoints kept (default 2)
 *
 * Without MBSP_CHECKPOINT_DIR, mcbsp_checkpoint is a bsp_sync and the first call asking for a
 * checkpoint prints one warning line ("no checkpoint is written: set MBSP_CHECKPOINT_DIR ...").
 *
 * Restart: run the program again with the same folder and number of processes. It starts from
 * main; the sync after which its processes have as many registrations as at the checkpoint (the
 * one that completes its registrations) puts the registered areas, the queue, the tag size, the
 * superstep count and the mbsp_checkpoint_area areas back, and the program goes on from there. A
 * program that keeps its state (loop counter included) in registered memory or in areas given to
 * mbsp_checkpoint_area, and sets its initial values before that sync, restarts with no other
 * change. A damaged newest checkpoint (truncated, corrupted, missing a part) is skipped for the
 * previous complete one; one of another program, process count or registration layout ends the
 * run with one line naming the file and the difference. Checkpoints are taken by the top-level
 * run (not in nested runs); under mpiexec every rank writes its part to the folder (which the
 * ranks must share) and a restart needs the same number of ranks.
 */
#ifndef MBSP_MCBSP_RESILIENCY_H
#define MBSP_MCBSP_RESILIENCY_H

#include <stddef.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The automatic checkpoint frequency (in syncs) when none was set (0: none). */
extern size_t MCBSP_DEFAULT_CHECKPOINT_FREQUENCY;

/* A bsp_sync that takes a checkpoint. Collective. */
void mcbsp_checkpoint(void);
/* Enable / disable automatic checkpoints (every mcbsp_get_checkpoint_frequency() syncs;
 * enabled by default). mcbsp_checkpoint still takes one when they are disabled. */
void mcbsp_enable_checkpoints(void);
void mcbsp_disable_checkpoints(void);
/* Automatic checkpoint every frequency syncs (0: none). */
void mcbsp_set_checkpoint_frequency(size_t frequency);
/* The frequency set, else MCBSP_DEFAULT_CHECKPOINT_FREQUENCY. */
size_t mcbsp_get_checkpoint_frequency(void);
/* The frequency when hardware failure is imminent: stored and returned (mbsp does not watch
 * for imminent failures). */
void mcbsp_set_safe_checkpoint_frequency(size_t frequency);
/* The safe frequency set, else mcbsp_get_checkpoint_frequency(). */
size_t mcbsp_get_safe_checkpoint_frequency(void);

/* mbsp extension: save bytes at area (a variable that is not registered) in this process's
 * checkpoints. In a restored run, the areas given before the sync that completes the
 * registrations are filled there, in the order given (same number and sizes, or the run ends
 * with one line saying what differs). area stays valid for the rest of the run. */
void mbsp_checkpoint_area(void *area, size_t bytes);
/* mbsp extension: 1 when this run resumes from a checkpoint (from bsp_begin on: the folder
 * has a complete checkpoint, which the sync completing the registrations restores), else 0. */
int mbsp_restored(void);

#ifdef __cplusplus
}
#endif

#endif /* MBSP_MCBSP_RESILIENCY_H */
