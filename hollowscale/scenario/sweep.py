"""The ``sweep:`` section of a scenario: what ``hollowscale plan`` varies and how it searches.

A plan is a grid over cluster sizes x workload mixes x profiles (x client limits); on each cell the arrival rate is not
gridded but *searched*: per SLO a bisection between ``rate.lo`` and ``rate.hi`` (workload instances/s,
the unit of ``arrival.rate``) stops when the bracket is no wider than ``rate.resolution``.  Every point
is a short run at a constant rate: ``warmup_s`` of load whose objects are left out of the figures, then
``measure_s`` whose objects are the point's figures.

Example::

    sweep:
      sizes: [{gpu: 100}, {gpu: 300}]     # nodes per pool (pools not named keep their count)
      rate: {lo: 0.5, hi: 8, resolution: 1}
      warmup_s: 15s
      measure_s: 30s
      slos: [pod_startup_p99]             # names of the scenario's SLOs (default: all of them)
      profiles: [default, scale]          # one cluster per profile
      limits:                             # optional: client limits to vary, one cluster per profile x limits
        - {name: upstream}                # the profile's own
        - {name: cm-qps-60, controller_manager: {qps: 60, burst: 90}}

A plan that explains a knee by a client limit tests that explanation with ``limits``: the same cells
with the limit moved, so the knee is seen to move with it (or not).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StrictInt, StrictStr, model_validator

from kubecore.schema import DnsLabel, Seconds, Spec, number, problem, raise_problems


def _positive_seconds(value: float) -> float:
    if value <= 0:
        raise problem(f"expected a duration > 0s, got {value:g}s")
    return value


PositiveSeconds = Annotated[Seconds, AfterValidator(_positive_seconds)]


def _node_counts(value: dict[str, int]) -> dict[str, int]:
    if not value:
        raise problem("expected at least one pool name -> node count")
    for name, count in value.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise problem(f"expected a node count >= 1 for pool {name!r}, got {count!r}")
    return value


NodeCounts = Annotated[dict[StrictStr, StrictInt], AfterValidator(_node_counts)]


class RateSearch(Spec):
    """The bisection on arrival rate (workload instances/s).

    Attributes:
        lo: lowest rate considered; measured only when no midpoint passes (then a knee below ``lo``
            is reported as such, not as ``lo``).
        hi: highest rate considered; measured only when every midpoint passes (a knee at ``hi`` is
            then "at least hi").
        resolution: the bisection stops when ``hi - lo`` of the bracket is at most this; the knee's
            honest precision (a second plan finds it within one such step).
    """

    lo: number(0, lo_open=True)  # type: ignore[valid-type]
    hi: number(0, lo_open=True)  # type: ignore[valid-type]
    resolution: number(0, lo_open=True)  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _ordered(self) -> RateSearch:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if self.hi <= self.lo:
            problems.append((("hi",), f"expected hi > lo ({self.lo:g}), got {self.hi:g}"))
        elif self.resolution >= self.hi - self.lo:
            problems.append((("resolution",), f"expected a resolution < hi - lo ({self.hi - self.lo:g}): "
                             f"got {self.resolution:g}, which leaves nothing to search"))
        raise_problems("rate", problems)
        return self

    def steps(self) -> int:
        """Midpoints a bisection measures before the bracket is no wider than ``resolution``."""
        n, width = 0, self.hi - self.lo
        while width > self.resolution + 1e-9:
            width /= 2
            n += 1
        return n


class MixSpec(Spec):
    """A workload mix: the scenario's workloads with these shares (workloads not named get share 0)."""

    name: DnsLabel
    shares: dict[StrictStr, number(0)]  # type: ignore[valid-type]


class ClientLimitSpec(Spec):
    """One client's limit: requests/s (``qps``) and ``burst``."""

    qps: number(0, lo_open=True)  # type: ignore[valid-type]
    burst: number(1, integer=True)  # type: ignore[valid-type]


class LimitsSpec(Spec):
    """Client limits a sweep varies (components not named keep the profile's).

    Attributes:
        name: the setting's name in cell keys and reports (``<profile>+<name>``); a setting naming no
            component is the profile's own limits and keeps the plain profile name.
        controller_manager: kube-controller-manager's ``--kube-api-qps``/``--kube-api-burst`` (per
            controller: each controller has its own client).
        scheduler: kube-scheduler's ``clientConnection`` QPS and burst.
        kueue: Kueue's ``clientConnection`` QPS and burst.
    """

    name: DnsLabel
    controller_manager: ClientLimitSpec | None = None
    scheduler: ClientLimitSpec | None = None
    kueue: ClientLimitSpec | None = None

    def client_limits(self) -> dict[str, tuple[float, int]]:
        """component (``controller-manager``, ``scheduler``, ``kueue``) -> (qps, burst) of those set."""
        out = {}
        for comp, spec in (("controller-manager", self.controller_manager), ("scheduler", self.scheduler),
                           ("kueue", self.kueue)):
            if spec is not None:
                out[comp] = (float(spec.qps), int(spec.burst))
        return out


