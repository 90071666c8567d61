"""The benchmark script's smoke run (`python -m mbsp.bench --quick`): its JSON, CSV and tables,
and the partitioner against the `mbsp` command. The numbers are not checked (a test build on a
shared machine)."""

import csv
import json
import os
import subprocess
import sys

import pytest

from mbsp import bench


def run_bench(matrices, command, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MBSP_DATA_DIR=str(matrices.parent), MBSP_BIN=command)
    return subprocess.run([sys.executable, "-m", "mbsp.bench", "--quick", *args],
                          capture_output=True, text=True, timeout=300, env=env)


def test_the_quick_run_prints_every_table_and_the_speedup_over_one_process(
    matrices, mbsp_command, tmp_path, capsys
):
    csv_path = tmp_path / "bench.csv"
    out = run_bench(matrices, mbsp_command, "--json", "--csv", str(csv_path))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    rows = result["rows"]
    spmv = [r for r in rows if r["table"] == "spmv"]
    assert {r["case"] for r in spmv} == {"bcsstk16", "wing"}
    for r in spmv:
        assert r["p"] == 2 and r["rel_error"] < 1e-12
        assert r["mbsp_us"] > 0 and r["mbsp_p1_us"] > 0
        assert r["speedup_p1"] == pytest.approx(r["mbsp_p1_us"] / r["mbsp_us"])
    assert [r["case"] for r in rows if r["table"] == "fft"] == ["n = 2^12", "n = 2^18"]
    # Timed targets are judged by the interval of the speed ratio over the rounds.
    for r in rows:
        if r["table"] in ("spmv", "fft"):
            assert r["verdict"] in ("met", "MISSED", "unclear")
            assert r["met"] == (r["verdict"] == "met")
            assert 0 < r["ratio_lo"] <= r["ratio_hi"] and 0 < r["ratio_level"] <= 1
    # The machine's state over the run: a mark after every round of the two comparisons, the
    # verdict line the tables end with, the line probe's range where it could run, and the
    # range of the local-work probe.
    state = result["machine_state"]
    assert state["rounds"] >= 6 and isinstance(state["quiet"], bool)
    assert state["line"].startswith("machine state during the runs: ")
    assert state["quiet"] == (state["causes"] == [])
    if state["line_round_trip_ns"] is not None:
        assert 0 < state["line_round_trip_ns"]["min"] <= state["line_round_trip_ns"]["max"]
    # The fixed loop of local work is timed at every mark, on any machine.
    assert 0 < state["local_work_us"]["min"] <= state["local_work_us"]["max"]
    # The partitioner against the command, same seed.
    part = [r for r in rows if r["table"] == "partition"]
    assert [(r["case"], r["p"]) for r in part] == [("bcsstk16", 2)]
    assert part[0]["volume"] == part[0]["command_volume"] and part[0]["met"]
    with open(csv_path, newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [r["case"] for r in table] == [r["case"] for r in rows]
    assert float(table[0]["speedup_p1"]) == pytest.approx(rows[0]["speedup_p1"])
    # The tables the run prints without --json, from the same rows.
    bench.print_tables(rows, result["machine"])
    text = capsys.readouterr().out
    assert "p=1 us" in text and "over p = 1 (/p=1): median" in text
    assert "target [" in text and "FFT (complex128)" in text and "Partitioner:" in text


def test_bad_arguments_exit_with_status_2():
    out = subprocess.run([sys.executable, "-m", "mbsp.bench", "--rounds", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "must be at least 1" in out.stderr


def test_a_verdict_follows_the_interval_of_the_ratio():
    from mbsp import _native
    flat = [1.00, 1.02, 0.99, 1.01, 1.03, 0.98, 1.00]
    fast = [t / 1.5 for t in flat]
    slow = [1.20, 1.22, 1.19, 1.21, 1.23, 1.18, 1.20]
    noisy = [0.7, 1.5, 0.9, 1.4, 1.0, 1.3, 0.8]
    ratio, lo, hi, level, verdict = _native.speedup_at_least(fast, flat, 1.2)
    assert verdict == "met" and 1.2 <= lo <= ratio <= hi and level >= 0.95
    _, lo, hi, _, verdict = _native.speedup_at_least(slow, flat, 1.0)
    assert verdict == "MISSED" and hi < 1.0
    _, lo, hi, _, verdict = _native.speedup_at_least(noisy, flat, 1.0)
    assert verdict == "unclear" and lo < 1.0 < hi
    # Two rounds a side cannot give a 95% interval: nothing can be told.
    assert _native.speedup_at_least(fast[:2], flat[:2], 1.2)[4] == "unclear"
    # As the bench uses it: mbsp at least 1.2x as fast as the baseline.
    assert bench.judged(fast, flat, 1.2)["verdict"] == "met"
    assert bench.judged(flat, fast, 1.2)["verdict"] == "MISSED"
    with pytest.raises(ValueError, match="positive finite times"):
        _native.speedup_at_least([], flat, 1.05)
    with pytest.raises(ValueError, match="positive target"):
        _native.speedup_at_least(flat, flat, 0.0)
