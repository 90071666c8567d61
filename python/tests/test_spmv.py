"""The BSP SpMV and CG from Python, checked against scipy."""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import mbsp

SHARED = ["rajat01.mtx", "wing.mtx", "bcsstk16.mtx"]


def spd(n, seed):
    """A sparse symmetric positive definite matrix: a random pattern made diagonally dominant."""
    R = sp.random(n, n, density=4.0 / n, random_state=seed, format="csr")
    S = R + R.T
    return (S + sp.diags(np.asarray(abs(S).sum(axis=1)).ravel() + 1.0)).tocsr()


@pytest.mark.parametrize("name", SHARED)
def test_every_kind_multiplies_as_scipy_on_the_shared_matrices(matrices, name):
    A = mbsp.read_mtx(matrices / name).tocsr()
    x = np.random.default_rng(1).standard_normal(A.shape[1])
    want = A @ x
    plans = [
        mbsp.SpmvPlan(A, p=2, kind="plain"),
        mbsp.SpmvPlan(A, p=3, kind="hp"),
        mbsp.SpmvPlan(A, kind="hier", levels=(2, 2)),
    ]
    for plan in plans:
        y = plan @ x
        assert y.shape == want.shape
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
        # Repeated multiplies of one plan, into a given array.
        out = np.full(A.shape[0], np.nan)
        for k in range(3):
            got = plan.multiply(x * k, out=out)
            assert got is out
            np.testing.assert_allclose(out, want * k, rtol=1e-12, atol=1e-12 * np.abs(want).max() * k)


def test_rectangular_and_given_partitions():
    A = sp.random(70, 40, density=0.1, random_state=2, format="csr")
    x = np.arange(40.0)
    for p in (1, 2, 4, 7):
        r = mbsp.partition(A, p, seed=p)
        for kind in ("plain", "hp"):
            plan = mbsp.SpmvPlan(A, partition=r, kind=kind)
            assert plan.p == p and plan.shape == (70, 40)
            assert plan.volumes[0] == r.volume
            np.testing.assert_allclose(plan @ x, A @ x, rtol=1e-12, atol=1e-12)
    assert sum(mbsp.SpmvPlan(A, p=3).nnz_per_process) == A.nnz
    assert "SpmvPlan(70 x 40" in repr(plan)


def test_x_of_any_real_dtype_and_empty_matrices():
    A = sp.random(30, 30, density=0.2, random_state=3, format="csr")
    plan = mbsp.SpmvPlan(A, p=2)
    xi = np.arange(30, dtype=np.int32)
    np.testing.assert_allclose(plan @ xi, A @ xi.astype(float))
    np.testing.assert_allclose(plan @ list(range(30)), A @ np.arange(30.0))
    # Non-contiguous x.
    xs = np.arange(60.0)[::2]
    np.testing.assert_allclose(plan @ xs, A @ xs)
    E = sp.csr_matrix((5, 4))
    assert np.array_equal(mbsp.SpmvPlan(E, p=2) @ np.ones(4), np.zeros(5))
    Z = sp.csr_matrix((0, 0))
    assert (mbsp.SpmvPlan(Z, p=1) @ np.ones(0)).shape == (0,)


def test_infinite_and_nan_entries_reach_the_rows_scipy_gives_them():
    # Rows of mixed lengths (padding in the multiply's chunks) and rows cut by the partition.
    A = sp.random(300, 200, density=0.03, random_state=4, format="csr") + sp.eye(300, 200)
    x = np.random.default_rng(5).standard_normal(200)
    x[[3, 50]] = np.inf
    x[77] = -np.inf
    x[120] = np.nan
    want = A @ x
    for kind in ("hp", "plain"):
        for p in (1, 2, 3):
            got = mbsp.SpmvPlan(A, p=p, kind=kind) @ x
            assert np.array_equal(np.isnan(got), np.isnan(want)), (kind, p)
            fin = ~np.isnan(want)
            assert np.array_equal(np.isinf(got[fin]), np.isinf(want[fin])), (kind, p)
            assert np.allclose(got[fin], want[fin], rtol=1e-12, atol=1e-12), (kind, p)


def test_duplicates_are_summed_as_scipy_sums_them():
    A = sp.coo_matrix(([1.0, 2.0, 3.0], ([0, 0, 1], [1, 1, 0])), shape=(2, 2))
    np.testing.assert_allclose(mbsp.SpmvPlan(A, p=2) @ np.array([1.0, 10.0]), [30.0, 3.0])


