"""The sweep's cells (profile x client limits x mix x size) and the scenario each point runs.

A point's scenario is the plan's scenario file with: the cell's node counts, the cell's mix shares,
the cell's profile and cluster folder (one per profile and client limits: the plan starts that
cluster with the limits, :func:`hollowscale.cluster.profiles.with_client_limits`), a constant arrival at the point's rate for ``warmup_s +
measure_s``, a namespace of its own (the previous point's may still be terminating), Prometheus off
(the plan reads the control plane's own metrics at the window's ends instead) and no SLOs (the plan
judges the measured window, not the whole run).  It is validated like any scenario.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from hollowscale.scenario import Scenario, parse_scenario
from hollowscale.scenario.sweep import SweepSpec

AS_WRITTEN = "as-written"


@dataclass(frozen=True)
class Cell:
    """One cell of the grid: a profile (with client limits of its own, or the profile's), a workload mix
    and a size (nodes per pool)."""

    profile: str
    mix: str
    shares: tuple[tuple[str, float], ...]  # empty: the file's shares
    size: tuple[tuple[str, int], ...]  # every pool's node count
    limits: str = ""  # the sweep's limits name ("" or one that sets nothing: the profile's own)
    client_limits: tuple[tuple[str, float, int], ...] = ()  # (component, qps, burst) that differ

    @property
    def nodes(self) -> int:
        return sum(n for _, n in self.size)

    @property
    def setting(self) -> str:
        """The control plane's setting: ``<profile>``, or ``<profile>+<limits>`` with client limits of its own."""
        return f"{self.profile}+{self.limits}" if self.client_limits else self.profile

    @property
    def key(self) -> str:
        """``<setting>/<mix>/<pool>=<n>,...``: stable across plans, used in the state's point keys."""
        return f"{self.setting}/{self.mix}/" + ",".join(f"{p}={n}" for p, n in self.size)

    def limits_dict(self) -> dict[str, tuple[float, int]]:
        return {c: (q, b) for c, q, b in self.client_limits}

    def label(self) -> str:
        return f"{self.nodes} nodes ({', '.join(f'{p} {n}' for p, n in self.size)}), mix {self.mix}, profile {self.setting}"


def cells(doc: dict[str, Any], sweep: SweepSpec) -> list[Cell]:
    """Every cell, profiles outermost, then client limits (one cluster per profile x limits), then mixes,
    then sizes in the order given."""
    counts = {p["name"]: int(p.get("count", 1)) for p in doc["pools"]}
    profiles = sweep.profiles or (str((doc.get("cluster") or {}).get("profile", "default")),)
    mixes = [(m.name, tuple(sorted(m.shares.items()))) for m in sweep.mixes] or [(AS_WRITTEN, ())]
    limits = [(m.name, tuple((c, q, b) for c, (q, b) in m.client_limits().items())) for m in sweep.limits] or [("", ())]
    out = []
    for profile in profiles:
        for lname, client in limits:
            for mix, shares in mixes:
                for size in sweep.sizes:
                    full = dict(counts, **size)
                    out.append(Cell(profile, mix, shares, tuple((p, full[p]) for p in counts), lname, client))
    return out


def cluster_dir(sweep: SweepSpec, setting: str) -> str:
    """The local cluster of one setting (a profile, or ``<profile>+<limits>``), reused across its cells."""
    return f"{sweep.cluster_dir}-{setting.replace('+', '-')}"


def point_doc(doc: dict[str, Any], sweep: SweepSpec, cell: Cell, rate: float, index: int,
              stamp: str = "") -> dict[str, Any]:
    """The scenario document of one point (see the module docstring); ``stamp`` makes the namespace of a
    point measured again (after an interruption) differ from the interrupted attempt's."""
    d = copy.deepcopy(doc)
    d.pop("sweep", None)
    d["name"] = f"{doc['name']}-p{index:03d}"[:63].rstrip("-")
    cluster = dict(d.get("cluster") or {})
    base_ns = str(cluster.get("namespace", "hollowscale-load"))
    cluster.update(profile=cell.profile, dir=cluster_dir(sweep, cell.setting), backend="local",
                   namespace=f"{base_ns[:45]}-p{index:03d}" + (f"-{stamp}" if stamp else ""))
    d["cluster"] = cluster
    size = dict(cell.size)
    d["pools"] = [dict(p, count=size[p["name"]]) for p in d["pools"]]
    if cell.shares:
        shares = dict(cell.shares)
        d["workloads"] = [dict(w, share=shares[w["name"]]) for w in d["workloads"] if shares.get(w["name"], 0) > 0]
    arrival = dict(d["arrival"])
    for k in ("start_rate", "end_rate", "ramp_s", "steps", "spike_rate", "spike_at_s", "spike_duration_s",
              "max_instances"):
        arrival.pop(k, None)
    arrival.update(curve="constant", rate=rate, duration_s=sweep.warmup_s + sweep.measure_s)
    d["arrival"] = arrival
    meas = dict(d.get("measurements") or {})
    meas.update(prometheus=False, settle_timeout_s=sweep.settle_s)
    d["measurements"] = meas
    d["slos"] = []
    d["slo_defaults"] = False
    d.pop("timeout_s", None)
    d.pop("faults", None)
    d.pop("variants", None)
    return d


def point_scenario(doc: dict[str, Any], source: str, sweep: SweepSpec, cell: Cell, rate: float, index: int,
                   base_dir: str, stamp: str = "") -> Scenario:
    """The validated scenario of one point."""
    return parse_scenario(point_doc(doc, sweep, cell, rate, index, stamp), f"{source} (plan point {index}: "
                          f"{cell.key} @ {rate:g}/s)", base_dir)


def check_points(doc: dict[str, Any], source: str, sweep: SweepSpec, base_dir: str) -> None:
    """Validate every cell's point scenario before the plan starts, at both ends of the rate range and with
    the longest index and stamp a point can get (its namespace is the longest then), so that a problem only a
    point shows (a tenant's namespace cut too short) stops the plan at once, in one line, not hours in.

    Raises:
        ScenarioError: every problem of the first point that has any.
    """
    for cell in cells(doc, sweep):
        for rate in (sweep.rate.lo, sweep.rate.hi):
            point_scenario(doc, source, sweep, cell, rate, 999, base_dir, stamp="235959")
