/*
 * mcbsp-profiling.h — superstep names for MulticoreBSP's profile mode. mbsp has no profile
 * mode: the call is accepted and ignored.
 */
#ifndef MBSP_MCBSP_PROFILING_H
#define MBSP_MCBSP_PROFILING_H

#ifdef __cplusplus
extern "C" {
#endif

/* Name the current superstep in profiles (MulticoreBSP); ignored by mbsp. */
void mcbsp_profiling_set_description(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* MBSP_MCBSP_PROFILING_H */