def test_cg_solves_as_scipy_does():
    for n, p, seed in [(200, 2, 1), (500, 3, 2), (64, 1, 3)]:
        A = spd(n, seed)
        b = np.random.default_rng(seed).standard_normal(n)
        res = mbsp.cg(A, b, tol=1e-10, p=p)
        assert res.converged and res.iterations > 0
        want = spla.spsolve(A.tocsc(), b)
        np.testing.assert_allclose(res.x, want, rtol=1e-7, atol=1e-8)
        assert np.linalg.norm(b - A @ res.x) <= 1e-8 * np.linalg.norm(b)
        # From a given start, on a plan made once.
        plan = mbsp.SpmvPlan(A, p=p, kind="plain")
        again = plan.cg(b, x0=want, tol=1e-6)
        assert again.iterations <= 1
    assert "iterations" in repr(res)


def test_cg_on_the_shared_spd_matrix(matrices):
    A = mbsp.read_mtx(matrices / "bcsstk16.mtx").tocsr()
    b = A @ np.ones(A.shape[0])
    res = mbsp.SpmvPlan(A, p=2).cg(b, tol=1e-10)
    assert res.converged
    np.testing.assert_allclose(res.x, np.ones(A.shape[0]), atol=1e-6)


def test_cg_stops_at_maxiter_and_refuses_what_it_cannot_solve():
    A = spd(100, 4)
    b = np.ones(100)
    res = mbsp.cg(A, b, tol=1e-14, maxiter=3, p=2)
    assert res.iterations == 3 and not res.converged
    zero = mbsp.cg(A, np.zeros(100), p=2)
    assert zero.converged and not zero.x.any()
    with pytest.raises(ValueError, match="not symmetric positive definite"):
        mbsp.cg(-A, b, p=2)
    with pytest.raises(ValueError, match="not square"):
        mbsp.SpmvPlan(sp.random(4, 5, density=0.5), p=2).cg(np.ones(4))
    rect = mbsp.partition(A, 2, seed=1)  # x and y owners chosen apart
    if not np.array_equal(rect.x_owner, rect.y_owner):
        with pytest.raises(ValueError, match="square=True"):
            mbsp.SpmvPlan(A, partition=rect).cg(b)
    with pytest.raises(ValueError, match="flat plans"):
        mbsp.SpmvPlan(A, kind="hier", levels=(1, 2)).cg(b)
    with pytest.raises(ValueError, match="b has"):
        mbsp.cg(A, np.ones(99), p=2)


def test_spmv_errors():
    A = sp.random(10, 8, density=0.3, random_state=1, format="csr")
    plan = mbsp.SpmvPlan(A, p=2)
    with pytest.raises(ValueError, match="x has 7 entries"):
        plan @ np.ones(7)
    with pytest.raises(ValueError, match="one-dimensional"):
        plan @ np.ones((8, 2))
    with pytest.raises(ValueError, match="complex"):
        plan @ (np.ones(8) * 1j)
    with pytest.raises(ValueError, match="out has 9 entries"):
        plan.multiply(np.ones(8), out=np.empty(9))
    with pytest.raises(ValueError, match="float64"):
        plan.multiply(np.ones(8), out=np.empty(10, dtype=np.float32))
    with pytest.raises(ValueError, match="contiguous"):
        plan.multiply(np.ones(8), out=np.empty(20)[::2])
    with pytest.raises(ValueError, match="unknown kind"):
        mbsp.SpmvPlan(A, p=2, kind="fast")
    with pytest.raises(ValueError, match="levels"):
        mbsp.SpmvPlan(A, kind="hier")
    with pytest.raises(ValueError, match="at least 1"):
        mbsp.SpmvPlan(A, kind="hier", levels=(0, 2))
    with pytest.raises(ValueError, match="p = 3 but"):
        mbsp.SpmvPlan(A, p=3, partition=mbsp.partition(A, 2))
    with pytest.raises(ValueError, match="parts has"):
        mbsp.SpmvPlan(sp.eye(10, format="csr"), partition=mbsp.partition(A, 2))
    with pytest.raises(MemoryError):
        mbsp.SpmvPlan(A, p=10**14)
