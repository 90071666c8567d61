"""The machine model: the tree of packages, NUMA nodes, cores and PUs, placements of (nested)
plans under each policy, and the BSP parameters (r, g, l) of every level."""

from __future__ import annotations

import copy
import json
import operator
from dataclasses import dataclass, field, asdict
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _native

__all__ = ["Machine", "Placement", "Process", "BspParams", "LevelParams", "MeasuredParams"]


@dataclass(frozen=True)
class Process:
    """One process of a placement: where it runs, and the processes nested in it."""

    pid: int
    package: Union[int, List[int]]
    numa: Union[int, List[int], None]
    cores: List[int]
    pus: List[int]
    #: The most processes of its run (itself included) on one of its cores: 1 when its cores
    #: are its own, more when its run stacks processes on a core (see ``Placement.stacked``).
    per_core: int = 1
    children: List["Process"] = field(default_factory=list)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Process":
        return cls(
            pid=d["pid"],
            package=d["package"],
            numa=d["numa"],
            cores=list(d["cores"]),
            pus=list(d["pus"]),
            per_core=d.get("per_core", 1),
            children=[cls._from(c) for c in d.get("children", [])],
        )

    def to_dict(self) -> Dict[str, Any]:
        """The process as plain data (as ``mbsp topo --json`` prints it: ``per_core`` only
        where it is over 1, ``children`` only where there are some)."""
        d: Dict[str, Any] = {
            "pid": self.pid,
            "package": self.package,
            "numa": self.numa,
            "cores": list(self.cores),
            "pus": list(self.pus),
        }
        if self.per_core > 1:
            d["per_core"] = self.per_core
        if self.children:
            # Each child as its own to_dict (dataclasses.asdict would keep their empty lists).
            d["children"] = [c.to_dict() for c in self.children]
        return d


def _ranges(v: Union[int, List[int], None]) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    out, i = [], 0
    v = sorted(v)
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[j + 1] == v[j] + 1:
            j += 1
        out.append(str(v[i]) if i == j else f"{v[i]}-{v[j]}")
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True)
class Placement:
    """Where the processes of a (nested) plan run: ``Machine.placement`` makes it."""

    levels: List[str]
    policy: str
    processes: List[Process]

    def leaves(self) -> List[Process]:
        """The innermost processes, in order."""
        out: List[Process] = []

        def walk(ps: List[Process]) -> None:
            for p in ps:
                if p.children:
                    walk(p.children)
                else:
                    out.append(p)

        walk(self.processes)
        return out

    def stacked(self) -> List[Dict[str, Any]]:
        """The runs of the plan that put several of their processes on one core, outermost
        first, as ``mbsp topo --json``'s ``"stacked"``: ``parent`` (the pid path of the process
        the run is nested in; empty for the top level), ``processes``, ``cores`` (the cores
        they are on) and ``most`` (the most of them on one core). Compact nesting does this:
        a process owns one core, and a run nested in it shares that core."""
        out: List[Dict[str, Any]] = []

        def walk(run: List[Process], parent: List[int]) -> None:
            most = max((p.per_core for p in run), default=1)
            if most > 1:
                cores = sorted({c for p in run for c in p.cores})
                out.append(
                    {"cores": cores, "most": most, "parent": list(parent), "processes": len(run)}
                )
            for p in run:
                walk(p.children, parent + [p.pid])

        walk(self.processes, [])
        return out

    def to_dict(self) -> Dict[str, Any]:
        """The placement as plain data."""
        return {
            "levels": list(self.levels),
            "policy": self.policy,
            "processes": [p.to_dict() for p in self.processes],
        }

    def __repr__(self) -> str:
        lines = [f"Placement(levels={self.levels}, policy={self.policy!r})"]

        def walk(ps: List[Process], path: str, depth: int) -> None:
            for p in ps:
                name = f"{path}/{p.pid}" if path else str(p.pid)
                stacked = (
                    f" (stacked: {p.per_core} processes on its core)" if p.per_core > 1 else ""
                )
                lines.append(
                    f"{'  ' * (depth + 1)}pid {name}: package {_ranges(p.package)}, "
                    f"NUMA {_ranges(p.numa)}, cores {_ranges(p.cores)}, PUs {_ranges(p.pus)}"
                    f"{stacked}"
                )
                walk(p.children, name, depth + 1)

        walk(self.processes, "", 0)
        return "\n".join(lines)


