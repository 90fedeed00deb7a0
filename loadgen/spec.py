"""The load spec: the ``workloads`` and ``arrival`` sections of a scenario, as plain dicts.

``hollowscale run`` validates the scenario and hands Locust a resolved JSON (``--load-spec``); on its
own, ``locust -f loadgen/locustfile.py --load-spec scenarios/default.yaml`` reads the same keys from
the scenario YAML.  Only the light parsing needed to generate load lives here (durations, defaults);
``hollowscale validate`` is the place for thorough checks, since the engines must not import the
orchestrator.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def seconds(value: Any) -> float:
    """Seconds from a number or a Go-style duration string (``90s``, ``5m``, ``250ms``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"expected a duration like '30s' or a number of seconds, got {value!r}")
    return total


def _dist(value: Any) -> dict[str, Any] | None:
    """Normalise a duration distribution to the resolved form ``{dist, value_s, min_s, ...}``."""
    if value is None:
        return None
    if isinstance(value, dict) and "dist" in value and any(k.endswith("_s") for k in value):
        return dict(value)  # already resolved (from hollowscale's JSON)
    if value == "forever":
        return {"dist": "forever"}
    if not isinstance(value, dict):
        return {"dist": "fixed", "value_s": seconds(value)}
    out: dict[str, Any] = {"dist": value.get("dist", "fixed")}
    for key in ("value", "min", "max", "mean", "stddev"):
        if key in value:
            out[f"{key}_s"] = seconds(value[key])
    return out


def _arrival(doc: dict[str, Any]) -> dict[str, Any]:
    a = dict(doc)
    for key in ("duration_s", "ramp_s", "spike_at_s", "spike_duration_s"):
        if key in a and a[key] is not None:
            a[key] = seconds(a[key])
    a["steps"] = [{"rate": float(s["rate"]), "duration_s": seconds(s["duration_s"])} for s in a.get("steps") or []]
    a.setdefault("per_user_rate", 1.0)
    a.setdefault("seed", 1)
    a.setdefault("max_instances", None)
    return a


def _workload(doc: dict[str, Any]) -> dict[str, Any]:
    w = dict(doc)
    w.setdefault("kind", "Job")
    w.setdefault("share", 1.0)
    w.setdefault("priority_class", None)
    w["run_duration"] = _dist(w.get("run_duration", "10s"))
    w["startup_delay"] = _dist(w.get("startup_delay"))
    w["exit_codes"] = {int(k): float(v) for k, v in (w.get("exit_codes") or {0: 1.0}).items()}
    w.setdefault("backoff_limit", 0)
    roles = []
    for r in w.get("roles") or []:
        role = dict(r)
        role.setdefault("replicas", 1)
        role.setdefault("completions", None)
        role["resources"] = {k: str(v) for k, v in (role.get("resources") or {}).items()}
        role["node_selector"] = {k: str(v) for k, v in (role.get("node_selector") or {}).items()}
        role["tolerations"] = list(role.get("tolerations") or [])
        role["run_duration"] = _dist(role.get("run_duration"))
        role["startup_delay"] = _dist(role.get("startup_delay"))
        roles.append(role)
    w["roles"] = roles
    return w


def normalise(doc: dict[str, Any]) -> dict[str, Any]:
    """A scenario (or resolved load spec) -> the dict the users and shapes read."""
    if not isinstance(doc, dict) or "workloads" not in doc or "arrival" not in doc:
        raise ValueError("expected a scenario or load spec with 'workloads' and 'arrival'")
    cluster = doc.get("cluster") or {}
    return {
        "name": str(doc.get("name", "load")),
        "namespace": doc.get("namespace") or cluster.get("namespace") or "hollowscale-load",
        "scheduler_name": doc.get("scheduler_name") or cluster.get("scheduler_name") or "default-scheduler",
        "workloads": [_workload(w) for w in doc["workloads"]],
        "arrival": _arrival(doc["arrival"]),
    }


def load_spec(path: str | Path) -> dict[str, Any]:
    """Read a load spec from a scenario YAML or a resolved JSON file."""
    text = Path(path).read_text()
    doc = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    return normalise(doc)
