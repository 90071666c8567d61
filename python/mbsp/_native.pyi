"""Type stubs of mbsp._native, the compiled half of the package (python/src). Users call the
functions of the package (mbsp.partition, mbsp.SpmvPlan, ...), which check and convert their
arguments and call these."""

from typing import List, Optional, Tuple, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "BspError", "machine_tree", "placement", "params_in_force", "measure_params", "nprocs",
    "read_mtx", "write_mtx", "partition_coo", "partition_path", "measure_partition",
    "write_mondriaan", "read_mondriaan", "NativePlan", "kept_runs", "fft_into",
]

class BspError(RuntimeError):
    """A BSP run failed: a process returned an error, panicked, or misused the runtime."""

_I64 = npt.NDArray[np.int64]
_U32 = npt.NDArray[np.uint32]
_F64 = npt.NDArray[np.float64]
_C128 = npt.NDArray[np.complex128]
_Coo = Tuple[int, int, _I64, _I64, _F64]
_Part = Tuple[_U32, _U32, _U32, int, float, int, float]

def nprocs() -> int: ...
def machine_tree(xml: Optional[str] = None, synthetic: Optional[str] = None) -> str: ...
def placement(
    levels: List[str],
    policy: str,
    cpus: Optional[List[List[int]]] = None,
    xml: Optional[str] = None,
    synthetic: Optional[str] = None,
) -> str: ...
def params_in_force() -> Tuple[str, str]: ...
def measure_params(levels: Optional[List[str]] = None, quick: bool = False) -> str: ...
def read_mtx(path: str) -> _Coo: ...
def write_mtx(path: str, rows: int, cols: int, row: _I64, col: _I64, vals: _F64) -> None: ...
def partition_coo(
    rows: int, cols: int, row: _I64, col: _I64, vals: _F64,
    p: int, eps: float, seed: int, square: bool, threads: int = 0,
) -> _Part: ...
def partition_path(
    path: str, p: int, eps: float, seed: int, square: bool, threads: int = 0
) -> Tuple[_Coo, _Part]: ...
def measure_partition(
    rows: int, cols: int, row: _I64, col: _I64, vals: _F64,
    p: int, parts: _U32, x_owner: _U32, y_owner: _U32,
) -> Tuple[int, float, int]: ...
def write_mondriaan(
    prefix: str, rows: int, cols: int, row: _I64, col: _I64, vals: _F64,
    p: int, parts: _U32, x_owner: _U32, y_owner: _U32,
) -> Tuple[str, str, str]: ...
def read_mondriaan(prefix: str, p: int) -> Tuple[_Coo, _U32, _U32, _U32]: ...
def fft_into(x: Optional[_C128], out: _C128, p: int, inverse: bool) -> None: ...
def kept_runs() -> int: ...

@final
class NativePlan:
    @staticmethod
    def flat(
        kind: str, rows: int, cols: int, row: _I64, col: _I64, vals: _F64,
        p: int, parts: _U32, x_owner: _U32, y_owner: _U32,
    ) -> "NativePlan": ...
    @staticmethod
    def hier(
        rows: int, cols: int, row: _I64, col: _I64, vals: _F64,
        packages: int, cores: int, eps: float, seed: int, inner_2d: bool = False,
    ) -> "NativePlan": ...
    def multiply(self, x: _F64, y: _F64) -> None: ...
    def cg(self, b: _F64, x0: _F64, tol: float, maxiter: int) -> Tuple[_F64, int, float]: ...
    @property
    def procs(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def shape(self) -> Tuple[int, int]: ...
    @property
    def nnz_per_process(self) -> List[int]: ...
    @property
    def h_relations(self) -> Tuple[int, int]: ...
    @property
    def volumes(self) -> Tuple[int, int]: ...
