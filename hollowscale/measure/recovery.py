"""How long scheduling takes to recover from a fault, read from the bindings the watch saw.

For each fault at time F (ms, the moment it was injected):

* the level before: pods bound per second over ``[F - before_s, F)`` (shorter when the load began
  later; at least ``min_before_s``);
* the dip: the first window ``[t, t + window_s)``, ``t >= F``, whose binding rate is below
  ``threshold`` x the level, looked for up to ``horizon_s`` after the fault's end; a fault that never
  dents the rate recovers in 0 s;
* recovery: the first window after the dip whose rate is back to ``threshold`` x the level;
  ``recovery_s`` = its start - F.  A fault still unrecovered at the end of the run reports
  ``recovered: false`` and the time it had been down.

Windows slide in ``step_s`` steps.  The rate of a steady load is the arrival rate, so the figure
means "time until the scheduler keeps up again"; a backlog drained in a burst counts as recovered.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RecoverySettings:
    """Windows of the recovery computation, in seconds; ``threshold`` is a fraction of the level before."""

    before_s: float = 30.0
    min_before_s: float = 5.0
    window_s: float = 5.0
    step_s: float = 0.5
    threshold: float = 0.9
    horizon_s: float = 60.0


def _count(ts: Sequence[float], lo: float, hi: float) -> int:
    return bisect.bisect_left(ts, hi) - bisect.bisect_left(ts, lo)


def fault_recovery(bound_ms: Sequence[float], fault_ms: float, fault_end_ms: float, load_start_ms: float,
                   end_ms: float, settings: RecoverySettings = RecoverySettings(),
                   load_end_ms: float | None = None) -> dict[str, Any]:
    """Recovery of scheduling throughput after one fault (see the module docstring); ``load_end_ms``
    only words the note of a fault the run never saw recover (arrivals stopped first)."""
    s = settings
    ts = sorted(bound_ms)
    before_ms = min(s.before_s * 1000.0, fault_ms - load_start_ms)
    out: dict[str, Any] = {"level_before_pods_per_s": None, "dip_at_s": None, "recovered": None,
                           "recovery_s": None, "note": ""}
    if before_ms < s.min_before_s * 1000.0:
        out["note"] = f"less than {s.min_before_s:g}s of load before the fault: no level to recover to"
        return out
    level = _count(ts, fault_ms - before_ms, fault_ms) / (before_ms / 1000.0)
    out["level_before_pods_per_s"] = round(level, 3)
    if level <= 0:
        out["note"] = "no bindings before the fault: no level to recover to"
        return out
    target = s.threshold * level
    win, step = s.window_s * 1000.0, s.step_s * 1000.0

    def rate(t: float) -> float:
        return _count(ts, t, t + win) / s.window_s

    t = fault_ms
    dip = None
    while t + win <= end_ms and t <= fault_end_ms + s.horizon_s * 1000.0:
        if rate(t) < target:
            dip = t
            break
        t += step
    if dip is None:
        out.update(recovered=True, recovery_s=0.0, note="the binding rate never fell below "
                   f"{s.threshold:.0%} of its level")
        return out
    out["dip_at_s"] = round((dip - fault_ms) / 1000.0, 3)
    t = dip
    while t + win <= end_ms:
        if rate(t) >= target:
            out.update(recovered=True, recovery_s=round((t - fault_ms) / 1000.0, 3))
            return out
        t += step
    ended = load_end_ms is not None and load_end_ms < end_ms
    out.update(recovered=False, recovery_s=round((end_ms - fault_ms) / 1000.0, 3),
               note=("not back to the level before the fault before the load ended (arrivals stopped, so the "
                     "rate could not be seen recovering): a lower bound") if ended
               else "not back to the level before the fault by the end of the run")
    return out


def recovery_figures(per_fault: list[dict[str, Any]]) -> dict[str, Any]:
    """``measurements.fault_recovery_s``: max and p50 over the faults that have a recovery time (an
    unrecovered fault counts with its lower bound, the time to the end of the run), and how many
    never recovered."""
    times = sorted(f["recovery_s"] for f in per_fault if f.get("recovery_s") is not None)
    return {
        "max": times[-1] if times else None,
        "p50": times[(len(times) - 1) // 2] if times else None,
        "unrecovered": sum(1 for f in per_fault if f.get("recovered") is False),
        "count": len(per_fault),
    }
