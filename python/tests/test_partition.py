"""The partitioner from Python: results as `mbsp partition` gives them, metrics computed from
scratch, Matrix Market and Mondriaan's files."""

import json
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import mbsp


def laplacian_1d(n):
    return sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), format="csr")


def volume_from_scratch(A, parts, p):
    """Sum over rows and columns of (distinct parts - 1), from the COO order of A."""
    coo = A.tocoo()
    vol = 0
    for idx in (coo.row, coo.col):
        pairs = np.unique(np.stack([idx, parts.astype(np.int64)]), axis=1)
        lines = np.bincount(pairs[0])
        vol += int(np.sum(lines[lines > 0] - 1))
    return vol


def test_a_path_partitions_as_the_mbsp_command_does(matrices, mbsp_command, tmp_path):
    path = matrices / "rajat01.mtx"
    for p, seed in [(2, 1), (4, 7)]:
        prefix = tmp_path / f"rajat01-{p}"
        out = subprocess.run(
            [mbsp_command, "partition", str(path), "-p", str(p), "--seed", str(seed),
             "--out", str(prefix), "--json"],
            capture_output=True, text=True,
        )
        assert out.returncode == 0, out.stderr
        cli = json.loads(out.stdout)
        r = mbsp.partition(str(path), p, seed=seed)
        assert r.volume == cli["volume"]
        assert r.max_h == cli["max_h"]
        assert r.imbalance == pytest.approx(cli["imbalance"], abs=1e-12)
        # The command's distributed matrix holds the nonzeros grouped by part, in read order
        # within a part: the same as a stable sort of ours by part.
        B, from_file = mbsp.read_mondriaan(prefix, p)
        A = mbsp.read_mtx(path)
        order = np.argsort(r.parts, kind="stable")
        assert np.array_equal(B.row, A.row[order]) and np.array_equal(B.col, A.col[order])
        assert np.array_equal(from_file.parts, r.parts[order])
        assert np.array_equal(from_file.x_owner, r.x_owner)
        assert np.array_equal(from_file.y_owner, r.y_owner)
        assert from_file.volume == r.volume
        # The same matrix read into scipy (read_mtx keeps the file's order) partitions alike.
        again = mbsp.partition(A, p, seed=seed)
        assert np.array_equal(again.parts, r.parts)


