"""When a hollow container's probes would first pass: the kubelet's probe timing, without probes.

A hollow node runs no containers, so it cannot probe them; what it can reproduce is *when* the real
kubelet (v1.36, ``pkg/kubelet/prober/worker.go``) would first see them pass, assuming every probe
succeeds at its first chance:

- a container with a readiness probe is written Running with ``ready: false`` (the kubelet's first
  status after the start has no probe result yet), and Ready in a later write;
- the probe worker ticks every ``periodSeconds``; the status written at the container start triggers
  a run at once (``manualTriggerCh``) and restarts the ticker there, so runs happen at
  ``start + k * periodSeconds`` (k = 0, 1, ...);
- a run is skipped while ``int(seconds since start) < initialDelaySeconds``, so the first counted run
  is at ``k = ceil(initialDelaySeconds / periodSeconds)``;
- ``successThreshold`` passes in a row are needed (readiness: its value, default 1), one per tick;
- a startup probe gates the readiness probe (``started`` is false until it passes) and is timed the
  same way; the container is ready at the later of the two.

So a container is ready ``(ceil(initial / period) + success - 1) * period`` seconds after its start,
and a pod when its slowest container is.  Probe run time (milliseconds for an exec probe) and the
kubelet's start-up jitter (a random part of one period, only in the first period after the kubelet
itself started) are left out.  Failing probes are not modelled (a hollow container is healthy).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: the apiserver's defaults for a probe's fields (``pkg/apis/core/v1/defaults.go``)
DEFAULT_PERIOD_S = 10
DEFAULT_SUCCESS_THRESHOLD = 1


def _int(probe: dict[str, Any], key: str, default: int, least: int) -> int:
    try:
        value = int(probe.get(key) or default)
    except (TypeError, ValueError):
        return default
    return max(value, least)


def probe_pass_delay(probe: dict[str, Any]) -> float:
    """Seconds from the container start until ``probe`` first counts as passed (see the module doc)."""
    period = _int(probe, "periodSeconds", DEFAULT_PERIOD_S, 1)
    initial = _int(probe, "initialDelaySeconds", 0, 0)
    success = _int(probe, "successThreshold", DEFAULT_SUCCESS_THRESHOLD, 1)
    ticks = -(-initial // period)  # ceil
    return float((ticks + success - 1) * period)


def container_ready_delay(container: dict[str, Any]) -> tuple[float | None, bool]:
    """(seconds from start until ready, or None when no probe gates it; has a startup probe)."""
    startup = container.get("startupProbe")
    readiness = container.get("readinessProbe")
    if not startup and not readiness:
        return None, False
    started = probe_pass_delay(startup) if startup else 0.0
    ready = probe_pass_delay(readiness) if readiness else 0.0
    return max(started, ready), bool(startup)


def pod_ready_delay(containers: Iterable[dict[str, Any]]) -> tuple[float | None, bool]:
    """For a pod's app containers: (seconds until all are ready or None when none is gated; any startup probe).

    Cheap when no container has a probe (two dictionary lookups each): it runs on every watch event.
    """
    delay: float | None = None
    startup = False
    for c in containers:
        if "readinessProbe" not in c and "startupProbe" not in c:
            continue
        d, s = container_ready_delay(c)
        startup = startup or s
        if d is not None:
            delay = d if delay is None else max(delay, d)
    return delay, startup
