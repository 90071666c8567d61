"""The benchmark script's smoke run: its tables and its JSON (the numbers are not checked: a
test build on a shared machine)."""

import json
import os
import subprocess
import sys

import pytest


def run_bench(matrices, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MBSP_DATA_DIR=str(matrices.parent))
    return subprocess.run([sys.executable, "-m", "mbsp.bench", "--quick", "--no-partition", *args],
                          capture_output=True, text=True, timeout=300, env=env)


def test_the_quick_run_prints_every_table_and_the_speedup_over_one_process(matrices):
    out = run_bench(matrices, "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    spmv = [r for r in rows if r["table"] == "spmv"]
    assert {r["case"] for r in spmv} == {"bcsstk16", "wing"}
    for r in spmv:
        assert r["p"] == 2 and r["rel_error"] < 1e-12
        assert r["mbsp_us"] > 0 and r["mbsp_p1_us"] > 0
        assert r["speedup_p1"] == pytest.approx(r["mbsp_p1_us"] / r["mbsp_us"])
    assert [r["case"] for r in rows if r["table"] == "fft"] == ["n = 2^12", "n = 2^18"]
    text = run_bench(matrices)
    assert text.returncode == 0, text.stderr
    assert "p=1 us" in text.stdout and "over p = 1 (/p=1): median" in text.stdout


def test_bad_arguments_exit_with_status_2():
    out = subprocess.run([sys.executable, "-m", "mbsp.bench", "--rounds", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "must be at least 1" in out.stderr
