"""A real Prometheus for the run (Debian's ``prometheus`` binary) and the PromQL behind each figure.

:class:`PrometheusServer` writes a scrape config for the control plane (apiserver with the admin
client certificate, scheduler and controller-manager over https without verification, etcd over
http) and the hollow agents, starts Prometheus on a free loopback port with its TSDB in the run
folder, and stops it.  Kueue's metrics (https behind controller-runtime's authn/authz filter) are
scraped with the cluster CA and a bearer token file.  :class:`PromQueries` asks it, through ``prometheus-api-client``, for the
figures of the report; every query string is returned with its value so the report can name it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC
from pathlib import Path
from typing import Any

import yaml

from kubecore.config import in_memory, shareable_file
from kubecore.procs import free_ports, spawn, stop_group

MUTATING = "POST|PUT|PATCH|DELETE"
#: apiserver request latency metric (the SLI histogram excludes WATCH and long-running requests)
API_SLI = "apiserver_request_sli_duration_seconds_bucket"


@dataclass
class Target:
    """One scrape job: ``scheme`` http|https, ``addresses`` host:port, TLS files, metrics path, and
    ``bearer_token_file`` (sent as ``Authorization: Bearer``, re-read by Prometheus on every scrape)."""

    job: str
    scheme: str
    addresses: list[str]
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    path: str = "/metrics"
    bearer_token_file: str | None = None


def targets_from_metrics(metrics: dict[str, str], ca: str | None, cert: str | None, key: str | None,
                         tokens: Mapping[str, str | os.PathLike[str]] | None = None) -> list[Target]:
    """Scrape targets from ``ClusterInfo.metrics`` (component -> URL).

    ``tokens`` (``ClusterInfo.metrics_tokens``: component -> bearer token file) marks the components
    that need a token: they are scraped with it and verified against ``ca`` (Kueue's metrics
    certificate is issued by the cluster CA).
    """
    out = []
    tokens = tokens or {}
    for comp, url in sorted(metrics.items()):
        u = urllib.parse.urlsplit(url)
        if comp == "apiserver":
            out.append(Target(comp, u.scheme, [u.netloc], ca_file=ca, cert_file=cert, key_file=key, path=u.path or "/metrics"))
        elif comp in tokens:
            out.append(Target(comp, u.scheme, [u.netloc], ca_file=ca, path=u.path or "/metrics",
                              bearer_token_file=os.fspath(tokens[comp])))
        else:
            out.append(Target(comp, u.scheme, [u.netloc], insecure=u.scheme == "https", path=u.path or "/metrics"))
    return out


def scrape_config(targets: list[Target], interval_s: float) -> dict[str, Any]:
    iv = f"{max(1, round(interval_s * 1000))}ms"
    jobs = []
    for t in targets:
        job: dict[str, Any] = {
            "job_name": t.job,
            "scheme": t.scheme,
            "metrics_path": t.path,
            "scrape_interval": iv,
            "scrape_timeout": iv,
            "static_configs": [{"targets": list(t.addresses)}],
        }
        if t.scheme == "https":
            tls: dict[str, Any] = {"insecure_skip_verify": bool(t.insecure)}
            if t.ca_file and not t.insecure:
                tls["ca_file"] = t.ca_file
            if t.cert_file and t.key_file:
                tls["cert_file"] = t.cert_file
                tls["key_file"] = t.key_file
            job["tls_config"] = tls
        if t.bearer_token_file:
            job["authorization"] = {"type": "Bearer", "credentials_file": t.bearer_token_file}
        jobs.append(job)
    return {"global": {"scrape_interval": iv, "evaluation_interval": iv}, "scrape_configs": jobs}


class PrometheusError(RuntimeError):
    pass


def targets_health(url: str) -> dict[str, str]:
    """job -> health ('up', 'down: <error>', 'unknown') of the active targets of the Prometheus at ``url``."""
    with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=5) as r:
        doc = json.loads(r.read())
    out = {}
    for t in doc["data"]["activeTargets"]:
        job = t["labels"].get("job", "?")
        h = t.get("health", "unknown")
        out[job if job not in out else f"{job}@{t['labels'].get('instance')}"] = (
            h if h == "up" else f"{h}: {t.get('lastError', '')}")
    return out


def wait_scraped(url: str, timeout_s: float = 30.0) -> dict[str, str]:
    """Wait until every target of the Prometheus at ``url`` has been scraped successfully once (bounded);
    returns the health."""
    deadline = time.monotonic() + timeout_s
    health: dict[str, str] = {}
    while time.monotonic() < deadline:
        try:
            health = targets_health(url)
        except OSError:
            health = {}
        if health and all(h == "up" for h in health.values()):
            return health
        time.sleep(0.5)
    return health


class PrometheusServer:
    """A Prometheus process owned by one run (TSDB and log in ``folder``)."""

    def __init__(self, folder: Path, targets: list[Target], interval_s: float = 1.0, binary: str | None = None):
        self.folder = folder
        self.targets = targets
        self.interval_s = interval_s
        self.binary = binary or shutil.which("prometheus") or "/usr/bin/prometheus"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.shared: list[Path] = []  # credential files written for Prometheus (removed by stop)

    def _readable_targets(self) -> list[Target]:
        """The targets with every in-memory credential (a kubeconfig's embedded keys, kubecore.config)
        written into ``folder/tls`` for Prometheus, another process, to read; each file made is recorded."""

        def readable(number: int, t: Target, role: str, path: str | None) -> str | None:
            if not in_memory(path):
                return path
            made = str(shareable_file(path, self.folder / "tls", f"{number}-{t.job}-{role}.pem"))
            self.shared.append(Path(made))
            return made

        return [replace(t, ca_file=readable(n, t, "ca", t.ca_file), cert_file=readable(n, t, "cert", t.cert_file),
                        key_file=readable(n, t, "key", t.key_file)) for n, t in enumerate(self.targets)]

    def _remove_shared(self) -> None:
        """Remove the credential files :meth:`_readable_targets` made, and their folder once empty."""
        for path in self.shared:
            path.unlink(missing_ok=True)
        if self.shared:
            with contextlib.suppress(OSError):  # something else is in it: not ours, it stays
                (self.folder / "tls").rmdir()
        self.shared = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> None:
        if not Path(self.binary).exists():
            raise PrometheusError(f"prometheus binary not found ({self.binary}); install it: apt-get install -y prometheus")
        self.folder.mkdir(parents=True, exist_ok=True)
        cfg = self.folder / "prometheus.yml"
        cfg.write_text(yaml.safe_dump(scrape_config(self._readable_targets(), self.interval_s), sort_keys=False))
        self.port = free_ports(1)[0]  # Prometheus cannot announce a port it picked itself
        self.proc = spawn(
            [self.binary, f"--config.file={cfg}", f"--storage.tsdb.path={self.folder / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1d",
             "--web.enable-lifecycle", "--log.level=warn"],
            self.folder / "prometheus.log",
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PrometheusError(f"prometheus exited with {self.proc.returncode}; see {self.folder / 'prometheus.log'}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise PrometheusError(f"prometheus not ready after {timeout_s:g}s")

    def targets_health(self) -> dict[str, str]:
        """job -> health of the active targets (:func:`targets_health`)."""
        return targets_health(self.url)

    def wait_scraped(self, timeout_s: float = 30.0) -> dict[str, str]:
        """Until every target was scraped once (:func:`wait_scraped`); the health."""
        return wait_scraped(self.url, timeout_s)

    def exited(self) -> str | None:
        """Why this Prometheus no longer serves (its process exited), or None while it runs."""
        if self.proc is not None and self.proc.poll() is not None:
            return f"prometheus exited with {self.proc.returncode}"
        return None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM its process group, SIGKILL after ``grace_s``; then the credential files made for it go."""
        if self.proc is not None:
            stop_group(self.proc, grace_s)
        self._remove_shared()


#: how a quantile is marked in ``summary.json`` (``"source"`` beside its ``p50``/``p99``): ``exact``, the
#: nearest rank over every sample (the watch timeline), or ``bucketed``, read from a Prometheus histogram
#: and interpolated by ``histogram_quantile`` inside the bucket it falls in (``p99_bucket``: [lower, upper])
EXACT, BUCKETED = "exact", "bucketed"


def quantile_bucket(q: float, cumulative: Mapping[float, float]) -> tuple[float, float | None] | None:
    """The bucket ``histogram_quantile(q, ...)`` interpolates in, from the cumulative counts by ``le``.

    As Prometheus does for a classic histogram: counts made monotonic, rank = q x all observations, the
    first bucket whose cumulative count reaches the rank; the lowest bucket starts at 0.  Returns (lower,
    upper) in the histogram's unit, upper None for the ``+Inf`` bucket (where ``histogram_quantile``
    answers the highest finite edge); None without observations or without a ``+Inf`` bucket.
    """
    les = sorted(cumulative)
    if len(les) < 2 or not math.isinf(les[-1]):
        return None
    counts, top = [], 0.0
    for le in les:
        top = max(top, cumulative[le])
        counts.append(top)
    if counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    b = next(i for i, c in enumerate(counts) if c >= rank)
    lower = les[b - 1] if b > 0 else min(0.0, les[0])
    return lower, None if math.isinf(les[b]) else les[b]


def bucket_counts(series: list[dict[str, Any]], by: tuple[str, ...]) -> dict[tuple[str, ...], dict[float, float]]:
    """Instant-query results of ``sum by (<by>, le) (...)`` as ``{label values: {le: cumulative count}}``."""
    out: dict[tuple[str, ...], dict[float, float]] = {}
    for s in series:
        raw = s["metric"].get("le")
        le = math.inf if raw == "+Inf" else as_number(raw)
        v = as_number(s["value"][1])
        if le is None or v is None:
            continue
        out.setdefault(tuple(s["metric"].get(k, "") for k in by), {})[le] = v
    return out


def mark_bucketed(fig: dict[str, Any], cumulative: Mapping[float, float] | None, qs: tuple[int, ...] = (50, 99),
                  scale: float = 1.0) -> dict[str, Any]:
    """``fig`` with ``p<q>_bucket`` [lower, upper] (scaled as its values; upper None = +Inf) beside each
    ``p<q>`` and ``source: bucketed``: the quantiles are interpolated inside these buckets."""
    for q in qs:
        b = quantile_bucket(q / 100, cumulative) if cumulative else None
        fig[f"p{q}_bucket"] = None if b is None else [round(b[0] * scale, 6), None if b[1] is None else round(b[1] * scale, 6)]
    fig["source"] = BUCKETED
    return fig


def as_number(v: Any) -> float | None:
    """A sample value as a float (None for text, NaN or infinity)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


class PromQueries:
    """The run's PromQL; each method returns values and records ``query -> used for`` in ``self.log``."""

    def __init__(self, url: str):
        from prometheus_api_client import PrometheusConnect

        self.api = PrometheusConnect(url=url, disable_ssl=True)
        self.log: list[dict[str, Any]] = []

    def instant(self, query: str, at: float, purpose: str) -> list[dict[str, Any]]:
        res = self.api.custom_query(query=query, params={"time": f"{at:.3f}"})
        self.log.append({"query": query, "time": at, "purpose": purpose, "result_series": len(res)})
        return res

    def scalar(self, query: str, at: float, purpose: str) -> float | None:
        res = self.instant(query, at, purpose)
        return as_number(res[0]["value"][1]) if res else None

    def range(self, query: str, start: float, end: float, step_s: float, purpose: str) -> list[dict[str, Any]]:
        from datetime import datetime

        res = self.api.custom_query_range(
            query=query, start_time=datetime.fromtimestamp(start, UTC),
            end_time=datetime.fromtimestamp(end, UTC), step=f"{max(step_s, 0.001):g}s")
        self.log.append({"query": query, "start": start, "end": end, "step_s": step_s, "purpose": purpose,
                         "result_series": len(res)})
        return res

    def buckets(self, metric: str, selector: str, window: str, by: tuple[str, ...], at: float,
                purpose: str) -> tuple[str, dict[tuple[str, ...], dict[float, float]]]:
        """The query and the cumulative counts by ``le`` of histogram ``metric`` (its ``_bucket`` series)
        over ``window`` before ``at``, per value of the ``by`` labels (:func:`bucket_counts`)."""
        q = f"sum by ({', '.join((*by, 'le'))}) (increase({metric}_bucket{selector}[{window}]))"
        return q, bucket_counts(self.instant(q, at, purpose), by)

    # ------------------------------------------------------------------------------------- figures
    def api_latency(self, start: float, end: float) -> dict[str, Any]:
        """apiserver SLI latency p50/p99 (ms) by verb, by (verb, resource) and by SLO group, each with the
        bucket it was interpolated in (:func:`mark_bucketed`)."""
        w = f"{max(1, math.ceil(end - start))}s"
        out: dict[str, Any] = {"by_verb": {}, "by_verb_resource": [], "slo_groups": {}, "queries": {}}
        sli, not_watch = API_SLI.removesuffix("_bucket"), '{verb!~"WATCH|CONNECT"}'
        for q in (50, 99):
            query = (f"histogram_quantile({q / 100}, sum by (verb, le) "
                     f"(increase({API_SLI}{{verb!~\"WATCH|CONNECT\"}}[{w}])))")
            out["queries"][f"by_verb.p{q}"] = query
            for s in self.instant(query, end, f"API latency p{q} by verb"):
                v = as_number(s["value"][1])
                out["by_verb"].setdefault(s["metric"].get("verb", "?"), {})[f"p{q}"] = (
                    None if v is None else round(v * 1000, 3))
        cnt_q = f"sum by (verb) (increase(apiserver_request_sli_duration_seconds_count{{verb!~\"WATCH|CONNECT\"}}[{w}]))"
        out["queries"]["by_verb.count"] = cnt_q
        for s in self.instant(cnt_q, end, "API requests by verb"):
            out["by_verb"].setdefault(s["metric"].get("verb", "?"), {})["count"] = round(as_number(s["value"][1]) or 0.0, 1)
        out["queries"]["by_verb.buckets"], counts = self.buckets(sli, not_watch, w, ("verb",), end,
                                                                "API latency buckets by verb")
        for verb, fig in out["by_verb"].items():
            mark_bucketed(fig, counts.get((verb,)), scale=1000.0)
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for q in (50, 99):
            query = (f"histogram_quantile({q / 100}, sum by (verb, resource, le) "
                     f"(increase({API_SLI}{{verb!~\"WATCH|CONNECT\"}}[{w}])))")
            out["queries"][f"by_verb_resource.p{q}"] = query
            for s in self.instant(query, end, f"API latency p{q} by verb and resource"):
                v = as_number(s["value"][1])
                key = (s["metric"].get("verb", "?"), s["metric"].get("resource", "?"))
                rows.setdefault(key, {"verb": key[0], "resource": key[1]})[f"p{q}"] = None if v is None else round(v * 1000, 3)
        out["queries"]["by_verb_resource.buckets"], counts = self.buckets(
            sli, not_watch, w, ("verb", "resource"), end, "API latency buckets by verb and resource")
        for key, row in rows.items():
            mark_bucketed(row, counts.get(key), scale=1000.0)
        out["by_verb_resource"] = sorted(rows.values(), key=lambda r: (r["verb"], r["resource"]))
        groups = {"mutating": f'verb=~"{MUTATING}"', "read_object": 'verb="GET"', "read_list": 'verb="LIST"'}
        for name, sel in groups.items():
            out["slo_groups"][name] = {}
            for q in (50, 99):
                query = f"histogram_quantile({q / 100}, sum by (le) (increase({API_SLI}{{{sel}}}[{w}])))"
                out["queries"][f"slo.{name}.p{q}"] = query
                v = self.scalar(query, end, f"API latency p{q}, SLO group {name}")
                out["slo_groups"][name][f"p{q}"] = None if v is None else round(v * 1000, 3)
            cq = f"sum(increase({API_SLI.removesuffix('_bucket')}_count{{{sel}}}[{w}]))"
            out["queries"][f"slo.{name}.count"] = cq
            c = self.scalar(cq, end, f"API requests, SLO group {name}")
            out["slo_groups"][name]["count"] = None if c is None else round(c, 1)
            out["queries"][f"slo.{name}.buckets"], counts = self.buckets(sli, f"{{{sel}}}", w, (), end,
                                                                        f"API latency buckets, SLO group {name}")
            mark_bucketed(out["slo_groups"][name], counts.get(()), scale=1000.0)
        return out

    def scheduler(self, start: float, end: float) -> dict[str, Any]:
        w = f"{max(1, math.ceil(end - start))}s"
        q_att = f"sum by (result) (increase(scheduler_schedule_attempts_total[{w}]))"
        results = {s["metric"].get("result", "?"): round(as_number(s["value"][1]) or 0.0, 1)
                   for s in self.instant(q_att, end, "scheduler attempts by result")}
        lat = {}
        q_lat = {}
        for q in (50, 99):
            query = (f"histogram_quantile({q / 100}, sum by (le) "
                     f"(increase(scheduler_scheduling_attempt_duration_seconds_bucket[{w}])))")
            q_lat[f"p{q}"] = query
            v = self.scalar(query, end, f"scheduler attempt duration p{q}")
            lat[f"p{q}"] = None if v is None else round(v * 1000, 3)
        q_lat["buckets"], counts = self.buckets("scheduler_scheduling_attempt_duration_seconds", "", w, (), end,
                                                "scheduler attempt duration buckets")
        mark_bucketed(lat, counts.get(()), scale=1000.0)
        return {"attempts_by_result": results, "attempt_duration_ms": lat,
                "queries": {"attempts_by_result": q_att, **{f"attempt_duration_ms.{k}": v for k, v in q_lat.items()}}}

    def bindings(self, start: float, end: float) -> dict[str, Any]:
        """Pods bound between ``start`` and ``end`` by the scheduler's own counter, read from its raw
        samples so that a restarted scheduler (its counter starts again at 0) is summed, not subtracted."""
        selector = 'scheduler_schedule_attempts_total{result="scheduled"}'
        lookback = max(1, math.ceil(end - start)) + 300
        q = f"{selector}[{lookback}s]"
        res = self.instant(q, end, "binding counter raw samples")
        up = self.scalar('max(up{job="scheduler"})', end, "scheduler scraped")
        if not res:
            # the labelled counter only exists after the first binding: while the scheduler is scraped
            # and the series is absent, the count is 0 (and no value at all when it is not scraped)
            count: float | None = 0.0 if up is not None else None
            return {"query": q, "start": start, "end": end, "bound": count, "resets": 0}
        total, resets = 0.0, 0
        for series in res:
            inc, n = counter_increase([(float(t), float(v)) for t, v in series.get("values") or []], start)
            total += inc
            resets += n
        return {"query": q, "start": start, "end": end, "bound": total, "resets": resets}

    def components(self, start: float, end: float) -> dict[str, Any]:
        w = f"{max(1, math.ceil(end - start))}s"
        q_cpu = f"sum by (job) (rate(process_cpu_seconds_total[{w}]))"
        q_mem = f"sum by (job) (max_over_time(process_resident_memory_bytes[{w}]))"
        cpu = {s["metric"].get("job", "?"): round(as_number(s["value"][1]) or 0.0, 4) for s in self.instant(q_cpu, end, "CPU cores")}
        mem = {s["metric"].get("job", "?"): round((as_number(s["value"][1]) or 0.0) / 2**20, 1)
               for s in self.instant(q_mem, end, "peak RSS MiB")}
        jobs = sorted(set(cpu) | set(mem))
        return {"by_job": {j: {"cpu_cores_avg": cpu.get(j), "rss_mib_max": mem.get(j)} for j in jobs},
                "queries": {"cpu_cores_avg": q_cpu, "rss_mib_max": q_mem}}

    def api_series(self, start: float, end: float, step_s: float) -> dict[str, Any]:
        """API latency p99 over time by verb (30 s windows) and the binding rate, for plots."""
        q = f"histogram_quantile(0.99, sum by (verb, le) (rate({API_SLI}{{verb!~\"WATCH|CONNECT\"}}[30s])))"
        out: dict[str, Any] = {"query_api_p99": q, "api_p99_ms": {}}
        for s in self.range(q, start, end, step_s, "API latency p99 over time by verb"):
            pts = [(float(t) - start, as_number(v)) for t, v in s["values"]]
            out["api_p99_ms"][s["metric"].get("verb", "?")] = [[round(t, 3), None if v is None else round(v * 1000, 3)] for t, v in pts]
        # the bucket edges the p99 is interpolated between, from the histogram's own ``le`` labels
        qe = f"group by (le) ({API_SLI}{{verb!~\"WATCH|CONNECT\"}})"
        out["query_bucket_edges"] = qe
        out["api_bucket_edges_ms"] = sorted(round(le * 1000, 6) for le in (
            as_number(s["metric"].get("le")) for s in self.instant(qe, end, "API latency bucket edges")) if le is not None)
        qb = 'sum(rate(scheduler_schedule_attempts_total{result="scheduled"}[10s]))'
        out["query_binding_rate"] = qb
        res = self.range(qb, start, end, step_s, "binding rate over time")
        out["binding_rate"] = [[round(float(t) - start, 3), as_number(v)] for t, v in res[0]["values"]] if res else []
        return out


def counter_increase(samples: list[tuple[float, float]], start: float) -> tuple[float, int]:
    """How much a counter grew after ``start`` from its raw samples, and how many resets it had.

    A sample lower than the one before is a new process counting from 0 (its whole value is new); a
    series whose first sample comes after ``start`` began inside the window.  Increments a killed
    process made after its last scrape are not in any sample (the report's audit cross-check has them).
    """
    prev: float | None = None
    total, resets = 0.0, 0
    for t, v in samples:
        if t <= start:
            prev = v
            continue
        if prev is None:
            total += v
        elif v >= prev:
            total += v - prev
        else:
            total += v
            resets += 1
        prev = v
    return total, resets


def histogram_quantiles(pq: PromQueries, metric: str, start: float, end: float, purpose: str, by: str = "",
                        selector: str = "", scale: float = 1.0) -> dict[str, Any]:
    """p50/p99 of a histogram over the window [start, end] (epoch s; ``scale`` 1000 for ms), overall and per
    ``by`` label (``by_<label>``), each with the bucket it was interpolated in (:func:`mark_bucketed`), and the
    queries that gave them (``queries``)."""
    w = f"{max(1, math.ceil(end - start))}s"
    out: dict[str, Any] = {"queries": {}}
    for q in (50, 99):
        query = f"histogram_quantile({q / 100}, sum by (le) (increase({metric}_bucket{selector}[{w}])))"
        out["queries"][f"p{q}"] = query
        v = pq.scalar(query, end, f"{purpose} p{q}")
        out[f"p{q}"] = None if v is None else round(v * scale, 3)
        if by:
            query = f"histogram_quantile({q / 100}, sum by (le, {by}) (increase({metric}_bucket{selector}[{w}])))"
            out["queries"][f"by_{by}.p{q}"] = query
            for s in pq.instant(query, end, f"{purpose} p{q} by {by}"):
                v = as_number(s["value"][1])
                out.setdefault(f"by_{by}", {}).setdefault(s["metric"].get(by, ""), {})[f"p{q}"] = (
                    None if v is None else round(v * scale, 3))
    out["queries"]["buckets"], counts = pq.buckets(metric, selector, w, (), end, f"{purpose} buckets")
    mark_bucketed(out, counts.get(()), scale=scale)
    if by and out.get(f"by_{by}"):
        out["queries"][f"by_{by}.buckets"], counts = pq.buckets(metric, selector, w, (by,), end,
                                                              f"{purpose} buckets by {by}")
        for value, fig in out[f"by_{by}"].items():
            mark_bucketed(fig, counts.get((value,)), scale=scale)
    return out
