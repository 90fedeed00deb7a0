"""The control plane's own metrics at the ends of a point's measured window.

A point's Prometheus would also see the warm-up; instead the plan reads each component's ``/metrics``
(apiserver, etcd, scheduler, controller-manager) itself when the warm-up ends and when the load ends,
and takes differences: CPU cores = increase of ``process_cpu_seconds_total`` / window, memory = the
larger ``process_resident_memory_bytes`` of the two reads, mutating requests/s = increase of
``apiserver_request_total{verb=~POST|PUT|PATCH|DELETE|APPLY}`` / window, API latency p50/p99 per SLO
group from the increase of ``apiserver_request_sli_duration_seconds_bucket`` (interpolated inside the
bucket as Prometheus' ``histogram_quantile`` does).  Each read also keeps the lines that limit attribution
reads (:func:`hollowscale.measure.attribution.keep_text`) of every component, Kueue's included, and the
machine's CPU from ``/proc/stat``, so a point's binding limit is computed from the same two reads.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from hollowscale.measure.attribution import HOST, Snapshot, host_text, keep_text
from hollowscale.run.times import RunTimes

COMPONENTS = ("apiserver", "etcd", "scheduler", "controller-manager", "kueue")
MUTATING = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
GROUPS: dict[str, Callable[[str], bool]] = {
    "mutating": lambda verb: verb in MUTATING,
    "read_object": lambda verb: verb == "GET",
    "read_list": lambda verb: verb == "LIST",
}
_WANTED = ("process_cpu_seconds_total", "process_resident_memory_bytes", "apiserver_request_total{",
           "apiserver_request_sli_duration_seconds_bucket{")
_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class Sample:
    """One read of every component: epoch ``t``, per component its CPU seconds and RSS bytes; the
    apiserver's mutating request count and SLI buckets per group (``le -> cumulative count``)."""

    t: float
    cpu_s: dict[str, float] = field(default_factory=dict)
    rss: dict[str, float] = field(default_factory=dict)
    mutating: float = 0.0
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: per component (and ``host``) the exposition lines limit attribution reads
    texts: dict[str, str] = field(default_factory=dict)

    def snapshot(self) -> Snapshot:
        """The read as an attribution snapshot (:class:`hollowscale.measure.attribution.Snapshot`)."""
        return Snapshot.from_texts(self.t, self.texts)


def parse_metrics(text: str, component: str, sample: Sample) -> None:
    """Fold the lines of one component's exposition text that the plan uses into ``sample``."""
    for line in text.splitlines():
        if not line.startswith(_WANTED):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        name, labels_text, value_text = m.groups()
        try:
            value = float(value_text)
        except ValueError:
            continue
        labels = dict(_LABEL.findall(labels_text or ""))
        if name == "process_cpu_seconds_total":
            sample.cpu_s[component] = sample.cpu_s.get(component, 0.0) + value
        elif name == "process_resident_memory_bytes":
            sample.rss[component] = sample.rss.get(component, 0.0) + value
        elif name == "apiserver_request_total" and labels.get("verb") in MUTATING:
            sample.mutating += value
        elif name == "apiserver_request_sli_duration_seconds_bucket":
            verb = labels.get("verb", "")
            le = float(labels.get("le", "nan").replace("+Inf", "inf"))
            for group, match in GROUPS.items():
                if match(verb):
                    b = sample.buckets.setdefault(group, {})
                    b[le] = b.get(le, 0.0) + value


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus' ``histogram_quantile`` on cumulative ``le -> count`` (None without observations)."""
    if not buckets:
        return None
    les = sorted(buckets)
    total = buckets[les[-1]]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le in les:
        c = buckets[le]
        if c >= rank:
            if math.isinf(le):
                return prev_le
            if c == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (c - prev_count)
        prev_le, prev_count = le, c
    return les[-2] if len(les) > 1 else None


