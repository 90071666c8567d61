/* mcbsp.h — MulticoreBSP for C name of the mbsp header; see bsp.h. */
#ifndef MBSP_MCBSP_H
#define MBSP_MCBSP_H
#include "bsp.h"
#endif
