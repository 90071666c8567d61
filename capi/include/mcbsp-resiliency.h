/*
 * mcbsp-resiliency.h — checkpointing (MulticoreBSP for C's interface, as mbsp implements it).
 *
 * MulticoreBSP checkpoints through DMTCP when it was built with it. mbsp has no checkpointing:
 *   - mcbsp_checkpoint synchronises like bsp_sync (MulticoreBSP's checkpoint is a
 *     synchronisation of all processes) and writes no checkpoint. (MulticoreBSP built without
 *     DMTCP aborts instead; mbsp lets such programs run, without checkpoints.)
 *   - the settings below are stored and returned by the getters; no automatic checkpoints are
 *     written.
 *   - the first call to mcbsp_checkpoint, mcbsp_enable_checkpoints, or
 *     mcbsp_set_checkpoint_frequency with a frequency above 0 prints one warning line on
 *     stderr ("mbsp: warning: ...: checkpointing is not supported ..."); later calls are
 *     silent.
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

/* A global checkpoint: in mbsp, bsp_sync without a checkpoint (see above). Collective. */
void mcbsp_checkpoint(void);
/* Enable / disable automatic checkpoints (recorded; none are written). */
void mcbsp_enable_checkpoints(void);
void mcbsp_disable_checkpoints(void);
/* Automatic checkpoint every frequency syncs (0: none); stored and returned. */
void mcbsp_set_checkpoint_frequency(size_t frequency);
/* The frequency set, else MCBSP_DEFAULT_CHECKPOINT_FREQUENCY. */
size_t mcbsp_get_checkpoint_frequency(void);
/* The frequency when hardware failure is imminent; stored and returned. */
void mcbsp_set_safe_checkpoint_frequency(size_t frequency);
/* The safe frequency set, else mcbsp_get_checkpoint_frequency(). */
size_t mcbsp_get_safe_checkpoint_frequency(void);

#ifdef __cplusplus
}
#endif

#endif /* MBSP_MCBSP_RESILIENCY_H */