@dataclass(frozen=True)
class BspParams:
    """BSP parameters in seconds (``r`` and ``r_stream`` in flop/s), and where they come from.

    ``r`` is a compute-bound rate, ``r_stream`` a memory-bound one (the STREAM triad); ``g`` is
    per word of bulk communication, ``g_msg`` per one-word message, ``g_get_msg`` per one-word
    get, ``g_direct`` per word of direct gets and ``g_direct_msg`` per one-word direct get;
    ``l_reg`` is a superstep that registers or deregisters memory; ``turn`` and
    ``turn_coroutine`` are what each process beyond the first on a hardware thread adds to a
    superstep, as threads and as coroutines, and ``turn_comm`` and ``turn_comm_coroutine``
    what it adds more where the superstep communicates."""

    r: float
    g: float
    g_direct: float
    l: float
    fresh: float
    r_stream: float = 0.0
    g_msg: float = 0.0
    g_direct_msg: float = 0.0
    g_get_msg: float = 0.0
    l_reg: float = 0.0
    turn: float = 0.0
    turn_coroutine: float = 0.0
    turn_comm: float = 0.0
    turn_comm_coroutine: float = 0.0
    source: str = ""

    def to_dict(self) -> Dict[str, Any]:
        """The parameters as plain data."""
        return asdict(self)

    def __repr__(self) -> str:
        return (
            f"BspParams(r={self.r / 1e6:.0f} Mflop/s, g={self.g * 1e9:.2f} ns/word, "
            f"g_direct={self.g_direct * 1e9:.2f} ns/word, l={self.l * 1e6:.2f} us, "
            f"source={self.source!r})"
        )


@dataclass(frozen=True)
class LevelParams:
    """The measured parameters of one level of the tree under one policy."""

    level: str
    policy: str
    p: int
    r: float
    g: float
    g_direct: float
    l: float
    raw: Dict[str, Any] = field(repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """Everything measured for the level (the fits and their points too)."""
        return dict(self.raw)

    def __repr__(self) -> str:
        return (
            f"LevelParams({self.level}, {self.policy}, p={self.p}: r={self.r / 1e6:.0f} "
            f"Mflop/s, g={self.g * 1e9:.2f} ns/word, l={self.l * 1e6:.2f} us)"
        )


@dataclass(frozen=True)
class MeasuredParams:
    """The BSP parameters of every measured level (``Machine.measure_params``)."""

    machine: str
    levels: List[LevelParams]
    raw: Dict[str, Any] = field(repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """The whole parameter file, as ``mbsp params --json`` writes it."""
        return dict(self.raw)

    def save(self, path: str) -> None:
        """Writes the parameter file (then ``MBSP_PARAMS=path`` makes it the one in force)."""
        import os
        import tempfile

        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".mbsp-params-")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self.raw, f, indent=2)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise

    def __repr__(self) -> str:
        body = "".join(f"\n  {lv!r}" for lv in self.levels)
        return f"MeasuredParams({self.machine!r}){body}"


