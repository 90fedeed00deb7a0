"""The plan loop: clusters per profile, cells, per-SLO bisections over cached points, progress and ETA.

Cluster reuse: one local cluster per setting (a profile, or a profile with the sweep's client limits:
``<sweep.cluster_dir>-<profile>[-<limits>]``), reused across that setting's sizes, mixes and rates.  Why that does not bias a point: every point registers its own
nodes and removes them after (agents delete their nodes), submits into a namespace of its own (the
previous one is deleted), and is judged only on objects created after its warm-up, once the nodes
and the cluster's caches hold the point's size.  What could: etcd's history grows across points (the
apiserver compacts it every 5 minutes) and a deleted namespace's objects are still being garbage
collected during the next point's warm-up; profiles never share a cluster (their flags differ).  A
cluster the plan started is stopped when the plan ends, Ctrl-C included; one that was already running
is reused and left running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hollowscale.plan.bisect import Knee, bisect_knee, rate_key
from hollowscale.plan.grid import Cell, cells, cluster_dir, point_scenario
from hollowscale.plan.points import PointSettings, run_point
from hollowscale.plan.state import PlanState, point_key
from hollowscale.scenario import Scenario
from hollowscale.scenario.sweep import SweepSpec

Log = Callable[[str], None]


@dataclass
class PlanResult:
    cells: list[Cell]
    knees: dict[str, dict[str, Knee]] = field(default_factory=dict)  # cell key -> SLO -> knee
    order: list[str] = field(default_factory=list)  # point keys in the order this plan asked for them
    measured: int = 0
    reused: int = 0
    wall_s: float = 0.0
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)


class Planner:
    """Runs a plan (see the module docstring); ``measure`` is injectable for tests of the loop."""

    def __init__(self, doc: dict[str, Any], scenario: Scenario, state: PlanState, out: Path, log: Log,
                 measure: Callable[[Cell, float, int], dict[str, Any]] | None = None):
        assert scenario.sweep is not None
        self.doc = doc
        self.sc = scenario
        self.sweep: SweepSpec = scenario.sweep
        self.state = state
        self.out = out
        self.log = log
        names = self.sweep.slos or tuple(s.name for s in scenario.slos)
        self.slos = tuple(s for s in scenario.slos if s.name in names)
        self.cells = cells(doc, self.sweep)
        self.measure = measure or self._measure_real
        self.t0 = time.monotonic()
        self.point_walls: list[float] = [float(p.get("wall_s") or 0) for p in state.points.values()]
        self.info: Any = None
        self.before = set(state.points)  # points an earlier (interrupted) run of this plan measured
        self.announced: set[str] = set()
        self.result = PlanResult(self.cells)

    # ------------------------------------------------------------------------------ progress
    def expected_points(self) -> int:
        """About how many points the plan measures: per cell, one per bisection step (a bound check or
        SLOs that disagree add a few; the count shown grows when they do)."""
        return len(self.cells) * self.sweep.rate.steps()

    def eta_s(self) -> float | None:
        walls = [w for w in self.point_walls if w > 0]
        if not walls:
            return None
        left = max(0, self.expected_points() - len(self.state.points))
        return left * sum(walls) / len(walls)

    def _progress(self, cell: Cell, rate: float, what: str) -> None:
        done, total = len(self.state.points), self.expected_points()
        eta = self.eta_s()
        eta_txt = f", ETA ~{eta / 60:.1f} min" if eta is not None else ""
        self.log(f"[{time.monotonic() - self.t0:6.0f}s] point {done + 1}/~{max(total, done + 1)} {what}: {cell.label()} "
                 f"@ {rate:g}/s{eta_txt}")

    # ------------------------------------------------------------------------------ points
    def _measure_real(self, cell: Cell, rate: float, index: int) -> dict[str, Any]:
        # the time keeps a point measured again after an interruption out of the interrupted attempt's
        # folder and namespace (which may still be terminating on a cluster that was left running)
        stamp = time.strftime("%H%M%S")
        sc = point_scenario(self.doc, self.sc.source, self.sweep, cell, rate, index, str(Path(self.sc.source).parent),
                            stamp)
        settings = PointSettings(self.sweep, self.slos, self.out / "points")
        run_id = f"p{index:03d}-{cell.nodes}n-{cell.mix}-{rate:g}-{stamp}"
        return run_point(sc, settings, self.info, rate, run_id)

    def point(self, cell: Cell, rate: float) -> dict[str, Any]:
        """The point (cell, rate): from the state when measured before, else measured now and recorded."""
        key = point_key(cell.key, rate)
        if key not in self.result.order:
            self.result.order.append(key)
        rec = self.state.get(key)
        if rec is not None:
            if key in self.before and key not in self.announced:  # measured by an earlier plan run
                self.announced.add(key)
                self.log(f"point {cell.key} @ {rate:g}/s: measured before ({'pass' if rec['passed_all'] else 'fail'}), "
                         "reused")
                self.result.reused += 1
            return rec
        self._progress(cell, rate, "measuring")
        rec = self.measure(cell, rate, len(self.state.points) + 1)
        rec.update(cell_key=cell.key, rate=rate)
        self.state.record(key, rec)
        self.point_walls.append(float(rec.get("wall_s") or 0))
        self.result.measured += 1
        verdicts = ", ".join(f"{k} {'ok' if v['passed'] else 'FAIL'} ({v['value']})" for k, v in rec["slos"].items())
        b = rec["figures"].get("backlog") or {}
        attr = rec.get("attribution") or {}
        self.log(f"  -> {verdicts}; backlog {'GROWING: ' + b.get('why', '') if b.get('growing') else 'steady'}; "
                 f"{attr.get('words', 'no limit attribution')}; {rec['wall_s']:.0f}s")
        return rec

    def run_cell(self, cell: Cell) -> dict[str, Knee]:
        knees = {}
        for slo in self.slos:
            def passes(rate: float, name: str = slo.name) -> bool:
                return bool(self.point(cell, rate_key(rate))["slos"][name]["passed"])

            knees[slo.name] = bisect_knee(self.sweep.rate, passes, slo=slo.name)
            k = knees[slo.name]
            self.log(f"knee {slo.name} on {cell.label()}: {k.knee if k.knee is not None else 'below ' + str(self.sweep.rate.lo)}"
                     f"/s ({k.verdict}; tried {', '.join(f'{r:g}{chr(10003) if p else chr(10007)}' for r, p in k.tried)})")
        return knees

    # ------------------------------------------------------------------------------ clusters
    def run(self, up: Callable[[str, str, dict[str, tuple[float, int]]], tuple[Any, Callable[[], None]]] | None = None) \
            -> PlanResult:
        """Every setting's cells on that setting's cluster (``up(profile, dir, client_limits) -> (info, stop)``)."""
        settings: list[str] = []
        for c in self.cells:
            if c.setting not in settings:
                settings.append(c.setting)
        for setting in settings:
            todo = [c for c in self.cells if c.setting == setting]
            stop: Callable[[], None] = lambda: None  # noqa: E731
            if up is not None and not self._all_measured(todo):
                self.info, stop = up(todo[0].profile, cluster_dir(self.sweep, setting), todo[0].limits_dict())
            try:
                for cell in todo:
                    self.result.knees[cell.key] = self.run_cell(cell)
            finally:
                stop()
        self.result.wall_s = round(time.monotonic() - self.t0, 1)
        return self.result

    def _all_measured(self, todo: list[Cell]) -> bool:
        """Whether replaying these cells' bisections needs no new point (a resumed, finished plan)."""
        missing = False

        def probe(cell: Cell, rate: float) -> dict[str, Any]:
            nonlocal missing
            rec = self.state.get(point_key(cell.key, rate))
            if rec is None:
                missing = True
                return {"slos": {s.name: {"passed": False} for s in self.slos}}
            return rec

        for cell in todo:
            for slo in self.slos:
                def passes(rate: float, name: str = slo.name, c: Cell = cell) -> bool:
                    return bool(probe(c, rate_key(rate))["slos"][name]["passed"])

                bisect_knee(self.sweep.rate, passes)
                if missing:
                    return False
        return True
