"""A trace scenario's replay behind one small interface, whatever its mode: what the runner needs of it.

:func:`plan_replay` is the one place a mode picks its driver: before anything starts it turns the
scenario (and a seed) into a :class:`ReplayPlan` (the paper's sequence, or the timed schedule); once the
cluster is ready, :meth:`ReplayPlan.start` gives a :class:`ReplayRun` on it, which the runner
(:mod:`hollowscale.replay.run`) drives the same way for every mode: ``run(stop)``, then
``figures(apiserver)``, ``write_pods_csv(path)``, ``errors`` and ``complete``.

- ``paper``: :class:`hollowscale.replay.driver.PaperReplay` (one pod at a time, each waiting for its
  verdict), figures :func:`hollowscale.replay.figures.replay_figures`;
- ``timed``: :class:`hollowscale.replay.timed.TimedReplay` (each pod created and deleted at its own time,
  compressed), figures :func:`hollowscale.replay.figures.timed_figures`.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hollowscale.replay.api import ReplayApi
from hollowscale.replay.driver import PaperReplay
from hollowscale.replay.figures import replay_figures, timed_figures
from hollowscale.replay.timed import Schedule, TimedReplay, timed_schedule
from hollowscale.scenario.trace import TraceScenario
from hollowscale.trace import inspect_trace
from hollowscale.trace.frag import ClusterState
from hollowscale.trace.paper import PaperSequence, SequencedPod, paper_sequence


@dataclass(frozen=True)
class ReplayTarget:
    """The ready cluster a replay runs against.

    Attributes:
        api: where the pods and claims go (the run's namespace, label, GPU mode and scheduler).
        state: the harness's account of the cluster (its nodes are the cluster's; its capacities).
        log: where progress lines go.
    """

    api: ReplayApi
    state: ClusterState
    log: Callable[[str], None] = print


class ReplayRun(Protocol):
    """One replay on a ready cluster, as the runner drives it."""

    @property
    def errors(self) -> list[str]:
        """What went wrong on the way (calls refused, the watch's errors, an interruption)."""
        ...

    @property
    def complete(self) -> bool:
        """Every pod of the plan was replayed (not stopped early)."""
        ...

    @property
    def seconds(self) -> float:
        """How long the replay took (the runner divides CPU time by it)."""
        ...

    def run(self, stop: Callable[[], bool]) -> None:
        """Replay every pod of the plan; ``stop()`` ends it early."""
        ...

    def figures(self, apiserver: dict[str, int]) -> dict[str, Any]:
        """What the replay measured (``summary.json``'s ``replay``), given what the API server's objects
        say was allocated at the end (:func:`hollowscale.replay.driver.apiserver_allocation`)."""
        ...

    def write_pods_csv(self, path: Path) -> None:
        """One line per pod: what happened to it."""
        ...


class ReplayPlan(Protocol):
    """What a mode replays, decided before anything starts."""

    @property
    def key(self) -> str:
        """The ``summary.json`` key of :attr:`summary` (``sequence``, ``schedule``)."""
        ...

    @property
    def summary(self) -> dict[str, Any]:
        """What is replayed, in figures."""
        ...

    def start(self, target: ReplayTarget) -> ReplayRun:
        """The replay of this plan on ``target`` (not yet run)."""
        ...


# ----------------------------------------------------------------------------------------------- paper


@dataclass
class PaperRun:
    """The paper's protocol as a :class:`ReplayRun` (:class:`PaperReplay` over the plan's pods)."""

    replay: PaperReplay
    pods: list[SequencedPod]
    trace_kinds: dict[str, int] | None

    @property
    def errors(self) -> list[str]:
        return self.replay.errors

    @property
    def complete(self) -> bool:
        return len(self.replay.records) == len(self.pods)

    @property
    def seconds(self) -> float:
        return max(1e-9, (self.replay.ended_ms - self.replay.started_ms) / 1000)

    def run(self, stop: Callable[[], bool]) -> None:
        self.replay.run(self.pods, stop)

    def figures(self, apiserver: dict[str, int]) -> dict[str, Any]:
        r, s = self.replay, self.replay.state
        return replay_figures(r.records, r.checkpoints, s.gpu_capacity_milli, s.cpu_capacity_milli,
                              s.memory_capacity_mib, self.trace_kinds, apiserver, r.api.gpu_mode, r.started_ms,
                              r.ended_ms)

    def write_pods_csv(self, path: Path) -> None:
        with path.open("w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(["index", "pod", "trace_pod", "kind", "tuned", "gpu_milli_asked", "verdict", "node",
                        "devices", "reason", "latency_ms", "arrived_milli", "allocated_milli"])
            for r in self.replay.records:
                w.writerow([r.index, r.name, r.trace_name, r.kind, int(r.tuned), r.arrived_gpu_milli, r.verdict,
                            r.node, " ".join(f"gpu-{i}:{m}" for i, m in r.devices), r.reason,
                            round(r.verdict_ms - r.created_ms, 1), r.arrived_milli, r.allocated_milli])


