"""Benchmarks of the package against numpy and scipy, measured in the same run.

    python -m mbsp.bench                 # SpMV, FFT and partitioner tables (a few minutes)
    python -m mbsp.bench --quick         # a smoke run of seconds (numbers not meaningful)
    python -m mbsp.bench --json          # one JSON object instead of the tables
    python -m mbsp.bench --csv FILE      # the rows as CSV too
    python -m mbsp.bench --mtkahypar     # only the partitioner against Mt-KaHyPar (minutes)

* SpMV: ``plan @ x`` of an ``SpmvPlan`` (kind ``hp``) at p = 2 against scipy.sparse's
  ``A @ x`` (CSR), on every shared matrix of over 200 000 nonzeros; target >= 1.7x. The same
  multiply on one process is timed in the same rounds (columns ``p=1 us`` and ``/p=1``): what
  the second core gave the run, which a VM does not always give (docs/benchmarks.md).
* FFT: ``mbsp.fft(x, p=2)`` against ``numpy.fft.fft`` for n = 2^18 ... 2^22; target >= 1.3x.
* Partitioner: the volume of ``mbsp.partition(path, p, seed=...)`` against that of the
  command ``mbsp partition --json`` with the same seed (found as MBSP_BIN, on PATH, or in the
  workspace's target folder); target: equal.

* Mt-KaHyPar (opt-in, ``--mtkahypar``; needs the PyPI package ``mtkahypar``, else the section
  is skipped with one line): ``mbsp.partition``, default and ``quality=True``, against
  Mt-KaHyPar on the fine-grain hypergraph of the same matrix (every nonzero a vertex, every
  nonempty row and column a net; its km1 objective is then exactly the SpMV communication
  volume), 2 threads, the same eps, presets
  QUALITY and DEFAULT, p = 4 and 64; Mt-KaHyPar's volume is recomputed from the partition it
  returns, and its balance checked. Each case runs once per side (a partition takes seconds),
  the two sides one after the other; the times are the partitioners' own (mbsp's
  ``Partition.seconds``, Mt-KaHyPar's ``partition`` call), not reading or building the input.

Each comparison alternates the two sides in rounds and compares medians of the rounds taken
in the same minutes (the machine is shared and noisy: see the spread columns); a target is
judged by the 95% interval of the speed ratio over the rounds (the ``interval`` column):
met when all of it reaches the target, MISSED when none of it does, unclear when it holds the
target (``mbsp_tools::stats::at_most``, as ``mbsp-bench`` and ``mbsp affinity`` judge); the SpMV rounds
go over every matrix in turn, so that each matrix's rounds spread over the whole table rather
than a few seconds of it. The tables end with the machine's state during the runs (other
processes' CPU time, stolen time, the clock, a cache line's round trip between two CPUs probed
after every round: quiet, BUSY or UNSTEADY, as the commands say it); --json has it under
"machine_state". Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import mbsp
from mbsp import _native

# What the machine does during the benchmark: made in main, marked after every round.
_WATCH: Optional[_native.MachineWatch] = None

SPMV_MIN_NNZ = 200_000
SPMV_TARGET = 1.7
FFT_TARGET = 1.3


def progress(msg: str) -> None:
    print(f"mbsp.bench: {msg}", file=sys.stderr, flush=True)


def data_dir() -> pathlib.Path:
    """The shared matrices: MBSP_DATA_DIR/matrices, else ../shared/data/matrices beside the
    repository this package is in (python/mbsp/ inside it)."""
    env = os.environ.get("MBSP_DATA_DIR")
    if env:
        return pathlib.Path(env) / "matrices"
    beside = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "data" / "matrices"
    if beside.is_dir():
        return beside
    raise SystemExit(
        f"mbsp.bench: the shared matrices are not at {beside}: set MBSP_DATA_DIR"
    )


def interleaved(fs: Sequence[Callable[[], Any]], reps: int, rounds: int) -> List[List[float]]:
    """Seconds per call of each function, one figure per round, the functions taking turns."""
    return round_robin([(fs, reps)], rounds)[0]


def round_robin(groups: Sequence[Tuple[Sequence[Callable[[], Any]], int]], rounds: int,
                what: str = "") -> List[List[List[float]]]:
    """Seconds per call of each function of each group (functions, calls per figure), one
    figure per round: in each round every group's functions take turns, so that each group's
    rounds spread over the whole measurement instead of a few seconds of it (a VM's slow
    spell then weighs on every group alike rather than deciding one). Each figure follows one
    untimed call (the kept run attaches the group's plan: once per round)."""
    times: List[List[List[float]]] = [[[] for _ in fs] for fs, _ in groups]
    for r in range(rounds):
        for (fs, reps), group in zip(groups, times):
            for f, out in zip(fs, group):
                f()
                t = time.perf_counter()
                for _ in range(reps):
                    f()
                out.append((time.perf_counter() - t) / reps)
        if _WATCH is not None:
            _WATCH.mark()
        if what:
            progress(f"{what}: round {r + 1} of {rounds}")
    return times


def judged(mbsp_times: List[float], base_times: List[float], target: float) -> Dict[str, Any]:
    """The verdict on "mbsp at least `target` times as fast as the baseline" from the rounds of
    both: the speed ratio's interval and met / MISSED / unclear."""
    _, lo, hi, level, verdict = _native.speedup_at_least(mbsp_times, base_times, target)
    return {"met": verdict == "met", "verdict": verdict, "ratio_lo": lo, "ratio_hi": hi,
            "ratio_level": level}


def spread(v: List[float]) -> float:
    """(max - min) / median of a list of times."""
    m = float(np.median(v))
    return (max(v) - min(v)) / m if m > 0 else 0.0


def bench_spmv(files: List[pathlib.Path], p: int, rounds: int, budget: float) -> List[Dict[str, Any]]:
    cases = []
    for f in files:
        A = mbsp.read_mtx(f)
        if A.nnz <= SPMV_MIN_NNZ:
            continue
        name = f.name.split(".")[0]
        csr = A.tocsr()
        progress(f"spmv {name}: {csr.nnz} nonzeros, partitioning for p = {p} ...")
        t = time.perf_counter()
        plan = mbsp.SpmvPlan(A, p=p, kind="hp")
        plan_s = time.perf_counter() - t
        # The same multiply on one process, to show what the machine's second core gave.
        plan1 = mbsp.SpmvPlan(A, p=1, kind="hp") if p > 1 else plan
        x = np.random.default_rng(1).standard_normal(csr.shape[1])
        out = np.empty(csr.shape[0])
        want = csr @ x
        err = float(np.abs(plan.multiply(x, out=out) - want).max() / max(np.abs(want).max(), 1e-300))
        t1 = time.perf_counter()
        csr @ x
        reps = max(1, int(budget / max(time.perf_counter() - t1, 1e-6)))
        # (Bound to this case's objects: the loop rebinds the names.)
        fs: List[Callable[[], Any]] = [
            functools.partial(csr.__matmul__, x),
            functools.partial(plan.multiply, x, out=out),
            functools.partial(plan1.multiply, x, out=out),
        ]
        cases.append((name, csr.nnz, plan_s, err, fs, reps))
    # Every matrix in every round: the rounds of one matrix spread over the whole table.
    times = round_robin([(fs, reps) for *_, fs, reps in cases], rounds, "spmv")
    rows = []
    for (name, nnz, plan_s, err, _, _), (ts, tm, tp1) in zip(cases, times):
        ms, mm, m1 = float(np.median(ts)), float(np.median(tm)), float(np.median(tp1))
        rows.append({
            "table": "spmv", "case": name, "nnz": int(nnz), "p": p,
            "baseline": "scipy A @ x", "baseline_us": ms * 1e6, "mbsp_us": mm * 1e6,
            "mbsp_p1_us": m1 * 1e6, "speedup_p1": m1 / mm,
            "ratio": ms / mm, "spread_baseline": spread(ts), "spread_mbsp": spread(tm),
            "target": SPMV_TARGET, **judged(tm, ts, SPMV_TARGET), "rel_error": err,
            "plan_seconds": plan_s,
        })
        progress(f"spmv {name}: scipy {ms * 1e6:.0f} us, mbsp {mm * 1e6:.0f} us, {ms / mm:.2f}x"
                 f" (p = 1: {m1 * 1e6:.0f} us)")
    return rows


def bench_fft(logs: List[int], p: int, rounds: int, budget: float) -> List[Dict[str, Any]]:
    rows = []
    for k in logs:
        n = 1 << k
        g = np.random.default_rng(k)
        x = g.standard_normal(n) + 1j * g.standard_normal(n)
        out = np.empty(n, dtype=complex)
        err = float(np.abs(mbsp.fft(x, p=p) - np.fft.fft(x)).max() / np.abs(np.fft.fft(x)).max())
        t1 = time.perf_counter()
        np.fft.fft(x)
        reps = max(1, int(budget / max(time.perf_counter() - t1, 1e-6)))
        tn, tm = interleaved([lambda: np.fft.fft(x), lambda: mbsp.fft(x, p=p, out=out)], reps, rounds)
        mn, mm = float(np.median(tn)), float(np.median(tm))
        rows.append({
            "table": "fft", "case": f"n = 2^{k}", "n": n, "p": p,
            "baseline": "numpy.fft.fft", "baseline_us": mn * 1e6, "mbsp_us": mm * 1e6,
            "ratio": mn / mm, "spread_baseline": spread(tn), "spread_mbsp": spread(tm),
            "target": FFT_TARGET, **judged(tm, tn, FFT_TARGET), "rel_error": err,
        })
        progress(f"fft 2^{k}: numpy {mn * 1e3:.2f} ms, mbsp {mm * 1e3:.2f} ms, {mn / mm:.2f}x")
    return rows


def find_command() -> Optional[str]:
    env = os.environ.get("MBSP_BIN")
    if env:
        return env
    on_path = shutil.which("mbsp")
    if on_path:
        return on_path
    here = pathlib.Path(__file__).resolve()
    for up in here.parents:
        for profile in ("release", "debug"):
            cand = up / "target" / profile / "mbsp"
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return None


def bench_partition(files: List[pathlib.Path], ps: List[int], seed: int) -> List[Dict[str, Any]]:
    cmd = find_command()
    if cmd is None:
        raise SystemExit("mbsp.bench: the mbsp command is not found (set MBSP_BIN, or --no-partition)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            name = f.name.split(".")[0]
            for p in ps:
                progress(f"partition {name} p = {p} (package, then command) ...")
                r = mbsp.partition(str(f), p, seed=seed)
                out = subprocess.run(
                    [cmd, "partition", str(f), "-p", str(p), "--seed", str(seed),
                     "--out", os.path.join(tmp, name), "--json"],
                    capture_output=True, text=True,
                )
                if out.returncode != 0:
                    raise SystemExit(f"mbsp.bench: {cmd} partition failed: {out.stderr.strip()}")
                c = json.loads(out.stdout)
                rows.append({
                    "table": "partition", "case": name, "p": p, "seed": seed,
                    "volume": r.volume, "command_volume": c["volume"],
                    "max_h": r.max_h, "command_max_h": c["max_h"],
                    "seconds": r.seconds, "command_seconds": c["seconds"],
                    "met": r.volume == c["volume"] and r.max_h == c["max_h"],
                })
    return rows


def volume_of(rows: np.ndarray, cols: np.ndarray, parts: np.ndarray, m: int, n: int) -> int:
    """The SpMV communication volume of a nonzero partition: the sum over rows and columns of
    (distinct parts among the line's nonzeros) - 1, computed from scratch."""
    total = 0
    for lines, count in ((rows, m), (cols, n)):
        pairs = np.unique(lines.astype(np.int64) * (int(parts.max()) + 1) + parts)
        lam = np.bincount(pairs // (int(parts.max()) + 1), minlength=count)
        total += int(np.maximum(lam - 1, 0).sum())
    return total


def fine_grain_nets(rows: np.ndarray, cols: np.ndarray, m: int, n: int) -> List[List[int]]:
    """The nets of the fine-grain hypergraph (vertex k = nonzero k): one per row and one per
    column with at least two nonzeros (a net of one pin is never cut)."""
    nets: List[List[int]] = []
    for lines, count in ((rows, m), (cols, n)):
        order = np.argsort(lines, kind="stable")
        bounds = np.searchsorted(lines[order], np.arange(count + 1))
        for i in range(count):
            lo, hi = bounds[i], bounds[i + 1]
            if hi - lo >= 2:
                nets.append(order[lo:hi].tolist())
    return nets


def bench_mtkahypar(files: List[pathlib.Path], ps: List[int], seed: int, eps: float,
                    threads: int = 2) -> List[Dict[str, Any]]:
    """mbsp.partition against Mt-KaHyPar (QUALITY and DEFAULT) on the fine-grain hypergraph;
    [] with one line on stderr when the module is not importable."""
    try:
        import mtkahypar  # type: ignore[import-not-found]
    except ImportError as e:
        print(f"mbsp.bench: Mt-KaHyPar skipped: the Python module mtkahypar is not importable ({e}); "
              "pip install mtkahypar", file=sys.stderr)
        return []
    mtk = mtkahypar.initialize(threads, False)
    mtkahypar.set_seed(seed)
    presets = [("QUALITY", mtkahypar.PresetType.QUALITY), ("DEFAULT", mtkahypar.PresetType.DEFAULT)]
    rows: List[Dict[str, Any]] = []
    for f in files:
        name = f.name.split(".")[0]
        A = mbsp.read_mtx(f)
        r_, c_ = np.asarray(A.row), np.asarray(A.col)
        m, n = A.shape
        nnz = len(r_)
        nets = fine_grain_nets(r_, c_, m, n)
        for p in ps:
            progress(f"mtkahypar {name} p = {p}: mbsp.partition ...")
            ours = mbsp.partition(str(f), p, eps=eps, seed=seed, threads=threads)
            progress(f"mtkahypar {name} p = {p}: mbsp.partition(quality=True) ...")
            ours_q = mbsp.partition(str(f), p, eps=eps, seed=seed, threads=threads, quality=True)
            row: Dict[str, Any] = {
                "table": "mtkahypar", "case": name, "nnz": nnz, "p": p, "eps": eps,
                "volume": ours.volume, "seconds": ours.seconds,
                "q_volume": ours_q.volume, "q_seconds": ours_q.seconds,
                "met": all(volume_of(r_, c_, np.asarray(o.parts), m, n) == o.volume for o in (ours, ours_q)),
            }
            for label, preset in presets:
                progress(f"mtkahypar {name} p = {p}: Mt-KaHyPar {label} ...")
                ctx = mtk.context_from_preset(preset)
                ctx.set_partitioning_parameters(p, eps, mtkahypar.Objective.KM1)
                ctx.logging = False
                hg = mtk.create_hypergraph(ctx, nnz, len(nets), nets)
                t = time.perf_counter()
                ph = hg.partition(ctx)
                secs = time.perf_counter() - t
                parts = np.fromiter((ph.block_id(v) for v in range(nnz)), dtype=np.int64, count=nnz)
                vol = volume_of(r_, c_, parts, m, n)
                sizes = np.bincount(parts, minlength=p)
                key = label.lower()
                row[f"{key}_volume"] = vol
                row[f"{key}_reported_km1"] = int(ph.km1())
                row[f"{key}_seconds"] = secs
                row[f"{key}_imbalance"] = float(sizes.max() / (nnz / p) - 1)
                row[f"{key}_ratio"] = ours.volume / vol if vol else float("nan")
                row[f"{key}_time_ratio"] = ours.seconds / secs
                row[f"{key}_q_ratio"] = ours_q.volume / vol if vol else float("nan")
                row[f"{key}_q_time_ratio"] = ours_q.seconds / secs
                row["met"] = row["met"] and vol == int(ph.km1())
                progress(f"mtkahypar {name} p = {p}: mbsp {ours.volume} in {ours.seconds:.2f} s, "
                         f"quality {ours_q.volume} in {ours_q.seconds:.2f} s, {label} {vol} in {secs:.2f} s")
            rows.append(row)
    return rows


def print_mtkahypar(rows: List[Dict[str, Any]]) -> None:
    sel = [r for r in rows if r["table"] == "mtkahypar"]
    if not sel:
        return
    print(f"\nPartitioner against Mt-KaHyPar (fine-grain hypergraph, km1 = SpMV volume, eps = {sel[0]['eps']}, "
          "2 threads); mbsp = default, mbsp-q = quality=True; ratio = mbsp's / Mt-KaHyPar's")
    print(f"  {'case':<16}{'p':>3}{'mbsp':>8}{'s':>7}{'mbsp-q':>8}{'s':>7}{'QUALITY':>9}{'s':>7}"
          f"{'q vol x':>8}{'q time x':>9}{'DEFAULT':>9}{'s':>7}{'vol x':>7}{'time x':>8}{'checked':>9}")
    for r in sel:
        print(f"  {r['case']:<16}{r['p']:>3}{r['volume']:>8}{r['seconds']:>7.2f}{r['q_volume']:>8}{r['q_seconds']:>7.2f}"
              f"{r['quality_volume']:>9}{r['quality_seconds']:>7.2f}{r['quality_q_ratio']:>8.3f}{r['quality_q_time_ratio']:>9.3f}"
              f"{r['default_volume']:>9}{r['default_seconds']:>7.2f}{r['default_ratio']:>7.3f}{r['default_time_ratio']:>8.3f}"
              f"{'yes' if r['met'] else 'NO':>9}")

    def gmean(xs: List[float]) -> float:
        return float(np.exp(np.mean(np.log(xs))))

    for ours, key, what in (("default", "default", ""), ("default", "quality", ""),
                            ("quality", "quality", " (issue 42's target: volume <= 1.03, time <= 0.5)")):
        q = "q_" if ours == "quality" else ""
        vol = [r[f"{key}_{q}ratio"] for r in sel]
        t = [r[f"{key}_{q}time_ratio"] for r in sel]
        print(f"mbsp {ours} / Mt-KaHyPar {key.upper()} over {len(sel)} cases: volume geometric mean "
              f"{gmean(vol):.3f} (range {min(vol):.3f}-{max(vol):.3f}), time geometric mean {gmean(t):.3f}{what}")
    print("checked: each volume recomputed from its partition equals the one reported "
          "(mbsp's Partition.volume, Mt-KaHyPar's km1)")


def write_csv(path: str, rows: List[Dict[str, Any]]) -> None:
    keys: List[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".mbsp-bench-")
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def print_tables(rows: List[Dict[str, Any]], machine: str) -> None:
    print(f"mbsp.bench: {machine}; medians of rounds alternating the two sides, ratio = baseline / mbsp")
    for table, title in (("spmv", "SpMV y = A x (hp plan)"), ("fft", "FFT (complex128)")):
        sel = [r for r in rows if r["table"] == table]
        if not sel:
            continue
        p1 = table == "spmv"
        print(f"\n{title}")
        print(f"  {'case':<16}{'p':>3}{'baseline':>16}{'us':>11}{'mbsp us':>11}{'ratio':>8}{'interval':>13}"
              f"{'spread':>14}{'target':>9}" + (f"{'p=1 us':>11}{'/p=1':>7}" if p1 else ""))
        for r in sel:
            sp = f"{r['spread_baseline']:.0%}/{r['spread_mbsp']:.0%}"
            iv = f"{r['ratio_lo']:.2f}-{r['ratio_hi']:.2f}"
            print(f"  {r['case']:<16}{r['p']:>3}{r['baseline']:>16}{r['baseline_us']:>11.1f}{r['mbsp_us']:>11.1f}"
                  f"{r['ratio']:>7.2f}x{iv:>13}{sp:>14}{r['verdict']:>9}"
                  + (f"{r['mbsp_p1_us']:>11.1f}{r['speedup_p1']:>6.2f}x" if p1 else ""))
    sel = [r for r in rows if r["table"] == "partition"]
    if sel:
        print("\nPartitioner: mbsp.partition(path) against `mbsp partition --json`, same seed")
        print(f"  {'case':<16}{'p':>3}{'volume':>9}{'command':>9}{'max_h':>7}{'command':>9}{'s':>7}{'equal':>7}")
        for r in sel:
            print(f"  {r['case']:<16}{r['p']:>3}{r['volume']:>9}{r['command_volume']:>9}{r['max_h']:>7}"
                  f"{r['command_max_h']:>9}{r['seconds']:>7.2f}{'yes' if r['met'] else 'NO':>7}")
    print()
    for table, what in (("spmv", f"plan @ x at p = 2 >= {SPMV_TARGET}x scipy on matrices > {SPMV_MIN_NNZ} nnz"),
                        ("fft", f"fft at p = 2 >= {FFT_TARGET}x numpy.fft for n >= 2^18"),
                        ("partition", "partition volume equal to `mbsp partition`")):
        sel = [r for r in rows if r["table"] == table]
        if sel:
            # (The partitioner's rows are exact, met or not; the timed ones may be unclear.)
            words = [r.get("verdict") or ("met" if r["met"] else "MISSED") for r in sel]
            met, missed, unclear = (words.count(w) for w in ("met", "MISSED", "unclear"))
            word = "met" if met == len(sel) else "MISSED" if missed else "unclear"
            print(f"target [{word}] {what}: met on {met} of {len(sel)}"
                  + (f", unclear on {unclear}" if unclear else ""))
    sel = [r for r in rows if r["table"] == "spmv" and r["p"] > 1]
    if sel:
        up = sorted(r["speedup_p1"] for r in sel)
        print(f"mbsp's multiply at p = {sel[0]['p']} over p = 1 (/p=1): median {float(np.median(up)):.2f}x, "
              f"{up[0]:.2f}-{up[-1]:.2f}x (near p on matrices that fit in the caches when the machine gives "
              "the run p cores; less when a VM's vCPUs share a core: docs/benchmarks.md)")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mbsp.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="Matrix Market files (default: the shared matrices)")
    ap.add_argument("--quick", action="store_true", help="a smoke run of seconds; numbers not meaningful")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    ap.add_argument("--csv", metavar="FILE", help="also write the rows as CSV to FILE")
    ap.add_argument("--procs", type=int, default=2, help="processes of the SpMV and FFT (default 2)")
    ap.add_argument("--rounds", type=int, default=15, help="rounds per comparison (default 15)")
    ap.add_argument("--no-partition", action="store_true", help="skip the partitioner comparison")
    ap.add_argument("--mtkahypar", action="store_true",
                    help="only the partitioner against Mt-KaHyPar (QUALITY, DEFAULT; 2 threads) at p = 4 and 64 "
                         "(needs the mtkahypar package; the shared matrices but G3_circuit unless files are given)")
    try:
        a = ap.parse_intermixed_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if a.procs < 1 or a.rounds < 1:
        print("mbsp.bench: --procs and --rounds must be at least 1", file=sys.stderr)
        return 2
    if a.csv:
        d = os.path.dirname(os.path.abspath(a.csv))
        if not os.access(d, os.W_OK):
            print(f"mbsp.bench: cannot write {a.csv}: {d} is not writable", file=sys.stderr)
            return 2
    if a.files:
        files = [pathlib.Path(f) for f in a.files]
    else:
        files = sorted(p for p in data_dir().iterdir() if p.name.endswith((".mtx", ".mtx.gz")))
    rounds, budget, logs = a.rounds, 0.02, [18, 20, 22]
    part_files, ps = files, [2, 4]
    if a.quick:
        rounds, budget, logs = 3, 0.002, [12, 18]
        files = [f for f in files if f.name.startswith(("bcsstk16", "wing"))] or files[:1]
        part_files, ps = [f for f in files if f.name.startswith("bcsstk16")] or files[:1], [2]
    else:
        part_files = [f for f in files if not f.name.startswith("G3_circuit")]
    machine = repr(mbsp.Machine.detect())
    global _WATCH
    _WATCH = _native.machine_watch()
    if a.mtkahypar:
        mfiles = files if a.files else [f for f in files if not f.name.startswith("G3_circuit")]
        mrows = bench_mtkahypar(mfiles, [2, 4] if a.quick else [4, 64], seed=1, eps=0.03)
        if a.csv and mrows:
            write_csv(a.csv, mrows)
        _WATCH.mark()
        state = _WATCH.state()
        if a.json:
            print(json.dumps({"machine": machine, "rows": mrows, "machine_state": state}, indent=1))
        elif mrows:
            print(f"mbsp.bench: {machine}")
            print_mtkahypar(mrows)
            print(state["line"])
        return 0
    rows = bench_spmv(files, a.procs, rounds, budget) + bench_fft(logs, a.procs, rounds, budget * 5)
    if not a.no_partition:
        rows += bench_partition(part_files, ps, seed=1)
    _WATCH.mark()
    state = _WATCH.state()
    if a.csv:
        write_csv(a.csv, rows)
    if a.json:
        print(json.dumps({"machine": machine, "rows": rows, "machine_state": state}, indent=1))
    else:
        print_tables(rows, machine)
        print(state["line"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
