"""The BSP FFT from Python, checked against numpy.fft."""

import numpy as np
import pytest

import mbsp


def data(n, seed=1):
    g = np.random.default_rng(seed)
    return g.standard_normal(n) + 1j * g.standard_normal(n)


@pytest.mark.parametrize("log_n", [0, 1, 3, 8, 12, 16])
def test_fft_and_ifft_are_numpys(log_n):
    n = 1 << log_n
    x = data(n)
    for p in sorted({1, min(2, n), min(4, n), min(8, n)}):
        y = mbsp.fft(x, p=p)
        np.testing.assert_allclose(y, np.fft.fft(x), rtol=1e-9, atol=1e-9 * max(1, n))
        np.testing.assert_allclose(mbsp.ifft(y, p=p), x, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(mbsp.ifft(x, p=p), np.fft.ifft(x), rtol=1e-9, atol=1e-12)
    # The default p, the input untouched.
    before = x.copy()
    np.testing.assert_allclose(mbsp.fft(x), np.fft.fft(x), rtol=1e-9, atol=1e-9 * max(1, n))
    assert np.array_equal(x, before)


def test_real_and_other_dtypes_and_out():
    x = np.arange(64)
    np.testing.assert_allclose(mbsp.fft(x, p=2), np.fft.fft(x), atol=1e-9)
    np.testing.assert_allclose(mbsp.fft(x.astype(np.float32)), np.fft.fft(x), atol=1e-3)
    np.testing.assert_allclose(mbsp.fft(x.astype(np.complex64)), np.fft.fft(x), atol=1e-3)
    z = data(128)
    out = np.empty(128, dtype=complex)
    assert mbsp.fft(z, p=4, out=out) is out
    np.testing.assert_allclose(out, np.fft.fft(z), atol=1e-9)
    inplace = z.copy()
    assert mbsp.fft(inplace, out=inplace) is inplace
    np.testing.assert_allclose(inplace, np.fft.fft(z), atol=1e-9)
    strided = data(256)[::2]
    np.testing.assert_allclose(mbsp.fft(strided, p=2), np.fft.fft(strided), atol=1e-9)


def test_plan_for_repeated_transforms():
    plan = mbsp.FftPlan(1024, p=2)
    for seed in range(3):
        x = data(1024, seed)
        y = plan.forward(x)
        np.testing.assert_allclose(y, np.fft.fft(x), atol=1e-8)
        np.testing.assert_allclose(plan.inverse(y), x, atol=1e-12)
    assert repr(plan) == "FftPlan(n=1024, p=2)"
    with pytest.raises(ValueError, match="plan is for length 1024"):
        plan.forward(data(512))


def test_fft_errors():
    with pytest.raises(ValueError, match="not a power of two"):
        mbsp.fft(data(12))
    with pytest.raises(ValueError, match="not a power of two"):
        mbsp.fft(np.zeros(0, dtype=complex))
    with pytest.raises(ValueError, match="power of two between 1 and the length 16"):
        mbsp.fft(data(16), p=3)
    with pytest.raises(ValueError, match="power of two between 1 and the length 16"):
        mbsp.fft(data(16), p=32)
    with pytest.raises(ValueError):
        mbsp.fft(data(16), p=0)
    with pytest.raises(TypeError):
        mbsp.fft(data(16), p=2.0)
    with pytest.raises(ValueError, match="one-dimensional"):
        mbsp.fft(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="numeric"):
        mbsp.fft(np.array(["a", "b"]))
    with pytest.raises(ValueError, match="complex128"):
        mbsp.fft(data(16), out=np.empty(16))
    with pytest.raises(ValueError, match="out has 8 entries"):
        mbsp.fft(data(16), out=np.empty(8, dtype=complex))
    with pytest.raises(ValueError, match="not a power of two"):
        mbsp.FftPlan(100)