@dataclass(frozen=True)
class PaperPlan:
    """The simulator's sequence for a seed (shuffled, tuned), limited as the scenario says."""

    sequence: PaperSequence
    pods: tuple[SequencedPod, ...]
    limit: int | None
    verdict_timeout_s: float
    trace_kinds: dict[str, int] | None

    key = "sequence"

    @property
    def summary(self) -> dict[str, Any]:
        seq = self.sequence
        return {"pods": len(self.pods), "trace_pods": seq.trace_pods, "added": seq.added, "removed": seq.removed,
                "demand_milli": seq.demand_milli, "target_milli": seq.target_milli,
                "capacity_milli": seq.capacity_milli, "limited_to": self.limit}

    def start(self, target: ReplayTarget) -> ReplayRun:
        log = target.log
        replay = PaperReplay(target.api, target.state, self.verdict_timeout_s,
                             progress=lambda done, n: log(f"    {done}/{n} pods") if done % 1000 == 0 or done == n
                             else None)
        return PaperRun(replay, list(self.pods), self.trace_kinds)


# ----------------------------------------------------------------------------------------------- timed


@dataclass
class TimedRun:
    """The time-faithful replay as a :class:`ReplayRun`."""

    replay: TimedReplay
    gpu_capacity_milli: int

    @property
    def errors(self) -> list[str]:
        return self.replay.errors

    @property
    def complete(self) -> bool:
        return not self.replay.stopped and len(self.replay.records) == len(self.replay.schedule.pods)

    @property
    def seconds(self) -> float:
        return max(1e-9, (self.replay.ended_ms - self.replay.started_ms) / 1000)

    def run(self, stop: Callable[[], bool]) -> None:
        self.replay.run(stop)

    def figures(self, apiserver: dict[str, int]) -> dict[str, Any]:
        r = self.replay
        return timed_figures(r.records, self.gpu_capacity_milli, apiserver, r.api.gpu_mode, r.started_ms, r.ended_ms,
                             r.schedule.summary(), stopped=r.stopped)

    def write_pods_csv(self, path: Path) -> None:
        def ms(v: float | None, since: float) -> str:
            return "" if v is None else str(round(v - since, 1))

        t0 = self.replay.started_ms
        with path.open("w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(["index", "pod", "trace_pod", "kind", "qos", "gpu_milli", "due_create_ms", "created_ms",
                        "bound_ms", "node", "pending_ms", "unschedulable_ms", "unschedulable_events", "reason",
                        "due_delete_ms", "deleted_ms", "cut", "create_error"])
            for r in self.replay.records:
                pend = "" if r.bound_ms is None or r.created_ms is None else round(r.bound_ms - r.created_ms, 1)
                w.writerow([r.index, r.name, r.trace_name, r.kind, r.qos, r.gpu_milli, ms(r.due_create_ms, t0),
                            ms(r.created_ms, t0), ms(r.bound_ms, t0), r.node, pend, ms(r.unschedulable_ms, t0),
                            r.unschedulable_events, r.reason, ms(r.due_delete_ms, t0), ms(r.deleted_ms, t0),
                            int(r.cut), r.create_error])


@dataclass(frozen=True)
class TimedPlan:
    """The trace's own pods at their own times, compressed (:func:`timed_schedule`)."""

    schedule: Schedule

    key = "schedule"

    @property
    def summary(self) -> dict[str, Any]:
        return self.schedule.summary()

    def start(self, target: ReplayTarget) -> ReplayRun:
        log = target.log
        replay = TimedReplay(target.api, self.schedule,
                             progress=lambda done, n: log(f"    {done}/{n} pods created"))
        return TimedRun(replay, target.state.gpu_capacity_milli)


# -------------------------------------------------------------------------------------------- the choice


def plan_replay(ts: TraceScenario, seed: int) -> ReplayPlan:
    """The replay ``ts`` asks for (its ``mode``) with ``seed`` (the paper's protocol's; a timed replay has
    none): the one place a mode picks its driver."""
    spec = ts.spec
    if spec.mode == "timed":
        w = spec.window
        if spec.compress is None:
            raise ValueError(f"{ts.source}: workload.trace.compress: is required with mode timed")
        return TimedPlan(timed_schedule(ts.trace.pods, spec.compress, w.start_s if w else None,
                                        w.end_s if w else None, spec.limit_pods))
    seq = paper_sequence(ts.trace, seed, spec.demand)
    pods = seq.pods[: spec.limit_pods] if spec.limit_pods else seq.pods
    kinds = {k: v["pods"] for k, v in inspect_trace(ts.trace)["pods"]["by_kind"].items()}
    return PaperPlan(seq, tuple(pods), spec.limit_pods, spec.verdict_timeout_s,
                     kinds if not seq.removed and not spec.limit_pods else None)


__all__ = ["PaperPlan", "PaperRun", "ReplayPlan", "ReplayRun", "ReplayTarget", "TimedPlan", "TimedRun",
           "plan_replay"]
