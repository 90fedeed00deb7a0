"""Which limit binds: the control plane's limits over one measured window, ranked.

Input: two snapshots of the components' own ``/metrics`` taken at the window's edges (read directly,
as :mod:`hollowscale.plan.scrape` does, or the same samples from the run's Prometheus,
:func:`snapshot_from_prometheus`), and the context (the machine's cores, each client's configured QPS).
Output (:func:`attribute`): every limit the metrics speak to, each with a **pressure** (its figure over
its threshold: 1.0 = at the limit) and the figures that show it, ranked.

The limits, their figure and their threshold (metric names as the pinned sources define them: Kubernetes
v1.36.3, Kueue v0.17.0; see ``docs/architecture.md``, "Reference numbers"):

*resource* tier, something the component cannot get more of:

- ``cpu:<component>``: cores used (increase of ``process_cpu_seconds_total`` / window) >= 0.9 core.  On
  this 2-core machine the control plane, the hollow agents, Locust and other people's work share two
  cores: a component at (or near) a full core is saturated.  A component held to a CPU limit of its own
  (a cgroup quota, as a kubelet gives a container with ``resources.limits.cpu``; ``Context.cpu_limits``)
  is saturated at 90% of that limit instead: what it can get is the limit, not a core.
- ``cpu:host``: busy cores of the machine (``/proc/stat``, everything on it) >= 90% of its cores.
- ``client:controller-manager``, ``client:scheduler``: mean wait of a request in the client's token
  bucket (``rest_client_rate_limiter_duration_seconds`` sum / count) >= one token interval (1 / QPS):
  requests queue for tokens, the limiter sets the pace.  The controller-manager's QPS is per controller
  (each has its own client); the metric has no controller label, so the Job controller's work queue
  (``workqueue_*{name="job"}``) is shown beside it.
- ``client:kueue`` (*inferred*): Kueue's endpoint has no rate-limiter metric (controller-runtime
  registers only ``rest_client_requests_total``), so its request rate >= 90% of its QPS marks it.
  When a ``rest_client_rate_limiter_duration_seconds`` is found there after all, it is used as above.
- ``apf``: the apiserver's priority and fairness: mean queue wait
  (``apiserver_flowcontrol_request_wait_duration_seconds``) >= 50 ms at a priority level, or any
  rejection (``apiserver_flowcontrol_rejected_requests_total``).  Absent with APF off (``scale``).
- ``etcd``: mean etcd request latency seen by the apiserver (``etcd_request_duration_seconds``) >= 100 ms.

*loop* tier, a component's own loop busy all the time:

- ``loop:scheduler``: the scheduling algorithm's share of the window
  (``scheduler_scheduling_algorithm_duration_seconds`` sum / window; the scheduling cycle is one
  goroutine, so this is a lower bound of its busy share) >= 0.9.
- ``loop:kueue``: Kueue's admission cycles' share of the window
  (``kueue_admission_attempt_duration_seconds`` sum / window; one scheduling loop) >= 0.9.
- ``loop:job-controller``: the Job controller's 5 workers (``ConcurrentJobSyncs``) busy
  (``workqueue_work_duration_seconds{name="job"}`` sum / (window x 5)) >= 0.9.

*backlog* tier, where the work piles up (what the tiers above cause, or a design limit when nothing
above binds):

- ``queue:<component>``: the worst work queue's mean wait (``workqueue_queue_duration_seconds``) >= 1 s.
- ``pending:scheduler``: pods in the scheduler's active + backoff queues (``scheduler_pending_pods``)
  grew by more than 10% of the pods arriving (``scheduler_queue_incoming_pods_total`` of new pods,
  ``event="UnschedulablePodAdd"``: the label of a new unscheduled pod's Add event).
- ``pending:kueue``: Kueue's active pending workloads (``kueue_pending_workloads``) grew by more than 10%
  of the workloads arriving (admitted + growth).

**The rule for "bound first".**  A point's limits are ranked: (1) binding ones (pressure >= 1) before the
others; (2) among the binding: resource tier, then loop tier, then backlog tier, since a cause comes
before what it causes (a throttled client keeps its workers busy and its queue long, not the other way
round); (3) within the resource tier, a component's own limits (its client's rate limiter, its CPU at a full
core) first, then the machine's CPU (the machine is the sum of its parts: a component at its own core is
named, not the machine), then APF and etcd (queueing and latency that a full machine or a full component
causes as well); (4) within a tier by pressure, highest first; (5) the non-binding ones after, by
pressure.  The point's **binding limit** is the first of its list when
that one binds.  At a knee (:func:`bound_first`) the cell's points are walked in rising rate up to and
including the first failing one: the binding limit of the first point that has one **bound first**
(shown with its figures at the knee and at the first failing rate).  When no point up to there has a
binding limit, the nearest limit at the first failing rate is named, and the report says that none
reached its threshold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubecore.promtext import families

Samples = list[tuple[dict[str, str], float]]
Families = dict[str, Samples]

#: thresholds (the figure at which a limit's pressure is 1.0)
CPU_CORE_SATURATED = 0.9
HOST_BUSY_FRACTION = 0.9
KUEUE_QPS_FRACTION = 0.9
APF_WAIT_S = 0.05
ETCD_MEAN_S = 0.1
LOOP_BUSY = 0.9
QUEUE_WAIT_S = 1.0
PENDING_GROWTH_FRACTION = 0.1
#: kube-controller-manager's Job controller workers (``ConcurrentJobSyncs``, k8s v1.36.3
#: pkg/controller/job/config/v1alpha1/defaults.go)
JOB_WORKERS = 5

RESOURCE, LOOP, BACKLOG = "resource", "loop", "backlog"
TIERS = (RESOURCE, LOOP, BACKLOG)

#: the sample names a snapshot keeps (what :func:`attribute` reads); the fixture files hold only these
KEEP = frozenset({
    "process_cpu_seconds_total", "process_resident_memory_bytes",
    "rest_client_rate_limiter_duration_seconds_bucket", "rest_client_rate_limiter_duration_seconds_sum",
    "rest_client_rate_limiter_duration_seconds_count", "rest_client_requests_total",
    "apiserver_flowcontrol_request_wait_duration_seconds_bucket",
    "apiserver_flowcontrol_request_wait_duration_seconds_sum",
    "apiserver_flowcontrol_request_wait_duration_seconds_count", "apiserver_flowcontrol_rejected_requests_total",
    "apiserver_flowcontrol_current_inqueue_requests", "apiserver_flowcontrol_current_executing_seats",
    "apiserver_flowcontrol_nominal_limit_seats", "apiserver_current_inflight_requests",
    "etcd_request_duration_seconds_sum", "etcd_request_duration_seconds_count",
    "etcd_disk_wal_fsync_duration_seconds_sum", "etcd_disk_wal_fsync_duration_seconds_count",
    "etcd_disk_backend_commit_duration_seconds_sum", "etcd_disk_backend_commit_duration_seconds_count",
    "workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds_sum",
    "workqueue_queue_duration_seconds_count", "workqueue_work_duration_seconds_sum",
    "workqueue_work_duration_seconds_count",
    "scheduler_pending_pods", "scheduler_schedule_attempts_total", "scheduler_queue_incoming_pods_total",
    "scheduler_scheduling_algorithm_duration_seconds_sum", "scheduler_scheduling_algorithm_duration_seconds_count",
    "scheduler_scheduling_attempt_duration_seconds_sum", "scheduler_scheduling_attempt_duration_seconds_count",
    "kueue_pending_workloads", "kueue_admission_attempts_total", "kueue_admitted_workloads_total",
    "kueue_admission_attempt_duration_seconds_sum", "kueue_admission_attempt_duration_seconds_count",
    "controller_runtime_max_concurrent_reconciles", "controller_runtime_active_workers",
    "host_cpu_seconds_total", "host_cores",
})
#: the cluster's components as snapshots name them (Prometheus job names of the run are the same)
COMPONENTS = ("apiserver", "etcd", "controller-manager", "scheduler", "kueue")
HOST = "host"
#: a component's name in reports
NAMES = {"apiserver": "kube-apiserver", "etcd": "etcd", "controller-manager": "kube-controller-manager",
         "scheduler": "kube-scheduler", "kueue": "Kueue", "host": "the machine"}


# ----------------------------------------------------------------------------------------- snapshots
def keep_text(text: str) -> str:
    """The lines of an exposition text that :func:`attribute` reads (comments dropped): what a snapshot
    file holds, small enough to keep beside a run and as a test fixture."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in KEEP:
            out.append(line)
    return "\n".join(out) + ("\n" if out else "")


