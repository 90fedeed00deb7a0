"""CPU and memory of the run's own processes (agents, Locust), sampled with psutil.

The agents export no ``process_*`` metrics and Locust none at all, so the harness measures its own
children: CPU seconds of each child and its descendants between the start of the load and the end
of the run, and the peak resident memory seen while sampling.  A load generator that saturates its
core would otherwise pass for a slow scheduler.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

SOURCE = ("psutil: CPU seconds (process + children) of each child of the run between the start of the load and "
          "the end of the run, divided by that time; peak RSS sampled")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` and all its descendants (None when it is gone)."""
    try:
        p = psutil.Process(pid)
        total = 0.0
        for q in [p, *p.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                ct = q.cpu_times()
                total += ct.user + ct.system
        return total
    except psutil.Error:
        return None


def rss_bytes(pid: int) -> int | None:
    """Resident memory of ``pid`` and its descendants (None when it is gone)."""
    try:
        p = psutil.Process(pid)
        return sum(q.memory_info().rss for q in [p, *p.children(recursive=True)])
    except psutil.Error:
        return None


@dataclass
class ResourceSampler:
    """CPU marks at the start of the load, last CPU readings while alive, peak RSS per named process."""

    marks: dict[str, tuple[float, float]] = field(default_factory=dict)
    last: dict[str, tuple[float, float]] = field(default_factory=dict)
    rss_max: dict[str, int] = field(default_factory=dict)

    def mark(self, procs: dict[str, int]) -> None:
        """Start counting CPU for each ``name -> pid`` now."""
        for name, pid in procs.items():
            v = cpu_seconds(pid)
            if v is not None:
                self.marks[name] = (time.time(), v)

    def sample(self, procs: dict[str, int]) -> None:
        """Record the current CPU reading and the RSS peak of each live process."""
        for name, pid in procs.items():
            v = cpu_seconds(pid)
            if v is not None:
                self.last[name] = (time.time(), v)
            rss = rss_bytes(pid)
            if rss is not None:
                self.rss_max[name] = max(self.rss_max.get(name, 0), rss)

    def usage(self, procs: dict[str, int]) -> dict[str, Any]:
        """``name -> {cpu_cores_avg, rss_mib_max}`` from the mark to now (or the last reading when gone)."""
        self.sample(procs)
        out: dict[str, Any] = {}
        for name, (t0, v0) in self.marks.items():
            end = self.last.get(name)
            out[name] = {"cpu_cores_avg": round((end[1] - v0) / max(end[0] - t0, 1e-9), 4) if end else None,
                         "rss_mib_max": round(self.rss_max.get(name, 0) / 2**20, 1) or None}
        return out