class BacklogSpec(Spec):
    """When a point has a growing backlog (it then fails every SLO).

    Attributes:
        max_growth_fraction: the least-squares slope of unfinished workload objects (created, not yet
            finished) over the measured window, divided by the arrival rate, must stay at or below this
            (0.1: at most a tenth of the arrivals pile up).
        min_completed_fraction: of the objects created in the measured window, at least this share
            must have finished by the end of the point's settle time.
    """

    max_growth_fraction: number(0, 1) = 0.1  # type: ignore[valid-type]
    min_completed_fraction: number(0, 1) = 0.95  # type: ignore[valid-type]


class SweepSpec(Spec):
    """The ``sweep:`` section (see the module docstring).

    Attributes:
        sizes: cluster sizes, each nodes per pool; pools a size does not name keep the file's count.
        mixes: workload mixes (default: the file's shares, named ``as-written``).
        profiles: control-plane profiles (default: the file's ``cluster.profile``); one fresh local
            cluster per profile, reused across that profile's sizes and rates.
        limits: client limits to vary within each profile (:class:`LimitsSpec`); default none: the
            profile's own.  One cluster per profile x limits.
        rate: the bisection on arrival rate.
        warmup_s: load at the point's rate before the measured window; its objects are not counted.
        measure_s: the measured window; the point's figures come from objects created in it.
        settle_s: after the load, how long a point waits for its objects to finish.
        slos: names of the scenario's SLOs to find a knee for (default: every SLO of the scenario).
        backlog: the "no growing backlog" test every passing point must also meet.
        cluster_dir: the local clusters' folder prefix (``<cluster_dir>-<profile>``); short, the
            containerd socket path of a real node must stay under 100 bytes.
    """

    sizes: tuple[NodeCounts, ...]
    mixes: tuple[MixSpec, ...] = ()
    profiles: tuple[StrictStr, ...] = ()
    limits: tuple[LimitsSpec, ...] = ()
    rate: RateSearch
    warmup_s: Seconds = 15.0
    measure_s: PositiveSeconds = 30.0
    settle_s: PositiveSeconds = 20.0
    slos: tuple[StrictStr, ...] = ()
    backlog: BacklogSpec = BacklogSpec()
    cluster_dir: StrictStr = "/tmp/hs-plan"

    @model_validator(mode="after")
    def _distinct(self) -> SweepSpec:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if not self.sizes:
            problems.append((("sizes",), "expected at least one size (nodes per pool)"))
        names = [m.name for m in self.mixes]
        for i, n in enumerate(names):
            if n in names[:i]:
                problems.append((("mixes", i, "name"), f"duplicate mix name {n!r}"))
        for i, p in enumerate(self.profiles):
            if p in self.profiles[:i]:
                problems.append((("profiles", i), f"duplicate profile {p!r}"))
        limit_names = [m.name for m in self.limits]
        for i, n in enumerate(limit_names):
            if n in limit_names[:i]:
                problems.append((("limits", i, "name"), f"duplicate limits name {n!r}"))
        raise_problems("sweep", problems)
        return self


def sweep_problems(sweep: SweepSpec, *, pools: dict[str, int], workloads: tuple[str, ...], slos: tuple[str, ...],
                   profiles: tuple[str, ...], backend: str) -> list[tuple[tuple[str | int, ...], str]]:
    """What the sweep names that the scenario does not have (pools, workloads, SLOs, profiles)."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    if backend != "local":
        out.append((("sweep",), f"a plan starts and reuses local clusters (cluster.backend: local), not {backend!r}"))
    for i, size in enumerate(sweep.sizes):
        for name in size:
            if name not in pools:
                out.append((("sweep", "sizes", i, name), f"expected a pool of the scenario ({', '.join(pools)}), "
                            f"got {name!r}"))
    for i, mix in enumerate(sweep.mixes):
        for name in mix.shares:
            if name not in workloads:
                out.append((("sweep", "mixes", i, "shares", name), "expected a workload of the scenario "
                            f"({', '.join(workloads)}), got {name!r}"))
        if not any(v > 0 for v in mix.shares.values()):
            out.append((("sweep", "mixes", i, "shares"), "expected at least one share > 0"))
    for i, p in enumerate(sweep.profiles):
        if p not in profiles:
            out.append((("sweep", "profiles", i), f"expected one of {', '.join(profiles)}, got {p!r}"))
    for i, s in enumerate(sweep.slos):
        if s not in slos:
            out.append((("sweep", "slos", i), f"expected an SLO of the scenario ({', '.join(slos)}), got {s!r}"))
    return out