def test_quality_matches_the_command_and_is_never_worse(matrices, mbsp_command, tmp_path):
    path = matrices / "bcsstk16.mtx"
    out = subprocess.run(
        [mbsp_command, "partition", str(path), "-p", "4", "--quality",
         "--out", str(tmp_path / "q"), "--json"],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    assert cli["quality"] is True
    good = mbsp.partition(str(path), 4, quality=True)
    assert good.volume == cli["volume"]
    assert good.imbalance <= 0.03
    assert good.volume == volume_from_scratch(mbsp.read_mtx(path), good.parts, 4)
    # A 2D grid: max-flow refinement never ends above the default.
    n = 40
    grid = sp.kronsum(laplacian_1d(n), laplacian_1d(n), format="csr")
    assert mbsp.partition(grid, 4, quality=True).volume <= mbsp.partition(grid, 4).volume


def test_metrics_are_those_of_the_parts():
    A = sp.random(300, 200, density=0.03, random_state=3, format="csr")
    for p in (1, 2, 3, 5):
        r = mbsp.partition(A, p, eps=0.05, seed=11)
        assert len(r.parts) == A.nnz and r.parts.max() < p
        assert r.volume == volume_from_scratch(A, r.parts, p)
        sizes = r.part_sizes()
        assert sizes.sum() == A.nnz
        assert r.imbalance == pytest.approx(sizes.max() / (A.nnz / p) - 1)
        assert r.imbalance <= 0.05 + 1e-12
        assert len(r.x_owner) == 200 and len(r.y_owner) == 300
        assert "volume" in repr(r)
        json.dumps(r.to_dict())


def test_seeds_repeat_and_square_gives_equal_owners():
    A = laplacian_1d(400)
    a, b = mbsp.partition(A, 4, seed=5), mbsp.partition(A, 4, seed=5)
    assert np.array_equal(a.parts, b.parts)
    sq = mbsp.partition(A, 4, seed=5, square=True)
    assert np.array_equal(sq.x_owner, sq.y_owner)
    assert mbsp.partition(A, 2).volume == 2
    with pytest.raises(ValueError, match="not square"):
        mbsp.partition(sp.random(3, 4, density=0.5, format="csr"), 2, square=True)


def test_every_scipy_format_and_dtype():
    A = sp.random(50, 60, density=0.1, random_state=1, format="coo")
    base = mbsp.partition(A, 3, seed=2)
    for fmt in ("csr", "csc", "lil", "dok", "bsr"):
        r = mbsp.partition(A.asformat(fmt), 3, seed=2)
        assert r.volume == volume_from_scratch(A.asformat(fmt), r.parts, 3)
    ints = sp.csr_matrix(np.eye(8, dtype=np.int32))
    assert mbsp.partition(ints, 2).volume == 0
    arr = sp.csr_array(np.eye(8))
    assert mbsp.partition(arr, 2).volume == 0
    assert base.p == 3


def test_matrix_market_round_trip(tmp_path):
    A = sp.random(40, 30, density=0.1, random_state=4, format="coo")
    for name in ("a.mtx", "a.mtx.gz"):
        mbsp.write_mtx(tmp_path / name, A)
        B = mbsp.read_mtx(tmp_path / name)
        assert B.shape == A.shape
        # The writer may order the entries its own way: compare them sorted.
        key = lambda M: sorted(zip(M.row.tolist(), M.col.tolist(), M.data.tolist()))  # noqa: E731
        assert key(B) == key(A)


def test_mondriaan_round_trip(tmp_path):
    A = sp.random(60, 60, density=0.05, random_state=5, format="coo")
    r = mbsp.partition(A, 4, seed=3)
    files = mbsp.write_mondriaan(tmp_path / "m", A, r)
    assert [f.rsplit("-", 1)[1] for f in files] == ["P4", "u4", "v4"]
    B, back = mbsp.read_mondriaan(tmp_path / "m", 4)
    order = np.argsort(r.parts, kind="stable")
    assert np.array_equal(back.parts, r.parts[order])
    assert np.array_equal(B.data, A.data[order])
    assert back.volume == r.volume and back.max_h == r.max_h
    with pytest.raises(OSError):
        mbsp.read_mondriaan(tmp_path / "m", 3)


def test_partition_errors():
    A = laplacian_1d(10)
    with pytest.raises(ValueError, match="p = 0"):
        mbsp.partition(A, 0)
    with pytest.raises(ValueError, match="eps"):
        mbsp.partition(A, 2, eps=-1)
    with pytest.raises(ValueError, match="eps"):
        mbsp.partition(A, 2, eps=float("nan"))
    with pytest.raises(TypeError):
        mbsp.partition(np.eye(3), 2)
    with pytest.raises(TypeError):
        mbsp.partition(A, 2.5)
    with pytest.raises(ValueError, match="seed"):
        mbsp.partition(A, 2, seed=-1)
    with pytest.raises(ValueError, match="complex"):
        mbsp.partition(sp.csr_matrix(np.eye(3) * 1j), 2)
    with pytest.raises(OSError, match="no-such"):
        mbsp.partition("/no-such.mtx", 2)
    with pytest.raises(MemoryError, match="memory"):
        mbsp.partition(A, 10**15)
    # A Partition of another matrix.
    r = mbsp.partition(A, 2)
    with pytest.raises(ValueError, match="parts has"):
        mbsp.write_mondriaan("/tmp/never", laplacian_1d(11), r)