def host_text(proc_stat: str, cores: int) -> str:
    """The machine's CPU as exposition text, from ``/proc/stat``'s aggregate ``cpu`` line (USER_HZ = 100):
    ``host_cpu_seconds_total{mode}`` (guest time is already inside user and nice) and ``host_cores``."""
    line = next((ln for ln in proc_stat.splitlines() if ln.startswith("cpu ")), "")
    modes = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    values = [float(v) / 100.0 for v in line.split()[1:1 + len(modes)]]
    rows = [f'host_cpu_seconds_total{{mode="{m}"}} {v:.2f}' for m, v in zip(modes, values, strict=False)]
    return "\n".join([*rows, f"host_cores {cores}"]) + "\n"


@dataclass
class Snapshot:
    """The samples of every component at one moment: ``t`` (epoch s), ``metrics``: component -> families."""

    t: float
    metrics: dict[str, Families] = field(default_factory=dict)

    @classmethod
    def from_texts(cls, t: float, texts: Mapping[str, str]) -> Snapshot:
        """From each component's exposition text (filtered through :func:`keep_text` first)."""
        return cls(t, {comp: families(keep_text(text)) for comp, text in texts.items()})


def read_window(folder: Path) -> tuple[Snapshot, Snapshot, Context] | None:
    """The two reads kept in ``folder`` (``start|end/<component>.prom`` and ``window.json``, as a plan point
    keeps them and the recorded test cases hold them) and their context; None when there are none."""
    meta_path = folder / "window.json"
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    snaps = [Snapshot.from_texts(meta[f"t_{edge}"], {p.stem: p.read_text() for p in sorted((folder / edge).glob("*.prom"))})
             for edge in ("start", "end")]
    ctx = Context(cores=int(meta["cores"]), client_qps={k: (float(v[0]), int(v[1])) for k, v in meta["client_qps"].items()},
                  cpu_limits={k: float(v) for k, v in (meta.get("cpu_limits") or {}).items()})
    return snaps[0], snaps[1], ctx


