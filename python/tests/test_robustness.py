"""Failures as Python exceptions, Ctrl-C, and no crash from any argument."""

import ast
import itertools
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.sparse as sp

import mbsp


def run_python(code, env=None, **kw):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env=dict(os.environ, **(env or {})), **kw,
    )


def test_a_failed_run_is_a_bsp_error():
    code = """
import mbsp, numpy as np, scipy.sparse as sp
plan = mbsp.SpmvPlan(sp.eye(8, format="csr"), p=2)
try:
    plan @ np.ones(8)
except mbsp.BspError as e:
    print("BspError:", e)
try:
    mbsp.fft(np.ones(16, dtype=complex), p=2)
except mbsp.BspError as e:
    print("BspError:", e)
"""
    out = run_python(code, env={"MBSP_AFFINITY": "sideways"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and all("MBSP_AFFINITY" in line for line in lines), out.stdout
    assert issubclass(mbsp.BspError, RuntimeError)


# Python turns SIGINT into KeyboardInterrupt only if the signal was not ignored when it started,
# and a shell without job control starts its background commands with SIGINT ignored (as
# scripts/test runs pytest): the interpreters of these tests install the handler themselves.
HANDLER = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


# The names of the calling interpreter's threads (for the code the tests run in a new one). A
# thread that ends while listed is left out (the partitioner's rayon pool ends unjoined).
THREADS = """
import os
def threads():
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            names.append(open(f"/proc/self/task/{t}/comm").read().strip())
        except FileNotFoundError:
            pass
    return names
"""


def interrupt(code, after=1.0):
    """Runs `code` in a new interpreter, sends SIGINT `after` seconds after it prints
    'ready', and returns its output."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HANDLER + code],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_ctrl_c_stops_long_calls_and_their_threads():
    code = """
import os
import mbsp, numpy as np, scipy.sparse as sp
n, nnz = 300000, 900000
g = np.random.default_rng(1)
A = sp.coo_matrix((np.ones(nnz), (g.integers(0, n, nnz), g.integers(0, n, nnz))), shape=(n, n))
import time
""" + THREADS + """
def lingers(started):
    # A joined thread may still be listed for a moment: the kernel wakes the joiner before it
    # removes the ended thread from /proc. A thread still listed after 5 s was not stopped.
    end = time.monotonic() + 5
    while any(map(started, threads())) and time.monotonic() < end:
        time.sleep(0.01)
    return any(map(started, threads()))
print("ready", flush=True)
try:
    mbsp.partition(A, 64)
    print("finished")
except KeyboardInterrupt:
    # The partitioner's thread has been joined by the time the exception is raised.
    print("interrupted", lingers(lambda t: t == "mbsp-partition"), flush=True)
print("ready", flush=True)
try:
    mbsp.SpmvPlan(A, kind="hier", levels=(8, 8))
    print("finished")
except KeyboardInterrupt:
    print("interrupted", lingers(lambda t: t == "mbsp-SpmvPlan"), flush=True)
print("ready", flush=True)
try:
    mbsp.Machine.detect().measure_params()
    print("finished")
except KeyboardInterrupt:
    # (A thread's name is cut to 15 bytes: mbsp-measure_pa.)
    print("interrupted", lingers(lambda t: t.startswith("mbsp-measure")), flush=True)
"""
    proc = subprocess.Popen(
        [sys.executable, "-c", HANDLER + code],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    seen = []
    # The parameter measurement takes about a second on two cores: interrupted sooner.
    for delay in (1.0, 1.0, 0.1):
        line = proc.stdout.readline().strip()
        assert line == "ready", (seen, line, proc.stderr.read())
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        seen.append(proc.stdout.readline().strip())
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert seen == ["interrupted False"] * 3, (seen, out, err)


def test_the_threads_mbsp_starts_are_named_for_it(tmp_path):
    # Each thread the package starts (rayon's pool for the reader and the partitioner, a kept
    # run's workers) has a name of its own, so that `top` tells them from the interpreter.
    path = tmp_path / "a.mtx"
    code = THREADS + f"""
import numpy as np, scipy.sparse as sp
before = sorted(threads())
import mbsp
# Over 1 MiB of text: the reader parses blocks on rayon's pool.
A = sp.random(2000, 2000, density=0.02, format="coo", random_state=1) + sp.eye(2000)
mbsp.write_mtx({str(path)!r}, A)
B = mbsp.read_mtx({str(path)!r})
mbsp.partition(B, 4)
plan = mbsp.SpmvPlan(B.tocsr(), p=2)
plan @ np.ones(2000)
after = sorted(threads())
for t in before:
    after.remove(t)
print(after)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    started = ast.literal_eval(out.stdout)
    assert started and all(t.startswith("mbsp-") for t in started), started
    assert any(t.startswith("mbsp-rayon-") for t in started), started


def test_ctrl_c_stops_cg_and_the_runtime_goes_on():
    code = """
import mbsp, numpy as np, scipy.sparse as sp
n = 20000
A = sp.diags([-1.0, 2.0001, -1.0], [-1, 0, 1], shape=(n, n), format="csr")
plan = mbsp.SpmvPlan(A, p=2)
print("ready", flush=True)
try:
    plan.cg(np.ones(n), tol=0.0, maxiter=10**12)
    print("finished")
except KeyboardInterrupt:
    print("interrupted")
x = np.arange(n, dtype=float)
print(bool(np.allclose(plan @ x, A @ x)))
"""
    rc, out, err = interrupt(code)
    assert rc == 0, err
    assert out.split() == ["interrupted", "True"], out


# Values a Python user might pass anywhere.
WEIRD = [
    None, 0, -1, 1, 2, 3, 2**63, 2**64, -(2**70), 1.5, float("nan"), float("inf"), "x", b"\0",
    [], [1, 2], (0,), {}, object(),
    np.array([]), np.zeros((2, 2)), np.array([1.0, np.nan]), np.arange(8), np.ones(16) * 1j,
    np.array(["a"]), np.ones(3, dtype=np.int8),
    sp.csr_matrix((0, 0)), sp.csr_matrix((3, 0)), sp.eye(4, format="csr"),
    sp.coo_matrix(([1.0], ([0], [0])), shape=(1, 1)),
]


def calls():
    A = sp.eye(4, format="csr")
    plan = mbsp.SpmvPlan(A, p=2)
    fplan = mbsp.FftPlan(16, p=2)
    m = mbsp.Machine.synthetic("package:2 core:2 pu:1")
    return [
        (mbsp.partition, 2), (lambda a, b: mbsp.partition(A, a, eps=b), 2),
        (lambda a, b: mbsp.partition(a, 2, seed=b), 2),
        (mbsp.SpmvPlan, 2), (lambda a, b: mbsp.SpmvPlan(A, kind="hier", levels=(a, b)), 2),
        (plan.multiply, 2), (plan.__matmul__, 1), (lambda a, b: plan.cg(a, tol=b), 2),
        (lambda a, b: plan.cg(np.ones(4), x0=a, maxiter=b), 2),
        (mbsp.fft, 2), (mbsp.ifft, 2), (lambda a, b: mbsp.fft(a, out=b), 2),
        (mbsp.FftPlan, 2), (fplan.forward, 2), (fplan.inverse, 1),
        (m.placement, 2), (lambda a, b: m.placement([2], "manual", cpus=[a, b]), 2),
        (mbsp.Machine.synthetic, 1), (lambda a: mbsp.Machine(xml=a), 1),
        (mbsp.read_mtx, 1), (mbsp.read_mondriaan, 2),
    ]


def test_no_argument_crashes_the_process(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # anything written lands here (and the next tests' cwd is kept)
    done = 0
    for f, arity in calls():
        for args in itertools.product(WEIRD, repeat=arity):
            try:
                f(*args)
            except (ValueError, TypeError, OSError, MemoryError, mbsp.BspError, OverflowError):
                pass
            done += 1
    assert done > 1000
