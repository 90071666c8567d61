/* mcbsp.h — MulticoreBSP for C name of the mbsp header; see bsp.h. The extensions are in
 * mcbsp-affinity.h, mcbsp-resiliency.h and mcbsp-profiling.h. */
#ifndef MBSP_MCBSP_H
#define MBSP_MCBSP_H
#include "bsp.h"
#endif
