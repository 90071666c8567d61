"""The BSP FFT on numpy arrays (complex128; lengths and process counts powers of two)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _native

__all__ = ["fft", "ifft", "FftPlan"]


def _default_p(n: int) -> int:
    """The largest power of two that is at most the cores of this machine and ``n``."""
    c = max(1, min(_native.nprocs(), n))
    return 1 << (c.bit_length() - 1)


def _procs(p: Any, n: int, op: str) -> int:
    if p is None:
        return _default_p(max(n, 1))
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"{op}: p must be an integer, not {type(p).__name__}")
    if p < 1:
        raise ValueError(f"{op}: p = {p} must be a power of two between 1 and the length {n}")
    return int(p)


def _input(x: Any, op: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{op}: x must be one-dimensional, not of shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise ValueError(f"{op}: x must be numeric, not {a.dtype}")
    return a


def _run(x: Any, p: Any, inverse: bool, out: Optional[np.ndarray], op: str) -> np.ndarray:
    a = _input(x, op)
    n = a.shape[0]
    p = _procs(p, n, op)
    src = a if a.dtype == np.complex128 and a.flags.c_contiguous else np.ascontiguousarray(a, dtype=np.complex128)
    if out is None:
        out = np.empty(n, dtype=np.complex128)
    elif not isinstance(out, np.ndarray) or out.dtype != np.complex128 or out.ndim != 1:
        raise ValueError(f"{op}: out must be a one-dimensional complex128 numpy array")
    if out is src:
        _native.fft_into(None, out, p, inverse)
    elif np.shares_memory(out, src):
        raise ValueError(f"{op}: out must be x itself or not overlap it")
    else:
        _native.fft_into(src, out, p, inverse)
    return out


def fft(x: Any, p: Optional[int] = None, out: Optional[np.ndarray] = None) -> np.ndarray:
    """The discrete Fourier transform of ``x`` (as ``numpy.fft.fft``: unscaled, ``exp(-2 pi i
    jk/n)``) by the BSP FFT over ``p`` processes (default: the largest power of two at most
    the cores). The length must be a power of two. ``out`` (complex128; may be ``x`` itself
    for an in-place transform) receives the result.

    >>> import numpy as np
    >>> x = np.random.default_rng(1).standard_normal(1024) + 0j
    >>> bool(np.allclose(fft(x, p=2), np.fft.fft(x)))
    True
    """
    return _run(x, p, False, out, "fft")


def ifft(x: Any, p: Optional[int] = None, out: Optional[np.ndarray] = None) -> np.ndarray:
    """The inverse of ``fft``, scaled by ``1/n`` (as ``numpy.fft.ifft``)."""
    return _run(x, p, True, out, "ifft")


class FftPlan:
    """Repeated transforms of one length ``n`` over ``p`` processes: checks the shape once;
    the runtime keeps the plan's tables (twiddles, kernels) between calls.

    >>> import numpy as np
    >>> plan = FftPlan(256, p=2)
    >>> x = np.ones(256, dtype=complex)
    >>> y = plan.forward(x)
    >>> bool(np.allclose(plan.inverse(y), x))
    True
    """

    def __init__(self, n: int, p: Optional[int] = None) -> None:
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"FftPlan: n must be an integer, not {type(n).__name__}")
        n = int(n)
        if n < 1 or n & (n - 1):
            raise ValueError(f"FftPlan: length {n} is not a power of two")
        self.n = n
        self.p = _procs(p, n, "FftPlan")
        if self.p & (self.p - 1) or self.p > n:
            raise ValueError(f"FftPlan: p = {self.p} must be a power of two between 1 and the length {n}")

    def _check(self, x: Any, op: str) -> None:
        n = np.shape(x)[0] if np.ndim(x) == 1 else None
        if n != self.n:
            raise ValueError(f"{op}: the plan is for length {self.n}, x has shape {np.shape(x)}")

    def forward(self, x: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
        """``fft(x)`` with this plan's ``p``."""
        self._check(x, "FftPlan.forward")
        return _run(x, self.p, False, out, "FftPlan.forward")

    def inverse(self, x: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
        """``ifft(x)`` with this plan's ``p``."""
        self._check(x, "FftPlan.inverse")
        return _run(x, self.p, True, out, "FftPlan.inverse")

    def __repr__(self) -> str:
        return f"FftPlan(n={self.n}, p={self.p})"
