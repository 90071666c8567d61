/*
 * mcbsp-profiling.h — profiling: MulticoreBSP's superstep descriptions (accepted and ignored)
 * and mbsp's named regions (an mbsp extension, not in MulticoreBSP or BSPlib).
 *
 * Regions name parts of the program in the superstep profile that MBSP_PROFILE turns on
 * (MBSP_PROFILE=1: text on stderr; =FILE.json: JSON; =FILE.svg: timeline). Every superstep
 * counts for the region innermost-open in a process when its sync begins (when processes are
 * in different regions, for the innermost region they are all in); the report totals each
 * region over its supersteps, sub-regions included: supersteps, w, h, waiting, measured and
 * BSP-predicted time. See docs/profiling.md.
 *
 *     mbsp_region_begin("solve");
 *     for (int i = 0; i < steps; i++) {
 *         mbsp_region_begin("halo");
 *         exchange_halo();
 *         bsp_sync();
 *         mbsp_region_end();
 *     }
 *     mbsp_region_end();
 */
#ifndef MBSP_MCBSP_PROFILING_H
#define MBSP_MCBSP_PROFILING_H

#ifdef __cplusplus
extern "C" {
#endif

/* Name the current superstep in profiles (MulticoreBSP); ignored by mbsp: use regions. */
void mcbsp_profiling_set_description(const char *name);

/* mbsp extension: begin the region `name` (a NUL-terminated string, copied) in this process,
 * inside the innermost open one. Between bsp_begin and bsp_end; costs a counter increment when
 * the run is not profiled. */
void mbsp_region_begin(const char *name);

/* mbsp extension: end the innermost open region of this process. With none open, the program
 * stops with an error naming the process and superstep. Regions still open at bsp_end close
 * there. */
void mbsp_region_end(void);

#ifdef __cplusplus
}
#endif

#endif /* MBSP_MCBSP_PROFILING_H */
