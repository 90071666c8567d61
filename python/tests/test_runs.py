"""The runs that multiplies keep between calls: results, threads, plans let go."""

import os
import threading
import time

import numpy as np
import scipy.sparse as sp

import mbsp
from mbsp import _native


def os_threads():
    return len(os.listdir("/proc/self/task"))


def settle(at_most):
    """The thread count once it is at most `at_most`, or after 10 s. (A Python thread's join
    returns before the OS thread has run its thread-local destructors, which end its runs.)"""
    for _ in range(1000):
        n = os_threads()
        if n <= at_most:
            return n
        time.sleep(0.01)
    return os_threads()


def matrix(n, seed):
    return sp.random(n, n, density=5.0 / n, random_state=seed, format="csr") + sp.eye(n)


def test_alternating_plans_of_one_run_give_their_own_results():
    A, B = matrix(300, 1), matrix(300, 2)
    pa, pb = mbsp.SpmvPlan(A, p=2), mbsp.SpmvPlan(B, p=2, kind="plain")
    x = np.arange(300.0)
    for _ in range(5):
        np.testing.assert_allclose(pa @ x, A @ x, rtol=1e-12)
        np.testing.assert_allclose(pb @ x, B @ x, rtol=1e-12)
    # One run for both plans of two processes.
    assert _native.kept_runs() >= 1
    three = mbsp.SpmvPlan(A, p=3)
    np.testing.assert_allclose(three @ x, A @ x, rtol=1e-12)


def test_a_thread_that_ends_ends_its_runs():
    A = matrix(200, 3)
    plan = mbsp.SpmvPlan(A, p=2)
    x = np.ones(200)
    out = {}

    def work():
        out["y"] = plan @ x
        out["kept"] = _native.kept_runs()
        out["during"] = os_threads()

    def cycle():
        t = threading.Thread(target=work)
        t.start()
        t.join()
        np.testing.assert_allclose(out["y"], A @ x, rtol=1e-12)

    before = os_threads()
    cycle()
    assert out["kept"] == 1  # the first thread's run holds the new plan
    assert out["during"] >= before + 1  # the thread, and its run's other process
    # (A later thread may find the plan still held by the one before, whose thread-local
    # destructors run after join returns, and multiply in a run of its own: kept 0.)
    cycle()
    after_two = settle(before + 1)
    # A run left waiting by each ended thread would add a thread per cycle; an ended run's
    # other process returns to the runtime's worker team, which the next run reuses.
    for _ in range(6):
        cycle()
    assert settle(after_two) <= after_two
    # The plan is free again for this thread's run.
    np.testing.assert_allclose(plan @ x, A @ x, rtol=1e-12)


def test_a_plan_held_by_another_thread_still_multiplies():
    A = matrix(250, 4)
    plan = mbsp.SpmvPlan(A, p=2)
    x = np.arange(250.0)
    np.testing.assert_allclose(plan @ x, A @ x, rtol=1e-12)  # this thread's run holds it
    res = []
    ts = [threading.Thread(target=lambda: res.append(plan @ x)) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(res) == 4
    for y in res:
        np.testing.assert_allclose(y, A @ x, rtol=1e-12)


def test_plans_dropped_are_let_go_and_threads_stay_bounded():
    x = np.ones(150)
    for seed in range(12):
        A = matrix(150, seed)
        for p in (2, 3):
            plan = mbsp.SpmvPlan(A, p=p)
            np.testing.assert_allclose(plan @ x, A @ x, rtol=1e-12)
            del plan
    assert _native.kept_runs() <= 4
    # Runs of at most 4 process counts, each of at most 3 processes, besides this one.
    before = os_threads()
    for p in (1, 4, 5, 6, 7):
        plan = mbsp.SpmvPlan(matrix(100, p), p=p)
        plan @ np.ones(100)
    assert _native.kept_runs() <= 4
    assert os_threads() <= before + 4 * 6


def test_a_failed_run_is_reported_and_the_next_multiply_works():
    code = """
import numpy as np, scipy.sparse as sp, mbsp
A = sp.eye(50, format="csr")
plan = mbsp.SpmvPlan(A, p=2)
import os
os.environ["MBSP_AFFINITY"] = "sideways"  # read when a run starts
try:
    plan @ np.ones(50)
except mbsp.BspError as e:
    print("failed:", "MBSP_AFFINITY" in str(e))
del os.environ["MBSP_AFFINITY"]
print("then:", bool(np.allclose(plan @ np.ones(50), 1.0)))
"""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["failed:", "True", "then:", "True"], out.stdout


def test_transforms_and_multiplies_share_a_run():
    A = matrix(256, 5)
    plan = mbsp.SpmvPlan(A, p=2)
    x = np.arange(256.0)
    g = np.random.default_rng(2)
    for n in [256, 1024, 256, 4096, 4096]:
        z = g.standard_normal(n) + 1j * g.standard_normal(n)
        np.testing.assert_allclose(mbsp.fft(z, p=2), np.fft.fft(z), atol=1e-9 * n)
        np.testing.assert_allclose(plan @ x, A @ x, rtol=1e-12)
        np.testing.assert_allclose(mbsp.ifft(z, p=4), np.fft.ifft(z), atol=1e-12)
        inplace = z.copy()
        mbsp.fft(inplace, p=2, out=inplace)
        np.testing.assert_allclose(inplace, np.fft.fft(z), atol=1e-9 * n)


def test_transforms_from_several_threads_at_once():
    g = np.random.default_rng(3)
    data = [g.standard_normal(1 << k) + 0j for k in (8, 10, 12, 10)]
    got = [None] * len(data)

    def work(i):
        for _ in range(5):
            got[i] = mbsp.fft(data[i], p=2)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(data))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for z, y in zip(data, got):
        np.testing.assert_allclose(y, np.fft.fft(z), atol=1e-9 * len(z))
