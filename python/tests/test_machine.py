"""The machine model: trees detected and loaded, placements, BSP parameters."""

import json
import os
import subprocess
import sys

import pytest

import mbsp


def test_detected_machine_has_the_cores_of_a_run():
    m = mbsp.Machine.detect()
    assert len(m.cores) == mbsp.nprocs()
    assert "packages" in repr(m)
    d = m.to_dict()
    assert set(d) >= {"source", "packages", "numas", "cores"}
    json.dumps(d)  # plain data


def test_synthetic_machine_and_placements():
    m = mbsp.Machine.synthetic("package:2 numa:2 core:4 pu:2")
    assert (len(m.packages), len(m.numas), len(m.cores)) == (2, 4, 16)
    # Scattered: the two top-level processes go to different packages, their children to
    # different NUMA nodes of their package.
    s = m.placement([2, 2], "scattered")
    assert [p.package for p in s.processes] == [0, 1]
    assert [c.numa for c in s.processes[0].children] == [0, 1]
    # Compact: the first four leaves fill one NUMA node (4 cores) of package 0.
    c = m.placement([4], "compact")
    assert all(p.numa == 0 and p.package == 0 for p in c.processes)
    leaves = m.placement(["package", "core"], "scattered").leaves()
    assert len(leaves) == 16
    assert sorted(core for lf in leaves for core in lf.cores) == list(range(16))
    assert "pid 1/0" in repr(m.placement([2, 2]))
    assert m.placements([2]).keys() == {"scattered", "compact"}
    json.dumps(s.to_dict())


def test_placements_on_real_multi_socket_trees(topologies):
    for f in sorted(topologies.glob("*.xml")):
        m = mbsp.Machine.from_xml(str(f))
        n = len(m.cores)
        top = len(m.packages)
        pl = m.placement(["package", "core"], "compact")
        leaves = pl.leaves()
        assert len(leaves) == n, f.name
        # Each package's processes run on that package's cores only.
        for proc in pl.processes:
            pkg_cores = set(m.packages[proc.pid]["cores"])
            assert all(set(c.cores) <= pkg_cores for c in proc.children), f.name
        assert len(pl.processes) == top


def test_trees_and_placements_are_those_the_command_prints(topologies, mbsp_command):
    # The same plain data as `mbsp topo --json`, keys in the same order, on real trees and a
    # synthetic one without a NUMA level.
    cases = [["--xml", str(f)] for f in sorted(topologies.glob("*.xml"))[:3]]
    cases.append(["--synthetic", "package:2 core:2 pu:2"])
    for source in cases:
        out = subprocess.run(
            [mbsp_command, "topo", *source, "-p", "package", "--nest", "2", "--json"],
            capture_output=True, text=True, check=True,
        )
        want = json.loads(out.stdout)
        m = (mbsp.Machine.from_xml(source[1]) if source[0] == "--xml"
             else mbsp.Machine.synthetic(source[1]))
        tree = m.to_dict()
        assert tree == want["machine"] and list(tree) == list(want["machine"]), source
        # What the compiled half hands the Python half (`Placement` keeps it as `Process`es).
        native = mbsp._native.placement(["package", "2"], "scattered",
                                        **{source[0][2:]: source[1]})
        assert json.dumps(native) == json.dumps(want["processes"]), source
        placed = m.placement(["package", 2])
        assert [p.pus for p in placed.leaves()] == [
            c["pus"] for p in want["processes"] for c in p["children"]
        ], source


def test_stacked_runs_are_marked_as_the_command_marks_them(mbsp_command):
    # Compact nesting: a process owns one core, and the run nested in it stacks there.
    spec = "package:2 core:4 pu:1"
    m = mbsp.Machine.synthetic(spec)
    pl = m.placement([1, 2], "compact")
    assert [c.per_core for c in pl.processes[0].children] == [2, 2]
    assert pl.processes[0].per_core == 1
    assert pl.stacked() == [{"cores": [0], "most": 2, "parent": [0], "processes": 2}]
    assert "(stacked: 2 processes on its core)" in repr(pl)
    # Scattered: the process owns the machine, its nested run a core each.
    scattered = m.placement([1, 2], "scattered")
    assert scattered.stacked() == []
    assert "stacked" not in repr(scattered)
    # The same data as `mbsp topo --json`, which says so too.
    out = subprocess.run(
        [mbsp_command, "topo", "--synthetic", spec, "-p", "1", "--nest", "2",
         "--policy", "compact", "--json"],
        capture_output=True, text=True, check=True,
    )
    want = json.loads(out.stdout)
    assert [p.to_dict() for p in pl.processes] == want["processes"]
    assert pl.stacked() == want["stacked"]
    native = mbsp._native.placement(["1", "2"], "compact", synthetic=spec)
    assert json.dumps(native) == json.dumps(want["processes"])


