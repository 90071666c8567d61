"""Sparse matrices: the partitioner (Mondriaan's medium-grain method), Matrix Market and
Mondriaan's files, the BSP sparse matrix-vector multiply (plain, hp, hierarchical) and CG."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import scipy.sparse as sp

from . import _native

__all__ = [
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

MatrixLike = Union["sp.spmatrix", "sp.sparray", str, "os.PathLike[str]"]

_Arrays = Tuple[int, int, np.ndarray, np.ndarray, np.ndarray]


def _is_path(a: Any) -> bool:
    return isinstance(a, (str, os.PathLike))


def _arrays(a: Any, op: str) -> _Arrays:
    """(rows, cols, row, col, data) of a scipy.sparse matrix, in its nonzero order."""
    if not sp.issparse(a):
        raise TypeError(
            f"{op}: expected a scipy.sparse matrix or a Matrix Market path, "
            f"not {type(a).__name__}"
        )
    coo = a.tocoo()
    if np.iscomplexobj(coo.data):
        raise ValueError(f"{op}: complex matrices are not supported (real values only)")
    rows, cols = (int(s) for s in coo.shape)
    row = np.ascontiguousarray(coo.row, dtype=np.int64)
    col = np.ascontiguousarray(coo.col, dtype=np.int64)
    data = np.ascontiguousarray(coo.data, dtype=np.float64)
    return rows, cols, row, col, data


def _coo(arrays: _Arrays) -> "sp.coo_matrix":
    rows, cols, row, col, data = arrays
    return sp.coo_matrix((data, (row, col)), shape=(rows, cols))


def _count(v: Any, name: str, op: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an integer, not {type(v).__name__}")
    if v < 1:
        raise ValueError(f"{op}: {name} = {v} must be at least 1")
    return int(v)


def _seed(v: Any, op: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}: seed must be an integer, not {type(v).__name__}")
    if not 0 <= v < 2**64:
        raise ValueError(f"{op}: seed = {v} must be in 0 .. 2**64 - 1")
    return int(v)


def _threads(v: Any, op: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"{op}: threads = {v!r} must be an integer >= 0 (0: all)")
    return int(v)


@dataclass(frozen=True)
class Partition:
    """The nonzeros of a matrix split over ``p`` parts, with the owners of the vectors.

    ``parts[k]`` is the part of the matrix's k-th nonzero (in the order of ``A.tocoo()``,
    or of the file); ``x_owner[j]`` the owner of ``x_j`` (per column), ``y_owner[i]`` that
    of ``y_i`` (per row); all 0-based. ``volume`` is the communication volume of one multiply
    (the sum of lambda - 1 over rows and columns), ``imbalance`` ``max nnz(s) / (nnz / p) -
    1``, ``max_h`` the h of the fan-out plus that of the fan-in.
    """

    p: int
    parts: np.ndarray
    x_owner: np.ndarray
    y_owner: np.ndarray
    volume: int
    imbalance: float
    max_h: int
    seconds: float = 0.0

    def part_sizes(self) -> np.ndarray:
        """Nonzeros of each part."""
        return np.bincount(self.parts, minlength=self.p)

    def to_dict(self) -> Dict[str, Any]:
        """The partition as plain data (lists)."""
        return {
            "p": self.p,
            "parts": self.parts.tolist(),
            "x_owner": self.x_owner.tolist(),
            "y_owner": self.y_owner.tolist(),
            "volume": self.volume,
            "imbalance": self.imbalance,
            "max_h": self.max_h,
            "seconds": self.seconds,
        }

    def __repr__(self) -> str:
        return (
            f"Partition(p={self.p}, nnz={len(self.parts)}, volume={self.volume}, "
            f"imbalance={self.imbalance:.4f}, max_h={self.max_h})"
        )


def _partition_of(t: Tuple[Any, ...], p: int) -> Partition:
    parts, x_owner, y_owner, volume, imbalance, max_h, seconds = t
    return Partition(p, parts, x_owner, y_owner, int(volume), float(imbalance), int(max_h), float(seconds))


def partition(
    A: MatrixLike,
    p: int,
    eps: float = 0.03,
    seed: int = 1,
    square: bool = False,
    threads: int = 0,
    quality: bool = False,
) -> Partition:
    """Splits the nonzeros of ``A`` into ``p`` parts of at most ``(1 + eps) nnz / p``
    nonzeros each, with minimal communication volume (Mondriaan's medium-grain method, recursive
    bipartitioning), and distributes the vectors.

    ``A`` is any scipy.sparse matrix, or the path of a Matrix Market file (read as
    ``mbsp partition`` reads it: the result is that command's for the same seed). ``square``:
    give ``x_j`` and ``y_j`` the same owner (for CG and other iterations on a square matrix).
    ``threads``: threads of the partitioner (0: all). ``quality``: spend more time for a lower
    volume (max-flow refinement after every split and on the coarse levels, and at ``p >= 5``
    k-way refinement of all parts at once, as ``mbsp partition --quality``; about 5% less
    volume for 1.7x the time on the shared matrices, most on meshes and at p = 64). Runs with
    the GIL released; Ctrl-C interrupts.

    >>> import scipy.sparse as sp
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(300, 300))
    >>> r = partition(A, 2)
    >>> r.volume, r.imbalance <= 0.03
    (2, True)
    """
    op = "partition"
    p = _count(p, "p", op)
    eps = float(eps)
    seed = _seed(seed, op)
    if _is_path(A):
        _, t = _native.partition_path(os.fspath(A), p, eps, seed, bool(square), _threads(threads, op),
                                      bool(quality))
    else:
        t = _native.partition_coo(_arrays(A, op), p, eps, seed, bool(square), _threads(threads, op),
                                  bool(quality))
    return _partition_of(t, p)


def read_mtx(path: Union[str, "os.PathLike[str]"]) -> "sp.coo_matrix":
    """Reads a Matrix Market file (``.gz`` too) as a ``scipy.sparse.coo_matrix``, nonzeros in
    the order ``mbsp partition`` reads them (symmetric and skew matrices expanded)."""
    return _coo(_native.read_mtx(os.fspath(path)))


def write_mtx(path: Union[str, "os.PathLike[str]"], A: Any) -> None:
    """Writes ``A`` as a Matrix Market file, whole or not at all (``.gz`` compresses)."""
    _native.write_mtx(os.fspath(path), _arrays(A, "write_mtx"))


def _checked_partition(A_arrays: _Arrays, part: Partition, op: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(part, Partition):
        raise TypeError(f"{op}: partition must be a mbsp.Partition, not {type(part).__name__}")
    conv = lambda v: np.ascontiguousarray(v, dtype=np.uint32)  # noqa: E731
    return conv(part.parts), conv(part.x_owner), conv(part.y_owner)


def write_mondriaan(prefix: Union[str, "os.PathLike[str]"], A: Any, part: Partition) -> Tuple[str, str, str]:
    """Writes Mondriaan's three files of ``A`` under ``part``: ``prefix-P<p>`` (the
    distributed matrix), ``prefix-u<p>`` (y owners), ``prefix-v<p>`` (x owners); all or none.
    Returns their paths."""
    arr = _arrays(A, "write_mondriaan")
    parts, xo, yo = _checked_partition(arr, part, "write_mondriaan")
    return _native.write_mondriaan(os.fspath(prefix), arr, (part.p, parts, xo, yo))


def read_mondriaan(prefix: Union[str, "os.PathLike[str]"], p: int) -> Tuple["sp.coo_matrix", Partition]:
    """Reads Mondriaan's three files for ``p`` parts: the matrix (nonzeros in file order) and
    its partition (volume, imbalance and max h computed from it)."""
    p = _count(p, "p", "read_mondriaan")
    arr, parts, xo, yo = _native.read_mondriaan(os.fspath(prefix), p)
    volume, imbalance, max_h = _native.measure_partition(arr, (p, parts, xo, yo))
    return _coo(arr), Partition(p, parts, xo, yo, volume, imbalance, max_h)


@dataclass(frozen=True)
class CgResult:
    """The outcome of CG: the solution, iterations taken, ``|b - A x| / |b|`` (the recursive
    residual), and whether it reached ``tol``."""

    x: np.ndarray
    iterations: int
    residual: float
    converged: bool

    def __repr__(self) -> str:
        return (
            f"CgResult(n={len(self.x)}, iterations={self.iterations}, "
            f"residual={self.residual:.3e}, converged={self.converged})"
        )


class SpmvPlan:
    """The BSP sparse matrix-vector multiply ``y = A x`` of one matrix, planned once.

    ``A``: a scipy.sparse matrix (or a Matrix Market path). Give ``p`` (processes: the
    matrix is partitioned with ``eps`` and ``seed``; for a square matrix with x and y owners
    equal, so that ``cg`` can run on the plan) or a ``partition`` of ``A``'s nonzeros.
    ``kind``: ``"hp"`` (default: one superstep per multiply; each process reads the entries
    of ``x`` its nonzeros need where the caller keeps them and writes its rows of ``y`` in
    place, partial sums of rows cut by the partition go to their owners), ``"plain"``
    (gets and puts, two supersteps) or ``"hier"`` (two levels: ``levels=(packages, cores)``,
    the matrix partitioned over packages and each package's part split over its cores; a
    nested run per package).

    Each multiply runs on the runtime's threads, in a run this Python thread keeps between
    calls, with the GIL released.

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.random(200, 200, density=0.05, random_state=1, format="csr") + sp.eye(200)
    >>> plan = SpmvPlan(A, p=2)
    >>> x = np.arange(200.0)
    >>> bool(np.allclose(plan @ x, A @ x))
    True
    """

    def __init__(
        self,
        A: MatrixLike,
        p: Optional[int] = None,
        partition: Optional[Partition] = None,
        kind: str = "hp",
        levels: Optional[Tuple[int, int]] = None,
        eps: float = 0.03,
        seed: int = 1,
        square: Optional[bool] = None,
    ) -> None:
        op = "SpmvPlan"
        if _is_path(A):
            A = read_mtx(A)
        arr = _arrays(A, op)
        rows, cols = arr[0], arr[1]
        if kind == "hier":
            if partition is not None:
                raise ValueError(f"{op}: kind 'hier' partitions the matrix itself; give levels, not partition")
            if levels is None:
                raise ValueError(f"{op}: kind 'hier' needs levels=(packages, cores)")
            if len(levels) != 2:
                raise ValueError(f"{op}: levels must be (packages, cores), not {levels!r}")
            packages = _count(levels[0], "packages", op)
            cores = _count(levels[1], "cores", op)
            self._native = _native.NativePlan.hier(arr, packages, cores, float(eps), _seed(seed, op))
            self.partition: Optional[Partition] = None
        elif kind in ("plain", "hp"):
            if levels is not None:
                raise ValueError(f"{op}: levels go with kind 'hier'")
            if partition is None:
                if p is None:
                    p = _native.nprocs()
                p = _count(p, "p", op)
                sq = (rows == cols) if square is None else bool(square)
                partition = _partition_of(
                    _native.partition_coo(arr, p, float(eps), _seed(seed, op), sq, 0), p
                )
            elif p is not None and p != partition.p:
                raise ValueError(f"{op}: p = {p} but the partition has p = {partition.p}")
            parts, xo, yo = _checked_partition(arr, partition, op)
            self._native = _native.NativePlan.flat(kind, arr, (partition.p, parts, xo, yo))
            self.partition = partition
        else:
            raise ValueError(f"{op}: unknown kind {kind!r} (plain, hp, hier)")

    @property
    def shape(self) -> Tuple[int, int]:
        """(rows, cols) of the matrix."""
        return tuple(self._native.shape)  # type: ignore[return-value]

    @property
    def p(self) -> int:
        """Processes of each multiply (packages x cores for ``"hier"``)."""
        return self._native.procs

    @property
    def kind(self) -> str:
        """``"plain"``, ``"hp"`` or ``"hier"``."""
        return self._native.kind

    @property
    def volumes(self) -> Tuple[int, int]:
        """Words communicated per multiply between the (top-level) processes, and inside the
        packages of a ``"hier"`` plan."""
        return tuple(self._native.volumes)  # type: ignore[return-value]

    @property
    def nnz_per_process(self) -> Sequence[int]:
        """Nonzeros of each (top-level) process."""
        return self._native.nnz_per_process

    def multiply(self, x: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
        """``A @ x`` for a vector ``x`` of length cols (converted to float64); into ``out``
        (float64, contiguous, length rows) when given. Returns the result."""
        op = "SpmvPlan.multiply"
        rows, cols = self.shape
        if np.iscomplexobj(x):
            raise ValueError(f"{op}: complex vectors are not supported")
        xa = np.ascontiguousarray(x, dtype=np.float64)
        if xa.ndim != 1:
            raise ValueError(f"{op}: x must be one-dimensional, not of shape {xa.shape}")
        if out is None:
            out = np.empty(rows, dtype=np.float64)
        elif not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.ndim != 1:
            raise ValueError(f"{op}: out must be a one-dimensional float64 numpy array")
        elif np.shares_memory(out, xa):
            raise ValueError(f"{op}: out must not overlap x")
        self._native.multiply(xa, out)
        return out

    def __matmul__(self, x: Any) -> np.ndarray:
        return self.multiply(x)

    def cg(
        self,
        b: Any,
        x0: Optional[Any] = None,
        tol: float = 1e-8,
        maxiter: Optional[int] = None,
    ) -> CgResult:
        """Solves ``A x = b`` for a symmetric positive definite ``A`` by conjugate gradients,
        the whole solve in one BSP run (each iteration: the plain multiply and two
        all-reduces), until ``|r| <= tol |b|`` or ``maxiter`` iterations (default ``10 n``).
        Needs a flat plan with x and y owners equal (the default for a square matrix).
        Ctrl-C stops it within an iteration and raises ``KeyboardInterrupt``."""
        op = "cg"
        n = self.shape[0]
        if np.iscomplexobj(b) or (x0 is not None and np.iscomplexobj(x0)):
            raise ValueError(f"{op}: complex vectors are not supported")
        ba = np.ascontiguousarray(b, dtype=np.float64)
        xa = np.zeros(n) if x0 is None else np.ascontiguousarray(x0, dtype=np.float64)
        for name, v in (("b", ba), ("x0", xa)):
            if v.ndim != 1:
                raise ValueError(f"{op}: {name} must be one-dimensional, not of shape {v.shape}")
        it = 10 * n if maxiter is None else maxiter
        if isinstance(it, (bool, np.bool_)) or not isinstance(it, (int, np.integer)) or it < 0:
            raise ValueError(f"{op}: maxiter = {maxiter!r} must be an integer >= 0")
        tol = float(tol)
        x, its, res = self._native.cg(ba, xa, tol, int(it))
        return CgResult(x, its, res, bool(res <= tol))

    def __repr__(self) -> str:
        rows, cols = self.shape
        return (
            f"SpmvPlan({rows} x {cols}, kind={self.kind!r}, p={self.p}, "
            f"volume={self.volumes[0]}, nnz per process={list(self.nnz_per_process)})"
        )


def cg(
    A: Union[MatrixLike, SpmvPlan],
    b: Any,
    x0: Optional[Any] = None,
    tol: float = 1e-8,
    maxiter: Optional[int] = None,
    p: Optional[int] = None,
) -> CgResult:
    """CG on ``A`` (a plan, or a matrix that is planned over ``p`` processes first); see
    ``SpmvPlan.cg``."""
    plan = A if isinstance(A, SpmvPlan) else SpmvPlan(A, p=p)
    return plan.cg(b, x0=x0, tol=tol, maxiter=maxiter)
