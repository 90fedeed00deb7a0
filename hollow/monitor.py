"""The agent watches itself and says when *it* is the bottleneck.

Like Locust's CPU warning: a scale test whose load generator is saturated measures the generator, not
the system.  Every few seconds the agent samples its event-loop lag, its lease renew lag p99, its
backlog (requests waiting for the concurrency bound plus actions in flight) and its CPU share, exports
them as metrics and logs a warning (at most once a minute per kind) when one crosses its threshold.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from hollow.metrics import Metrics
from hollow.settings import MonitorSettings

log = logging.getLogger("hollow.monitor")


@dataclass(frozen=True)
class Sample:
    """One self-monitoring sample.

    Attributes:
        loop_lag_s: worst event-loop lag since the last sample, seconds.
        renew_lag_p99_s: p99 lease renew lag since the last sample, seconds (0 when none).
        backlog: requests waiting for the concurrency bound + writes in flight.
        cpu: process CPU, in cores, since the last sample.
    """

    loop_lag_s: float
    renew_lag_p99_s: float
    backlog: int
    cpu: float


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank) of ``values``, 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def assess(sample: Sample, previous: Sample | None, settings: MonitorSettings) -> list[tuple[str, str]]:
    """Warnings (kind, message) for a sample; pure, so thresholds are unit-tested."""
    out = []
    if sample.loop_lag_s > settings.loop_lag_warn_s:
        out.append(("loop_lag", f"event loop lag {sample.loop_lag_s:.3f}s > {settings.loop_lag_warn_s}s: "
                                "the agent is CPU-bound; use more shards (--shard i/n)"))
    if sample.renew_lag_p99_s > settings.renew_lag_warn_s:
        out.append(("renew_lag", f"lease renew lag p99 {sample.renew_lag_p99_s:.2f}s > "
                                 f"{settings.renew_lag_warn_s}s: nodes risk going NotReady"))
    if sample.backlog > settings.backlog_warn and (previous is None or sample.backlog > previous.backlog):
        out.append(("backlog", f"backlog {sample.backlog} requests and growing: the apiserver or the agent "
                               "cannot keep up (raise --max-inflight or add shards)"))
    if sample.cpu > settings.cpu_warn:
        out.append(("cpu", f"agent CPU {sample.cpu:.2f} cores > {settings.cpu_warn}: results may measure the "
                           "agent, not the cluster"))
    return out


class SelfMonitor:
    """Samples and warns until cancelled."""

    def __init__(self, settings: MonitorSettings, metrics: Metrics, renew_lags: Callable[[], list[float]],
                 backlog: Callable[[], int]) -> None:
        self.settings = settings
        self.metrics = metrics
        self._renew_lags = renew_lags
        self._backlog = backlog
        self._worst_lag = 0.0
        self._last_warned: dict[str, float] = {}
        self.last: Sample | None = None

    async def _probe_loop(self, period: float = 0.25) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(period)
            lag = max(0.0, time.perf_counter() - t0 - period)
            self.metrics.loop_lag.observe(lag)
            self._worst_lag = max(self._worst_lag, lag)

    async def run(self) -> None:
        """Probe the loop and sample every ``interval_s``."""
        proc = psutil.Process()
        probe = asyncio.ensure_future(self._probe_loop())
        try:
            last_cpu = sum(proc.cpu_times()[:2])
            last_t = time.monotonic()
            while True:
                await asyncio.sleep(self.settings.interval_s)
                cpu_now = sum(proc.cpu_times()[:2])
                t = time.monotonic()
                self.metrics.cpu_seconds.set(cpu_now)
                sample = Sample(self._worst_lag, p99(self._renew_lags()), self._backlog(),
                                (cpu_now - last_cpu) / max(1e-6, t - last_t))
                last_cpu, last_t, self._worst_lag = cpu_now, t, 0.0
                self.metrics.timers_due.set(sample.backlog)
                for kind, message in assess(sample, self.last, self.settings):
                    self.metrics.warnings.labels(kind).inc()
                    if t - self._last_warned.get(kind, -1e9) >= 60.0:
                        self._last_warned[kind] = t
                        log.warning("%s", message)
                self.last = sample
        finally:
            probe.cancel()