def test_manual_placement_and_its_errors():
    m = mbsp.Machine.synthetic("package:1 core:4 pu:1")
    pl = m.placement([2], "manual", cpus=[[0, 1], [2, 3]])
    assert [p.pus for p in pl.processes] == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="manual"):
        m.placement([2], "manual")
    with pytest.raises(ValueError, match="unknown policy"):
        m.placement([2], "diagonal")
    with pytest.raises(ValueError, match="at least 1"):
        m.placement([0])
    with pytest.raises(ValueError):
        m.placement(["socketz"])
    with pytest.raises(ValueError):
        m.placement([])
    # A plan lists every process: one larger than a run can have is refused at once.
    with pytest.raises(ValueError, match="more processes than a run can have"):
        m.placement([10**7])
    with pytest.raises(ValueError, match="1000 x 1000"):
        m.placement([1000, 1000])


def test_bad_trees_are_errors():
    with pytest.raises(OSError, match="no-such.xml"):
        mbsp.Machine.from_xml("/no-such.xml")
    with pytest.raises(ValueError):
        mbsp.Machine.synthetic("nonsense:3")
    with pytest.raises(ValueError, match="not both"):
        mbsp.Machine(xml="a", synthetic="b")


def test_mbsp_topology_is_honoured():
    code = "import mbsp; m = mbsp.Machine.detect(); print(len(m.packages), len(m.cores))"
    env = dict(os.environ, MBSP_TOPOLOGY="synthetic:package:3 core:2 pu:1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "6"]


def test_params_in_force_and_measured():
    p = mbsp.Machine.params()
    assert p.r > 0 and p.g > 0 and p.l > 0 and p.l_reg > 0 and p.source
    assert "Mflop/s" in repr(p)
    measured = mbsp.Machine.detect().measure_params(levels=["machine"], quick=True)
    assert [lv.level for lv in measured.levels] == ["machine", "machine"]
    assert {lv.policy for lv in measured.levels} == {"scattered", "compact"}
    for lv in measured.levels:
        assert lv.p == mbsp.nprocs()
        assert lv.r > 0 and lv.l > 0 and lv.g > 0 and lv.to_dict()["l_reg"] > 0
        assert set(lv.to_dict()["fits"]) >= {"put", "get"}
    assert measured.to_dict()["levels"][0]["level"] == "machine"
    with pytest.raises(ValueError, match="unknown level"):
        mbsp.Machine.detect().measure_params(levels=["galaxy"], quick=True)
    with pytest.raises(ValueError, match="loaded, not detected"):
        mbsp.Machine.synthetic("core:2 pu:1").measure_params(quick=True)


def _form_differences(a, b, at="$"):
    """Where `a` and `b` differ in form: the keys of every dict (in order) and the kinds of
    the leaves. A list's items are compared where both lists have one: how many items a
    measured list holds (doubts about a fit, say) depends on the machine's noise, and so does
    whether an optional value is there at all (null: the machine state's worst round when every
    round was too short to judge, as in a --quick run)."""
    if a is None or b is None:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return [f"{at}: keys {list(a)} against {list(b)}"]
        return [d for k in a for d in _form_differences(a[k], b[k], f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        return [d for x, y in zip(a[:1], b[:1]) for d in _form_differences(x, y, f"{at}[0]")]
    number = (int, float)
    if isinstance(a, number) and isinstance(b, number):
        return []
    if type(a) is not type(b):
        return [f"{at}: {type(a).__name__} against {type(b).__name__}"]
    return []


def test_measured_params_have_the_form_of_the_command_file(tmp_path, mbsp_command):
    path = tmp_path / "params.json"
    subprocess.run(
        [mbsp_command, "params", "--quick", "--levels", "machine", "--json", str(path)],
        capture_output=True, text=True, check=True,
    )
    want = json.loads(path.read_text())
    got = mbsp.Machine.detect().measure_params(levels=["machine"], quick=True).to_dict()
    assert _form_differences(got, want) == []
    # The check sees a difference of form.
    assert _form_differences({"a": [1], "b": "x"}, {"b": "x", "a": [1]}) != []
    assert _form_differences({"a": ["x"]}, {"a": [2]}) != []
    assert _form_differences({"a": None}, {"a": {"b": 1}}) == []


def test_measured_params_saved_become_the_params_in_force(tmp_path):
    measured = mbsp.Machine.detect().measure_params(levels=["machine"], quick=True)
    path = tmp_path / "params.json"
    measured.save(str(path))
    code = "import mbsp; p = mbsp.Machine.params(); print(p.l, p.source)"
    env = dict(os.environ, MBSP_PARAMS=str(path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    l, source = out.stdout.split(" ", 1)
    assert float(l) == pytest.approx(measured.to_dict()["l"])
    assert str(path) in source