def prometheus_selector() -> str:
    """The ``__name__`` regex of every kept sample name (for :func:`snapshot_from_prometheus`)."""
    return "|".join(sorted(KEEP))


def snapshot_from_prometheus(instant: Callable[[str, float, str], list[dict[str, Any]]], at: float,
                             components: Iterable[str] = COMPONENTS) -> Snapshot:
    """The same samples from the run's Prometheus at ``at`` (each series' latest sample, as an instant
    query answers): ``instant`` is :meth:`hollowscale.measure.prom.PromQueries.instant`; the scrape job
    names the component.  Counters move between scrapes, so a window cut this way is off by up to one
    scrape interval at each edge."""
    jobs = "|".join(components)
    query = f'{{__name__=~"{prometheus_selector()}",job=~"{jobs}"}}'
    snap = Snapshot(at)
    for s in instant(query, at, "limit attribution: the components' samples at a window edge"):
        labels = dict(s.get("metric") or {})
        name, job = labels.pop("__name__", ""), labels.pop("job", "")
        labels.pop("instance", None)
        try:
            value = float(s["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        snap.metrics.setdefault(job, {}).setdefault(name, []).append((labels, value))
    return snap


# ----------------------------------------------------------------------------------------- reading
Match = Mapping[str, str | Callable[[str], bool]]


def _matches(labels: Mapping[str, str], match: Match | None) -> bool:
    for k, want in (match or {}).items():
        v = labels.get(k, "")
        if callable(want) and not want(v):
            return False
        if not callable(want) and v != want:
            return False
    return True


def _key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def gauge(snap: Snapshot, comp: str, name: str, match: Match | None = None) -> float | None:
    """Sum of a gauge's matching series (None when the component has no such sample)."""
    rows = (snap.metrics.get(comp) or {}).get(name)
    if rows is None:
        return None
    return sum(v for labels, v in rows if _matches(labels, match) and not math.isnan(v))


def increase(a: Snapshot, b: Snapshot, comp: str, name: str, match: Match | None = None) -> float | None:
    """How much a counter grew from ``a`` to ``b``, summed over its matching series (a series that went
    down restarted: its later value is the increase; a series new in ``b`` started at 0).  None when
    ``b`` has no such sample."""
    rows_b = (b.metrics.get(comp) or {}).get(name)
    if rows_b is None:
        return None
    before = {_key(labels): v for labels, v in (a.metrics.get(comp) or {}).get(name) or [] if _matches(labels, match)}
    total = 0.0
    for labels, v in rows_b:
        if not _matches(labels, match) or math.isnan(v):
            continue
        x = before.get(_key(labels), 0.0)
        total += v - x if v >= x else v
    return total


def by_label(a: Snapshot, b: Snapshot, comp: str, name: str, label: str,
             match: Match | None = None) -> dict[str, float]:
    """:func:`increase` per value of ``label``."""
    values = {labels.get(label, "") for labels, _ in (b.metrics.get(comp) or {}).get(name) or []
              if _matches(labels, match)}
    out = {}
    for v in sorted(values):
        inc = increase(a, b, comp, name, {**(match or {}), label: v})
        if inc is not None:
            out[v] = inc
    return out


def _mean(a: Snapshot, b: Snapshot, comp: str, base: str, match: Match | None = None) -> tuple[float | None, float]:
    """(mean of a histogram's observations in the window or None, their count) from its _sum and _count."""
    n = increase(a, b, comp, f"{base}_count", match)
    s = increase(a, b, comp, f"{base}_sum", match)
    if n is None or s is None or n <= 0:
        return None, n or 0.0
    return s / n, n


def _r(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(v, digits)


# ----------------------------------------------------------------------------------------- limits
@dataclass
class Context:
    """What the metrics do not say: the machine's ``cores``, each client's configured (QPS, burst)
    (``client_qps``: component -> (qps, burst); ``kube-`` prefixes are dropped) and the CPU limit of a
    component held to one (``cpu_limits``: component -> cores; a process's metrics do not show the cgroup
    quota it runs under)."""

    cores: int
    client_qps: dict[str, tuple[float, int]] = field(default_factory=dict)
    cpu_limits: dict[str, float] = field(default_factory=dict)

    def qps(self, comp: str) -> tuple[float, int] | None:
        for k, v in self.client_qps.items():
            if k.removeprefix("kube-") == comp:
                return float(v[0]), int(v[1])
        return None


@dataclass
class Limit:
    """One limit at one point: ``key`` (``cpu:apiserver``), ``tier``, ``pressure`` (figure / threshold;
    None when not measured), the ``threshold`` in words, its ``figures`` and a sentence (``words``)."""

    key: str
    component: str
    tier: str
    pressure: float | None
    threshold: str
    figures: dict[str, Any]
    words: str

    @property
    def binding(self) -> bool:
        return self.pressure is not None and self.pressure >= 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "component": self.component, "tier": self.tier,
                "pressure": _r(self.pressure, 4), "binding": self.binding, "threshold": self.threshold,
                "figures": self.figures, "words": self.words}


def _cpu_limits(a: Snapshot, b: Snapshot, w: float, ctx: Context) -> list[Limit]:
    out = []
    comps_cores = 0.0
    for comp in sorted(set(a.metrics) & set(b.metrics)):
        if comp == HOST:
            continue
        inc = increase(a, b, comp, "process_cpu_seconds_total")
        if inc is None or gauge(a, comp, "process_cpu_seconds_total") is None:
            continue
        cores = inc / w
        comps_cores += cores
        rss = max(gauge(a, comp, "process_resident_memory_bytes") or 0.0,
                  gauge(b, comp, "process_resident_memory_bytes") or 0.0) / 2**20
        cap = ctx.cpu_limits.get(comp)
        if cap:
            out.append(Limit(f"cpu:{comp}", comp, RESOURCE, cores / (CPU_CORE_SATURATED * cap),
                             f">= {CPU_CORE_SATURATED:.0%} of its {cap:g}-core limit",
                             {"cores": _r(cores), "cpu_limit_cores": cap, "rss_mib_max": _r(rss, 1)},
                             f"{NAMES.get(comp, comp)} used {cores:.3g} cores of its {cap:g}-core CPU limit"))
            continue
        out.append(Limit(f"cpu:{comp}", comp, RESOURCE, cores / CPU_CORE_SATURATED,
                         f">= {CPU_CORE_SATURATED:g} core", {"cores": _r(cores), "rss_mib_max": _r(rss, 1)},
                         f"{NAMES.get(comp, comp)} used {cores:.2f} cores"))
    total = increase(a, b, HOST, "host_cpu_seconds_total")
    idle = increase(a, b, HOST, "host_cpu_seconds_total", {"mode": lambda m: m in ("idle", "iowait")})
    if total is not None and idle is not None and total > 0:
        cores = int(gauge(b, HOST, "host_cores") or ctx.cores)
        busy = (total - idle) / total * cores
        others = max(0.0, busy - comps_cores)
        out.append(Limit("cpu:host", HOST, RESOURCE, busy / (HOST_BUSY_FRACTION * cores),
                         f">= {HOST_BUSY_FRACTION:.0%} of {cores} cores",
                         {"busy_cores": _r(busy), "cores": cores, "control_plane_cores": _r(comps_cores),
                          "other_cores": _r(others)},
                         f"the machine was {busy / cores:.0%} busy ({busy:.2f} of {cores} cores; control plane "
                         f"{comps_cores:.2f}, everything else (agents, Locust, other work) {others:.2f})"))
    return out


def _limiter_share_over(a: Snapshot, b: Snapshot, comp: str, le: str) -> float | None:
    n = increase(a, b, comp, "rest_client_rate_limiter_duration_seconds_count")
    under = increase(a, b, comp, "rest_client_rate_limiter_duration_seconds_bucket", {"le": le})
    if not n or under is None:
        return None
    return max(0.0, 1.0 - under / n)


def _queue(a: Snapshot, b: Snapshot, w: float, comp: str, name: str) -> dict[str, Any] | None:
    """One work queue's figures: mean wait, mean work, adds/s, depth at both edges."""
    m = {"name": name}
    wait, n = _mean(a, b, comp, "workqueue_queue_duration_seconds", m)
    work, _ = _mean(a, b, comp, "workqueue_work_duration_seconds", m)
    adds = increase(a, b, comp, "workqueue_adds_total", m)
    if wait is None and not adds:
        return None
    return {"name": name, "mean_wait_ms": _r(None if wait is None else wait * 1000), "mean_work_ms":
            _r(None if work is None else work * 1000), "adds_per_s": _r((adds or 0.0) / w),
            "depth_start": gauge(a, comp, "workqueue_depth", m), "depth_end": gauge(b, comp, "workqueue_depth", m),
            "processed": n}


def _client_limits(a: Snapshot, b: Snapshot, w: float, ctx: Context) -> list[Limit]:
    out = []
    for comp in ("controller-manager", "scheduler", "kueue"):
        if comp not in b.metrics:
            continue
        qps = ctx.qps(comp)
        reqs = increase(a, b, comp, "rest_client_requests_total")
        rate = None if reqs is None else reqs / w
        mean, n = _mean(a, b, comp, "rest_client_rate_limiter_duration_seconds")
        figures: dict[str, Any] = {"requests_per_s": _r(rate), "qps": qps[0] if qps else None,
                                   "burst": qps[1] if qps else None}
        name = NAMES[comp]
        if n > 0 and mean is not None:
            waited = _limiter_share_over(a, b, comp, "0.025")
            s = increase(a, b, comp, "rest_client_rate_limiter_duration_seconds_sum") or 0.0
            figures.update(mean_wait_ms=_r(mean * 1000), waited_over_25ms=_r(waited, 4),
                           requests_in_limiter_avg=_r(s / w), limited_requests=n)
            pressure = mean * qps[0] if qps else None
            words = (f"{name}'s client waited {mean * 1000:.1f} ms per request in its rate limiter"
                     + (f" (QPS {qps[0]:g}: one token every {1000 / qps[0]:.1f} ms)" if qps else "")
                     + (f"; {waited:.0%} of requests waited over 25 ms" if waited is not None else "")
                     + (f"; {rate:.1f} requests/s" if rate is not None else ""))
            how = "mean limiter wait >= 1/QPS"
        elif comp == "kueue" and rate is not None:
            pressure = rate / (KUEUE_QPS_FRACTION * qps[0]) if qps else None
            figures["inferred"] = True
            words = (f"Kueue sent {rate:.1f} requests/s" + (f" against its QPS {qps[0]:g} ({rate / qps[0]:.0%})" if qps
                                                              else "")
                     + " (inferred: its /metrics has no rate-limiter metric)")
            how = f"requests/s >= {KUEUE_QPS_FRACTION:.0%} of QPS (inferred)"
        else:
            continue
        if comp == "controller-manager":
            job = _queue(a, b, w, comp, "job")
            if job:
                figures["job_queue"] = job
                if job["mean_wait_ms"] is not None:
                    words += f"; Job controller queue wait {job['mean_wait_ms']:.0f} ms"
        out.append(Limit(f"client:{comp}", comp, RESOURCE, pressure, how, figures, words))
    return out


def _apf_limit(a: Snapshot, b: Snapshot, w: float) -> Limit | None:
    base = "apiserver_flowcontrol_request_wait_duration_seconds"
    levels = by_label(a, b, "apiserver", f"{base}_count", "priority_level")
    if not levels:
        if "apiserver" in b.metrics:
            return Limit("apf", "apiserver", RESOURCE, None, "mean APF wait >= 50 ms or rejections",
                         {"enabled": False}, "kube-apiserver's priority and fairness is off (no APF metrics): "
                                             "no queueing or rejection there")
        return None
    rows: list[tuple[float, float, dict[str, Any]]] = []  # (pressure, rejected, figures) per level
    for level, n in levels.items():
        mean, _ = _mean(a, b, "apiserver", base, {"priority_level": level})
        rejected = increase(a, b, "apiserver", "apiserver_flowcontrol_rejected_requests_total",
                            {"priority_level": level}) or 0.0
        p = (mean or 0.0) / APF_WAIT_S
        if rejected > 0:
            p = max(p, 1.0 + rejected / max(n + rejected, 1.0))
        rows.append((p, rejected, {"priority_level": level, "requests": n, "rejected": rejected,
                                   "mean_wait_ms": _r(None if mean is None else mean * 1000), "pressure": _r(p, 4),
                                   "inqueue_end": gauge(b, "apiserver", "apiserver_flowcontrol_current_inqueue_requests",
                                                        {"priority_level": level})}))
    rows.sort(key=lambda r: -r[0])
    pressure, _, worst = rows[0]
    rejected_all = sum(r[1] for r in rows)
    words = (f"kube-apiserver's APF: worst priority level {worst['priority_level']} waited "
             f"{worst['mean_wait_ms'] or 0:.1f} ms per request in its queues; {rejected_all:g} request(s) rejected")
    return Limit("apf", "apiserver", RESOURCE, pressure, "mean APF wait >= 50 ms or rejections",
                 {"enabled": True, "worst": worst, "rejected": rejected_all, "rejected_per_s": _r(rejected_all / w),
                  "levels": [r[2] for r in rows[:6]]}, words)


def _etcd_limit(a: Snapshot, b: Snapshot, w: float) -> Limit | None:
    mean, n = _mean(a, b, "apiserver", "etcd_request_duration_seconds")
    if mean is None:
        return None
    fsync, _ = _mean(a, b, "etcd", "etcd_disk_wal_fsync_duration_seconds")
    commit, _ = _mean(a, b, "etcd", "etcd_disk_backend_commit_duration_seconds")
    return Limit("etcd", "etcd", RESOURCE, mean / ETCD_MEAN_S, f"mean etcd request >= {ETCD_MEAN_S * 1000:g} ms",
                 {"mean_request_ms": _r(mean * 1000), "requests_per_s": _r(n / w),
                  "wal_fsync_mean_ms": _r(None if fsync is None else fsync * 1000),
                  "backend_commit_mean_ms": _r(None if commit is None else commit * 1000)},
                 f"etcd answered the apiserver in {mean * 1000:.1f} ms on average ({n / w:.0f} requests/s)"
                 + (f"; WAL fsync {fsync * 1000:.1f} ms" if fsync is not None else ""))


def _growth_pressure(growth: float, arriving: float) -> float:
    """A queue's growth (items/s) over :data:`PENDING_GROWTH_FRACTION` of what arrives (0 when it shrank)."""
    return 0.0 if growth <= 0 else growth / (PENDING_GROWTH_FRACTION * max(arriving, 1e-3))


def _loop_reads(a: Snapshot, b: Snapshot, comp: str, duration: str, attempts: str) \
        -> tuple[float | None, dict[str, float], float | None]:
    """One component's loop: its busy seconds (the ``_sum`` of its ``duration`` histogram), its attempts
    by result and their mean duration."""
    mean, _ = _mean(a, b, comp, duration)
    return increase(a, b, comp, f"{duration}_sum"), by_label(a, b, comp, attempts, "result"), mean


def _scheduler_limits(a: Snapshot, b: Snapshot, w: float) -> list[Limit]:
    out = []
    busy_s, attempts, alg = _loop_reads(a, b, "scheduler", "scheduler_scheduling_algorithm_duration_seconds",
                                        "scheduler_schedule_attempts_total")
    att, _ = _mean(a, b, "scheduler", "scheduler_scheduling_attempt_duration_seconds")
    pending = {q: [gauge(snap, "scheduler", "scheduler_pending_pods", {"queue": q}) for snap in (a, b)]
               for q in ("active", "backoff", "unschedulable", "gated")}
    common = {"attempts_per_s": {k: _r(v / w) for k, v in attempts.items()},
              "algorithm_mean_ms": _r(None if alg is None else alg * 1000),
              "attempt_mean_ms": _r(None if att is None else att * 1000), "pending_start_end": pending}
    if busy_s is not None:
        busy = busy_s / w
        scheduled = attempts.get("scheduled", 0.0) / w
        out.append(Limit("loop:scheduler", "scheduler", LOOP, busy / LOOP_BUSY, f"algorithm busy >= {LOOP_BUSY:.0%}",
                         {"busy_fraction": _r(busy, 4), **common},
                         f"kube-scheduler's scheduling algorithm ran {busy:.0%} of the window ({scheduled:.1f} pods "
                         f"scheduled/s, {(alg or 0) * 1000:.1f} ms each)"))
    (a0, a1), (b0, b1) = pending["active"], pending["backoff"]
    if a0 is not None and a1 is not None:
        p0, p1 = a0 + (b0 or 0.0), a1 + (b1 or 0.0)
        incoming = increase(a, b, "scheduler", "scheduler_queue_incoming_pods_total",
                            {"event": lambda e: e in ("UnschedulablePodAdd", "PodAdd")}) or 0.0
        growth, arriving = (p1 - p0) / w, incoming / w
        out.append(Limit("pending:scheduler", "scheduler", BACKLOG, _growth_pressure(growth, arriving),
                         f"active+backoff growth > {PENDING_GROWTH_FRACTION:.0%} of arrivals",
                         {"growth_per_s": _r(growth), "arriving_per_s": _r(arriving), **common},
                         f"kube-scheduler's active+backoff queues went {p0:g} -> {p1:g} pods ({growth:+.2f}/s "
                         f"against {arriving:.1f} pods arriving/s)"))
    return out


def _kueue_limits(a: Snapshot, b: Snapshot, w: float) -> list[Limit]:
    out = []
    busy_s, attempts, cycle = _loop_reads(a, b, "kueue", "kueue_admission_attempt_duration_seconds",
                                          "kueue_admission_attempts_total")
    admitted = (increase(a, b, "kueue", "kueue_admitted_workloads_total") or 0.0) / w
    pending = {s: [gauge(a, "kueue", "kueue_pending_workloads", {"status": s}),
                   gauge(b, "kueue", "kueue_pending_workloads", {"status": s})] for s in ("active", "inadmissible")}
    common = {"attempts_per_s": {k: _r(v / w) for k, v in attempts.items()}, "admitted_per_s": _r(admitted),
              "cycle_mean_ms": _r(None if cycle is None else cycle * 1000), "pending_start_end": pending}
    if busy_s is not None:
        busy = busy_s / w
        out.append(Limit("loop:kueue", "kueue", LOOP, busy / LOOP_BUSY, f"admission cycles busy >= {LOOP_BUSY:.0%}",
                         {"busy_fraction": _r(busy, 4), **common},
                         f"Kueue's admission cycles ran {busy:.0%} of the window ({admitted:.1f} workloads admitted/s, "
                         f"{(cycle or 0) * 1000:.1f} ms per cycle)"))
    p0, p1 = pending["active"]
    if p0 is not None and p1 is not None:
        growth = (p1 - p0) / w
        out.append(Limit("pending:kueue", "kueue", BACKLOG, _growth_pressure(growth, admitted + max(growth, 0.0)),
                         f"active pending growth > {PENDING_GROWTH_FRACTION:.0%} of arrivals",
                         {"growth_per_s": _r(growth), **common},
                         f"Kueue's active pending workloads went {p0:g} -> {p1:g} ({growth:+.2f}/s against "
                         f"{admitted:.1f} admitted/s)"))
    return out


def _job_loop(a: Snapshot, b: Snapshot, w: float) -> Limit | None:
    q = _queue(a, b, w, "controller-manager", "job")
    busy_s = increase(a, b, "controller-manager", "workqueue_work_duration_seconds_sum", {"name": "job"})
    if q is None or busy_s is None:
        return None
    busy = busy_s / (w * JOB_WORKERS)
    return Limit("loop:job-controller", "controller-manager", LOOP, busy / LOOP_BUSY,
                 f"{JOB_WORKERS} workers busy >= {LOOP_BUSY:.0%}", {"busy_fraction": _r(busy, 4), "queue": q},
                 f"the Job controller's {JOB_WORKERS} workers were busy {busy:.0%} of the window "
                 f"({q['adds_per_s']:.1f} syncs queued/s, {q['mean_work_ms'] or 0:.0f} ms each)")


def _queue_limits(a: Snapshot, b: Snapshot, w: float) -> list[Limit]:
    out = []
    for comp in ("controller-manager", "kueue"):
        names = {labels.get("name", "") for labels, _ in
                 (b.metrics.get(comp) or {}).get("workqueue_queue_duration_seconds_count") or []}
        rows = [q for n in sorted(names) if (q := _queue(a, b, w, comp, n)) and q["mean_wait_ms"] is not None]
        if not rows:
            continue
        rows.sort(key=lambda q: -(q["mean_wait_ms"] or 0.0))
        worst = rows[0]
        out.append(Limit(f"queue:{comp}", comp, BACKLOG, worst["mean_wait_ms"] / 1000.0 / QUEUE_WAIT_S,
                         f"mean work-queue wait >= {QUEUE_WAIT_S:g} s",
                         {"worst": worst, "queues": rows[:5]},
                         f"{NAMES[comp]}'s {worst['name']} queue: items waited {worst['mean_wait_ms']:.0f} ms on "
                         f"average (depth {worst['depth_start']} -> {worst['depth_end']})"))
    return out


def _resource_order(lim: Limit) -> int:
    """Inside the resource tier: a component's own limits (0), the machine's CPU (1), APF and etcd (2)."""
    if lim.tier != RESOURCE:
        return 0
    if lim.key == "cpu:host":
        return 1
    return 2 if lim.key in ("apf", "etcd") else 0


def rank(limits: list[Limit]) -> list[Limit]:
    """The module docstring's order: binding first (resource, loop, backlog; in the resource tier a
    component's own limits, then the machine's CPU, then APF and etcd; by pressure), then the rest by
    pressure; unmeasured last."""
    def key(lim: Limit) -> tuple[int, int, int, float]:
        if lim.pressure is None:
            return (2, 0, 0, 0.0)
        if lim.binding:
            return (0, TIERS.index(lim.tier), _resource_order(lim), -lim.pressure)
        return (1, 0, 0, -lim.pressure)
    return sorted(limits, key=key)


@dataclass
class Attribution:
    """A window's ranked limits; ``binding`` is the first when it binds (else None)."""

    window_s: float
    limits: list[Limit]

    @property
    def binding(self) -> Limit | None:
        return self.limits[0] if self.limits and self.limits[0].binding else None

    @property
    def nearest(self) -> Limit | None:
        return next((lim for lim in self.limits if lim.pressure is not None), None)

    def words(self) -> str:
        b = self.binding
        if b is not None:
            return f"bound by {b.key}: {b.words}"
        n = self.nearest
        if n is None:
            return "no limit measured"
        return f"no limit reached its threshold; nearest {n.key} at {n.pressure:.0%} of it: {n.words}"

    def to_dict(self) -> dict[str, Any]:
        b = self.binding
        return {"window_s": round(self.window_s, 3), "binding": b.key if b else None, "words": self.words(),
                "rule": "pressure = figure / threshold; binding >= 1; ranked binding first by tier (resource, loop, "
                        "backlog; in the resource tier a component's own client or CPU, then the machine's CPU, then "
                        "APF and etcd) then pressure, then the rest by pressure (hollowscale/measure/attribution.py)",
                "limits": [lim.to_dict() for lim in self.limits]}


def attribute(start: Snapshot, end: Snapshot, ctx: Context) -> Attribution:
    """The ranked limits over the window between two snapshots (see the module docstring)."""
    w = max(end.t - start.t, 1e-9)
    limits: list[Limit] = []
    limits += _cpu_limits(start, end, w, ctx)
    limits += _client_limits(start, end, w, ctx)
    for lim in (_apf_limit(start, end, w), _etcd_limit(start, end, w), _job_loop(start, end, w)):
        if lim is not None:
            limits.append(lim)
    if "scheduler" in end.metrics:
        limits += _scheduler_limits(start, end, w)
    if "kueue" in end.metrics:
        limits += _kueue_limits(start, end, w)
    limits += _queue_limits(start, end, w)
    return Attribution(w, rank(limits))


def attribution_from_prometheus(instant: Callable[[str, float, str], list[dict[str, Any]]], start: float, end: float,
                                ctx: Context) -> dict[str, Any]:
    """A run's ranked limits over [start, end] from its Prometheus (:func:`snapshot_from_prometheus` at
    both edges); the machine's CPU is not in Prometheus, so ``cpu:host`` is absent here."""
    doc = attribute(snapshot_from_prometheus(instant, start), snapshot_from_prometheus(instant, end), ctx).to_dict()
    doc["window"] = [round(start, 3), round(end, 3)]
    return doc


#: what ``sources.attribution`` of a run's summary says
PROMETHEUS_SOURCE = ("the components' own metrics from the run's Prometheus at the load's start and end (instant "
                     "queries: each series' latest scrape), ranked by hollowscale/measure/attribution.py; no cpu:host "
                     "(the machine's CPU is not scraped)")


# ----------------------------------------------------------------------------------------- at a knee
def bound_first(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Which limit bound first at a knee, from a cell's points (``{"rate", "passed", "attribution"}``
    dicts, the attribution as :meth:`Attribution.to_dict` wrote it): the module docstring's rule.

    Returns ``{"key", "words", "at_rate", "binding" (False: nearest only), "knee": {rate, pressure,
    figures}, "failing": {...}, "next": [the three limits ranked next at the first failing rate: key,
    pressure]}``, or None when no point has an attribution.
    """
    pts = sorted((p for p in points if p.get("attribution")), key=lambda p: p["rate"])
    if not pts:
        return None
    first_fail = next((p for p in pts if not p["passed"]), None)
    upto = [p for p in pts if first_fail is None or p["rate"] <= first_fail["rate"]]
    knee = max((p for p in pts if p["passed"] and (first_fail is None or p["rate"] < first_fail["rate"])),
               key=lambda p: p["rate"], default=None)

    def at(p: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
        if p is None:
            return None
        lim = next((x for x in p["attribution"]["limits"] if x["key"] == key), None)
        return {"rate": p["rate"], "pressure": lim["pressure"] if lim else None,
                "figures": lim["figures"] if lim else None, "words": lim["words"] if lim else None}

    def following(key: str) -> list[dict[str, Any]]:
        rows = (first_fail or pts[-1])["attribution"]["limits"]
        return [{"key": x["key"], "pressure": x["pressure"]} for x in rows
                if x["key"] != key and x["pressure"] is not None][:3]

    for p in upto:
        key = p["attribution"].get("binding")
        if key:
            lim = next(x for x in p["attribution"]["limits"] if x["key"] == key)
            return {"key": key, "binding": True, "at_rate": p["rate"], "words": lim["words"],
                    "knee": at(knee, key), "failing": at(first_fail, key), "next": following(key)}
    last = first_fail or pts[-1]
    near = next((x for x in last["attribution"]["limits"] if x["pressure"] is not None), None)
    if near is None:
        return None
    return {"key": near["key"], "binding": False, "at_rate": last["rate"], "words": near["words"],
            "knee": at(knee, near["key"]), "failing": at(first_fail, near["key"]), "next": following(near["key"])}