class Machine:
    """A machine tree: detected (``MBSP_TOPOLOGY`` honoured), or loaded from an hwloc XML file
    or an hwloc synthetic description.

    >>> m = Machine.synthetic("package:2 numa:2 core:4 pu:2")
    >>> len(m.packages), len(m.numas), len(m.cores)
    (2, 4, 16)
    >>> m.placement([2, 2], "scattered").leaves()[1].package
    0
    """

    def __init__(self, *, xml: Optional[str] = None, synthetic: Optional[str] = None) -> None:
        self._xml, self._synthetic = xml, synthetic
        self._tree: Dict[str, Any] = _native.machine_tree(xml=xml, synthetic=synthetic)

    @classmethod
    def detect(cls) -> "Machine":
        """This machine (or what ``MBSP_TOPOLOGY`` says)."""
        return cls()

    @classmethod
    def from_xml(cls, path: str) -> "Machine":
        """The machine of an hwloc XML file (``lstopo --of xml``)."""
        return cls(xml=str(path))

    @classmethod
    def synthetic(cls, description: str) -> "Machine":
        """A machine of an hwloc synthetic description, e.g. ``"package:2 core:8 pu:2"``."""
        return cls(synthetic=description)

    @property
    def source(self) -> str:
        """Where the tree came from."""
        return self._tree["source"]

    @property
    def has_numa_level(self) -> bool:
        """Whether the tree has NUMA nodes between packages and cores."""
        return bool(self._tree["numa_level"])

    @property
    def packages(self) -> List[Dict[str, Any]]:
        """Per package: its OS index, NUMA nodes and cores."""
        return self._tree["packages"]

    @property
    def numas(self) -> List[Dict[str, Any]]:
        """Per NUMA node: its OS index, memory (bytes) and cores."""
        return self._tree["numas"]

    @property
    def cores(self) -> List[Dict[str, Any]]:
        """Per core: its package, NUMA node and PUs (OS indices)."""
        return self._tree["cores"]

    def placement(
        self,
        levels: Sequence[Union[int, str]],
        policy: str = "scattered",
        cpus: Optional[Sequence[Sequence[int]]] = None,
    ) -> Placement:
        """Where the processes of a plan go: ``levels`` outermost first, each a process count
        or a level name (``"package"``, ``"numa"``, ``"core"``, ``"pu"``) for one process per
        object; ``policy`` ``"scattered"``, ``"compact"`` or ``"manual"`` (with ``cpus``: the
        PU OS indices of each top-level process)."""
        names = [str(v) for v in levels]
        try:
            sets = None if cpus is None else [[operator.index(c) for c in s] for s in cpus]
        except TypeError as e:
            raise TypeError(f"placement: cpus must be lists of integers (PU OS indices): {e}") from None
        procs = _native.placement(
            names, str(policy), cpus=sets, xml=self._xml, synthetic=self._synthetic
        )
        return Placement(names, str(policy), [Process._from(p) for p in procs])

    def placements(self, levels: Sequence[Union[int, str]]) -> Dict[str, Placement]:
        """The placement of ``levels`` under each automatic policy."""
        return {pol: self.placement(levels, pol) for pol in ("scattered", "compact")}

    @staticmethod
    def params() -> BspParams:
        """The BSP parameters in force: ``MBSP_PARAMS``, this machine's saved ones
        (``mbsp params --save``), or the defaults (``source`` says which)."""
        values, source = _native.params_in_force()
        return BspParams(source=source, **values)

    def measure_params(
        self, levels: Optional[Sequence[str]] = None, quick: bool = False
    ) -> MeasuredParams:
        """Measures r, g and l of every level of this machine (``"machine"``,
        ``"packages"``, ``"package"``, ``"numa"``, ``"core"``; or those of ``levels``) under
        the scattered and compact policies, as ``mbsp params`` does: about 10 s per level, a
        second with ``quick`` (whose numbers mean nothing). Runs on the detected machine only.
        Progress goes to stderr; Ctrl-C interrupts."""
        if self._xml is not None or self._synthetic is not None:
            raise ValueError(
                "measure_params: this machine was loaded, not detected; "
                "parameters are measured on the machine the program runs on"
            )
        raw = _native.measure_params(None if levels is None else [str(v) for v in levels], quick)
        out = [
            LevelParams(
                level=lv["level"],
                policy=lv["policy"],
                p=lv["p"],
                r=lv["r"],
                g=lv["g"],
                g_direct=lv["g_direct"],
                l=lv["l"],
                raw=lv,
            )
            for lv in raw["levels"]
        ]
        return MeasuredParams(raw["machine"], out, raw)

    def to_dict(self) -> Dict[str, Any]:
        """The tree as plain data (as ``mbsp topo --json`` prints it)."""
        return copy.deepcopy(self._tree)

    def __repr__(self) -> str:
        pus = sum(len(c["pus"]) for c in self.cores)
        numa = f"{len(self.numas)} NUMA nodes, " if self.has_numa_level else ""
        return (
            f"Machine({len(self.packages)} packages, {numa}{len(self.cores)} cores, "
            f"{pus} PUs; {self.source})"
        )
