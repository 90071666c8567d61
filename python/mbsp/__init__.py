"""mbsp: bulk synchronous parallel computing from Python.

The partitioner (Mondriaan's medium-grain method), the 2D BSP sparse matrix-vector multiply
(plain, high-performance, hierarchical) and CG, the BSP FFT, and the machine model (tree,
placements, measured BSP parameters) of the Rust library mbsp, on numpy arrays and
scipy.sparse matrices. The work runs on the runtime's threads with the GIL released.

Errors: ``ValueError`` (and ``TypeError``) for bad input, ``MemoryError`` for requests refused
before any work because they cannot fit in memory, ``OSError`` for files, ``mbsp.BspError``
when a BSP run fails. Ctrl-C interrupts the partitioner, CG and parameter measurements.
"""

from ._native import BspError, nprocs
from .fft import FftPlan, fft, ifft
from .machine import BspParams, LevelParams, Machine, MeasuredParams, Placement, Process
from .sparse import (
    CgResult,
    Partition,
    SpmvPlan,
    cg,
    partition,
    read_mondriaan,
    read_mtx,
    write_mondriaan,
    write_mtx,
)

__all__ = [
    "BspError",
    "nprocs",
    "fft",
    "ifft",
    "FftPlan",
    "Machine",
    "Placement",
    "Process",
    "BspParams",
    "LevelParams",
    "MeasuredParams",
    "Partition",
    "partition",
    "read_mtx",
    "write_mtx",
    "read_mondriaan",
    "write_mondriaan",
    "SpmvPlan",
    "CgResult",
    "cg",
]