def window_diff(a: Sample, b: Sample) -> dict[str, Any]:
    """Control-plane figures between two reads (a counter that went down means a restart: the later
    value is then the increase, as Prometheus' ``increase`` counts it)."""
    dt = max(b.t - a.t, 1e-9)

    def inc(x: float, y: float) -> float:
        return y - x if y >= x else y

    comps = {}
    for c in sorted(set(a.cpu_s) | set(b.cpu_s)):
        cpu = inc(a.cpu_s.get(c, 0.0), b.cpu_s.get(c, 0.0)) / dt if c in a.cpu_s and c in b.cpu_s else None
        rss = max(a.rss.get(c, 0.0), b.rss.get(c, 0.0)) / 2**20
        comps[c] = {"cpu_cores_avg": None if cpu is None else round(cpu, 4), "rss_mib_max": round(rss, 1)}
    api: dict[str, dict[str, float | None]] = {}
    for group in GROUPS:
        ba, bb = a.buckets.get(group, {}), b.buckets.get(group, {})
        diff = {le: inc(ba.get(le, 0.0), c) for le, c in bb.items()}
        api[group] = {f"p{q}": (None if (v := histogram_quantile(q / 100, diff)) is None else round(v * 1000, 3))
                      for q in (50, 99)}
        api[group]["count"] = round(max(diff.values(), default=0.0), 1)
    return {"window_s": round(dt, 3), "components": comps, "api_latency_slo_ms": api,
            "mutating_requests_per_s": round(inc(a.mutating, b.mutating) / dt, 3),
            "errors": a.errors + b.errors}


class ComponentScraper:
    """Reads the local cluster's component metrics (URLs and credentials from its ``ClusterInfo``)."""

    def __init__(self, info: Any):
        self.info = info
        self.http = requests.Session()
        self.http.trust_env = False  # 127.0.0.1 only, never a proxy
        # the scheduler and controller-manager serve /metrics with self-signed certificates on 127.0.0.1
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")

    def sample(self) -> Sample:
        s = Sample(t=time.time())
        for comp in COMPONENTS:
            url = self.info.metrics.get(comp)
            if not url:
                continue
            kw: dict[str, Any] = {"timeout": 15}
            token = (getattr(self.info, "metrics_tokens", None) or {}).get(comp)
            if comp == "apiserver":
                kw.update(verify=str(self.info.ca_file), cert=(str(self.info.admin_cert), str(self.info.admin_key)))
            elif token:  # Kueue: controller-runtime's authn/authz filter, a certificate of the cluster CA
                kw.update(verify=str(self.info.ca_file), headers={"Authorization": f"Bearer {token.read_text().strip()}"})
            else:
                kw.update(verify=False)
            try:
                r = self.http.get(url, **kw)
                r.raise_for_status()
                parse_metrics(r.text, comp, s)
                s.texts[comp] = keep_text(r.text)
            except (requests.RequestException, OSError) as exc:
                s.errors.append(f"{comp} metrics ({url}): {exc}")
        try:
            with open("/proc/stat") as fh:
                s.texts[HOST] = host_text(fh.read(), os.cpu_count() or 1)
        except OSError as exc:
            s.errors.append(f"/proc/stat: {exc}")
        s.t = (s.t + time.time()) / 2  # the reads took a moment: stamp their middle
        return s


class LocalClusterScraper:
    """A :class:`ComponentScraper` of the local cluster in ``cluster_dir``, made at the first read (a run
    started beside it brings its cluster up first); ``info`` is that cluster's ``ClusterInfo``."""

    def __init__(self, cluster_dir: Path):
        self.cluster_dir = cluster_dir
        self.scraper: ComponentScraper | None = None
        self.info: Any = None

    def sample(self) -> Sample:
        if self.scraper is None:
            from hollowscale.cluster.local import LocalCluster

            self.info = LocalCluster(self.cluster_dir).info()
            if self.info is None:
                raise RuntimeError(f"no running cluster in {self.cluster_dir}")
            self.scraper = ComponentScraper(self.info)
        return self.scraper.sample()


class WindowWatch(threading.Thread):
    """Reads the components when the run's warm-up ends and again when its load ends.

    It watches the run's ``load_start``/``load_end`` (:class:`hollowscale.run.times.RunTimes`, set by the
    orchestrator's load phase), so the run itself needs no hook.  ``first``/``last`` stay None when the run never got that far.
    """

    def __init__(self, scraper: ComponentScraper | LocalClusterScraper, times: RunTimes, warmup_s: float):
        super().__init__(daemon=True, name="plan-window-watch")
        self.scraper = scraper
        self.times = times
        self.warmup_s = warmup_s
        self.first: Sample | None = None
        self.last: Sample | None = None
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set() and self.times.load_start is None:
            self.stop_event.wait(0.2)
        load_start = self.times.load_start
        if self.stop_event.is_set() or load_start is None:
            return
        start = load_start + self.warmup_s
        while not self.stop_event.is_set() and time.time() < start and self.times.load_end is None:
            self.stop_event.wait(min(0.2, max(0.0, start - time.time())))
        if self.stop_event.is_set() or self.times.load_end is not None:
            return
        self.first = self.scraper.sample()
        while not self.stop_event.is_set() and self.times.load_end is None:
            self.stop_event.wait(0.2)
        if not self.stop_event.is_set():
            self.last = self.scraper.sample()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)
