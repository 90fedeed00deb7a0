"""Scenario YAML -> :class:`~hollowscale.scenario.model.Scenario`, collecting every error.

Each section has a reader that checks types and ranges, rejects unknown keys and records a
:class:`FieldError` (field path + what was expected) instead of stopping at the first problem.
The ``pools:`` section uses the hollow agent's format and is checked by the agent's own parser
(:func:`hollow.pools.parse_pools`), so the scenario and the agent cannot disagree about it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from kubecore.quantity import parse_quantity
from hollowscale.scenario.errors import FieldError, ScenarioError
from hollowscale.scenario.model import (
    BACKENDS,
    CURVES,
    DEFAULT_SLOS,
    DISTRIBUTIONS,
    FAULT_TYPES,
    PROFILES,
    SLO_OPS,
    WORKLOAD_KINDS,
    AgentSpec,
    ArrivalSpec,
    ClusterSpec,
    DurationDist,
    FaultSpec,
    MeasurementSpec,
    RoleSpec,
    Scenario,
    SloSpec,
    Step,
    WorkloadSpec,
)

_MISSING = object()
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")

#: Leaves of ``measurements`` an SLO may name: prefix -> allowed leaves (None = any verb/group key).
SLO_METRICS: dict[str, tuple[str, ...]] = {
    "pod_startup_latency_ms": ("p50", "p90", "p99"),
    "pod_scheduling_latency_ms": ("p50", "p90", "p99"),
    "job_completion_time_s": ("p50", "p90", "p99"),
    "gpu_queue_wait_s": ("p50", "p90", "p99"),
    "scheduling_throughput_pods_per_s": ("avg", "p50", "max"),
    "gpu_allocation_pct": ("avg", "max"),
    "pending_pods": ("avg", "max"),
    "jobs": ("submitted", "completed", "failed", "unfinished"),
    "crosscheck": ("diff_pct",),
    "api_latency_ms": ("p50", "p99"),  # api_latency_ms.<VERB>.p99
    "api_latency_slo_ms": ("p50", "p99"),  # api_latency_slo_ms.<mutating|read_object|read_list>.p99
}


def parse_duration(value: Any) -> float:
    """Seconds from a number or a Go-style duration string (``90s``, ``5m``, ``1h30m``, ``250ms``)."""
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError
        return float(value)
    text = str(value).strip()
    if not text:
        raise ValueError
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            raise ValueError
        n = float(m.group(1))
        total += n * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ValueError
    return total


class Reader:
    """Walks one mapping, records errors with full paths, and remembers which keys were read."""

    def __init__(self, errors: list[FieldError], path: str, doc: Any, what: str = "a mapping"):
        self.errors = errors
        self.path = path
        self.ok = isinstance(doc, dict)
        self.doc: dict[str, Any] = doc if isinstance(doc, dict) else {}
        self.seen: set[str] = set()
        if not self.ok:
            self.err("", f"expected {what}, got {_show(doc)}")

    def sub(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def err(self, key: str, message: str) -> None:
        self.errors.append(FieldError(self.sub(key) if key else self.path, message))

    def raw(self, key: str, default: Any = _MISSING, required: bool = False) -> Any:
        self.seen.add(key)
        if key in self.doc:
            return self.doc[key]
        if required and self.ok:
            self.err(key, "is required")
        return default

    def str_(
        self,
        key: str,
        default: Any = _MISSING,
        choices: tuple[str, ...] | None = None,
        dns: bool = False,
        required: bool = False,
    ) -> Any:
        v = self.raw(key, default, required)
        if v is _MISSING or (v is None and default is None):
            return None if v is _MISSING else v
        if not isinstance(v, str):
            self.err(key, f"expected a string, got {_show(v)}")
            return default if default is not _MISSING else None
        if choices and v not in choices:
            self.err(key, f"expected one of {', '.join(choices)}, got {v!r}")
        if dns and not _DNS1123.match(v):
            self.err(key, f"expected a lowercase DNS label (a-z, 0-9, '-'), got {v!r}")
        return v

    def num(
        self,
        key: str,
        default: Any = _MISSING,
        lo: float | None = None,
        hi: float | None = None,
        integer: bool = False,
        lo_open: bool = False,
        required: bool = False,
    ) -> Any:
        v = self.raw(key, default, required)
        if v is _MISSING or v is None:
            return None
        kind = "an integer" if integer else "a number"
        if isinstance(v, bool) or not isinstance(v, int | float) or (integer and not isinstance(v, int)):
            self.err(key, f"expected {kind}, got {_show(v)}")
            return default if default is not _MISSING else None
        if not math.isfinite(v):
            self.err(key, f"expected a finite number, got {v!r}")
            return None
        if lo is not None and (v <= lo if lo_open else v < lo):
            self.err(key, f"expected {kind} {'>' if lo_open else '>='} {lo:g}, got {v!r}")
        if hi is not None and v > hi:
            self.err(key, f"expected {kind} <= {hi:g}, got {v!r}")
        return v

    def dur(self, key: str, default: Any = _MISSING, lo: float = 0.0, required: bool = False) -> Any:
        v = self.raw(key, default, required)
        if v is _MISSING or v is None:
            return None
        try:
            s = parse_duration(v)
        except ValueError:
            self.err(key, f"expected a duration in seconds or like '90s', '5m', '1h30m', got {_show(v)}")
            return None
        if s < lo:
            self.err(key, f"expected a duration >= {lo:g}s, got {v!r}")
        return s

    def bool_(self, key: str, default: bool) -> bool:
        v = self.raw(key, default)
        if not isinstance(v, bool):
            self.err(key, f"expected true or false, got {_show(v)}")
            return default
        return v

    def str_map(self, key: str) -> dict[str, str]:
        v = self.raw(key, {})
        if v is None:
            return {}
        if not isinstance(v, dict):
            self.err(key, f"expected a mapping of strings, got {_show(v)}")
            return {}
        out: dict[str, str] = {}
        for k, val in v.items():
            if not isinstance(k, str) or not isinstance(val, str | int | float) or isinstance(val, bool):
                self.err(f"{key}.{k}", f"expected a string value, got {_show(val)}")
                continue
            out[k] = str(val)
        return out

    def list_(self, key: str, required: bool = False, min_len: int = 0) -> list[Any]:
        v = self.raw(key, _MISSING, required)
        if v is _MISSING or v is None:
            if required and v is None:
                self.err(key, "expected a list, got null")
            return []
        if not isinstance(v, list):
            self.err(key, f"expected a list, got {_show(v)}")
            return []
        if len(v) < min_len:
            self.err(key, f"expected at least {min_len} item(s), got {len(v)}")
        return v

    def done(self) -> None:
        """Unknown keys are errors (typos must not silently fall back to defaults)."""
        for k in self.doc:
            if k not in self.seen:
                known = ", ".join(sorted(self.seen))
                self.err(str(k), f"unknown key (expected one of: {known})")


def _show(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {str(v).lower()}"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    return f"{type(v).__name__} {v!r}"


# ----------------------------------------------------------------------------------------------- sections


def _cluster(errors: list[FieldError], doc: Any) -> ClusterSpec:
    r = Reader(errors, "cluster", {} if doc is None else doc)
    spec = ClusterSpec(
        backend=r.str_("backend", "local", choices=BACKENDS),
        profile=r.str_("profile", "default", choices=PROFILES),
        kubeconfig=r.str_("kubeconfig", None),
        dir=r.str_("dir", None),
        scheduler_name=r.str_("scheduler_name", "default-scheduler"),
        namespace=r.str_("namespace", "hollowscale-load", dns=True),
    )
    if spec.backend == "existing" and not spec.kubeconfig:
        r.err("kubeconfig", "is required when backend is 'existing'")
    r.done()
    return spec


def _agents(errors: list[FieldError], doc: Any) -> AgentSpec:
    r = Reader(errors, "agents", {} if doc is None else doc)
    args = r.list_("args")
    for i, a in enumerate(args):
        if not isinstance(a, str):
            r.err(f"args[{i}]", f"expected a string, got {_show(a)}")
    spec = AgentSpec(
        shards=r.num("shards", 1, lo=1, hi=64, integer=True) or 1,
        ready_timeout_s=r.dur("ready_timeout_s", 300.0, lo=1) or 300.0,
        delete_nodes_on_exit=r.bool_("delete_nodes_on_exit", True),
        args=tuple(str(a) for a in args),
    )
    r.done()
    return spec


def _dist(errors: list[FieldError], path: str, v: Any, allow_forever: bool = True) -> DurationDist | None:
    if v == "forever":
        if not allow_forever:
            errors.append(FieldError(path, "expected a finite duration, got 'forever'"))
            return None
        return DurationDist("forever")
    if not isinstance(v, dict):
        try:
            return DurationDist("fixed", value_s=parse_duration(v))
        except ValueError:
            errors.append(
                FieldError(
                    path,
                    "expected a duration ('30s', 12.5), 'forever', or a mapping "
                    f"{{dist: fixed|uniform|exponential|normal, ...}}, got {_show(v)}",
                )
            )
            return None
    r = Reader(errors, path, v)
    dist = r.str_("dist", "fixed", choices=DISTRIBUTIONS)
    out: DurationDist | None = None
    if dist == "fixed":
        out = DurationDist("fixed", value_s=r.dur("value", required=True))
    elif dist == "uniform":
        lo, hi = r.dur("min", required=True), r.dur("max", required=True)
        if lo is not None and hi is not None and hi < lo:
            r.err("max", f"expected max >= min ({lo:g}s), got {hi:g}s")
        out = DurationDist("uniform", min_s=lo, max_s=hi)
    elif dist == "exponential":
        out = DurationDist("exponential", mean_s=r.dur("mean", required=True), max_s=r.dur("max", None))
    elif dist == "normal":
        out = DurationDist(
            "normal",
            mean_s=r.dur("mean", required=True),
            stddev_s=r.dur("stddev", required=True),
            min_s=r.dur("min", None),
            max_s=r.dur("max", None),
        )
    elif dist == "forever":
        if not allow_forever:
            r.err("dist", "expected a finite distribution, got 'forever'")
        out = DurationDist("forever")
    r.done()
    return out


def _resources(errors: list[FieldError], path: str, v: Any) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        errors.append(FieldError(path, f"expected a mapping such as {{cpu: '2', memory: 4Gi}}, got {_show(v)}"))
        return {}
    out: dict[str, str] = {}
    for k, q in v.items():
        sub = f"{path}.{k}"
        if isinstance(q, bool) or not isinstance(q, str | int | float):
            errors.append(FieldError(sub, f"expected a Kubernetes quantity such as '500m', got {_show(q)}"))
            continue
        try:
            val = parse_quantity(q)
        except ValueError as exc:
            errors.append(FieldError(sub, str(exc)))
            continue
        if val < 0:
            errors.append(FieldError(sub, f"expected a quantity >= 0, got {q!r}"))
        if k == "nvidia.com/gpu" and val.denominator != 1:
            errors.append(FieldError(sub, f"expected a whole number of GPUs, got {q!r}"))
        out[str(k)] = str(q)
    return out


def _tolerations(errors: list[FieldError], path: str, v: Any) -> tuple[dict[str, Any], ...]:
    if v is None:
        return ()
    if not isinstance(v, list):
        errors.append(FieldError(path, f"expected a list of tolerations, got {_show(v)}"))
        return ()
    out = []
    for i, t in enumerate(v):
        r = Reader(errors, f"{path}[{i}]", t)
        tol = {
            "key": r.str_("key", None),
            "operator": r.str_("operator", "Equal", choices=("Equal", "Exists")),
            "value": r.str_("value", None),
            "effect": r.str_("effect", None, choices=("NoSchedule", "PreferNoSchedule", "NoExecute")),
            "tolerationSeconds": r.num("tolerationSeconds", None, lo=0, integer=True),
        }
        r.done()
        out.append({k: val for k, val in tol.items() if val is not None})
    return tuple(out)


def _exit_codes(errors: list[FieldError], path: str, v: Any) -> dict[int, float]:
    if v is None:
        return {0: 1.0}
    if not isinstance(v, dict) or not v:
        errors.append(FieldError(path, f"expected a mapping exit code -> weight, e.g. {{0: 0.95, 1: 0.05}}, got {_show(v)}"))
        return {0: 1.0}
    out: dict[int, float] = {}
    for k, w in v.items():
        try:
            code = int(k)
            if str(code) != str(k).strip() or not 0 <= code <= 255:
                raise ValueError
        except (TypeError, ValueError):
            errors.append(FieldError(f"{path}.{k}", f"expected an exit code 0..255 as key, got {k!r}"))
            continue
        if isinstance(w, bool) or not isinstance(w, int | float) or w < 0:
            errors.append(FieldError(f"{path}.{k}", f"expected a weight >= 0, got {_show(w)}"))
            continue
        out[code] = float(w)
    if out and sum(out.values()) <= 0:
        errors.append(FieldError(path, "expected at least one weight > 0"))
    return out or {0: 1.0}


def _role(errors: list[FieldError], path: str, doc: Any, kind: str) -> RoleSpec | None:
    r = Reader(errors, path, doc)
    name = r.str_("name", required=True, dns=True)
    replicas = r.num("replicas", 1, lo=1, hi=10000, integer=True) or 1
    completions = r.num("completions", None, lo=1, hi=100000, integer=True)
    if kind == "Pod" and replicas != 1:
        r.err("replicas", f"expected 1 for kind Pod (a bare pod), got {replicas}")
    if completions is not None and kind != "Job":
        r.err("completions", f"only valid for kind Job, workload kind is {kind}")
    res = _resources(errors, r.sub("resources"), r.raw("resources", None))
    sel = r.str_map("node_selector")
    tol = _tolerations(errors, r.sub("tolerations"), r.raw("tolerations", None))
    rd = r.raw("run_duration", None)
    sd = r.raw("startup_delay", None)
    role = RoleSpec(
        name=name or "",
        replicas=replicas,
        completions=completions,
        resources=res,
        node_selector=sel,
        tolerations=tol,
        run_duration=_dist(errors, r.sub("run_duration"), rd) if rd is not None else None,
        startup_delay=_dist(errors, r.sub("startup_delay"), sd, allow_forever=False) if sd is not None else None,
    )
    r.done()
    return role if name else None


def _workload(errors: list[FieldError], path: str, doc: Any) -> WorkloadSpec | None:
    r = Reader(errors, path, doc)
    if not r.ok:
        return None
    name = r.str_("name", required=True, dns=True)
    kind = r.str_("kind", "Job", choices=WORKLOAD_KINDS)
    share = r.num("share", 1.0, lo=0, lo_open=True)
    rd_raw = r.raw("run_duration", "10s")
    rd = _dist(errors, r.sub("run_duration"), rd_raw)
    if kind in ("Job", "Pod") and rd is not None and rd.dist == "forever":
        r.err("run_duration", f"kind {kind} needs a finite run duration ('forever' never completes)")
    sd_raw = r.raw("startup_delay", None)
    sd = _dist(errors, r.sub("startup_delay"), sd_raw, allow_forever=False) if sd_raw is not None else None
    codes = _exit_codes(errors, r.sub("exit_codes"), r.raw("exit_codes", None))
    if kind == "Deployment" and set(codes) != {0}:
        r.err("exit_codes", "Deployment pods run forever; exit codes apply to Job and Pod only")
    roles_raw = r.list_("roles", required=True, min_len=1)
    roles = []
    names: set[str] = set()
    for i, rr in enumerate(roles_raw):
        role = _role(errors, f"{r.sub('roles')}[{i}]", rr, kind or "Job")
        if role is None:
            continue
        if role.name in names:
            errors.append(FieldError(f"{r.sub('roles')}[{i}].name", f"duplicate role name {role.name!r}"))
        names.add(role.name)
        if kind in ("Job", "Pod") and role.run_duration is not None and role.run_duration.dist == "forever":
            errors.append(FieldError(f"{r.sub('roles')}[{i}].run_duration", f"kind {kind} needs a finite run duration"))
        roles.append(role)
    spec = WorkloadSpec(
        name=name or "",
        kind=kind or "Job",
        share=float(share or 1.0),
        priority_class=r.str_("priority_class", None),
        run_duration=rd or DurationDist("fixed", value_s=10.0),
        startup_delay=sd,
        exit_codes=codes,
        backoff_limit=r.num("backoff_limit", 0, lo=0, hi=100, integer=True) or 0,
        roles=tuple(roles),
    )
    r.done()
    return spec if name else None


def _arrival(errors: list[FieldError], doc: Any) -> ArrivalSpec | None:
    r = Reader(errors, "arrival", doc)
    if not r.ok:
        return None
    curve = r.str_("curve", required=True, choices=CURVES)
    duration = r.dur("duration_s", required=True, lo=0.001)
    kw: dict[str, Any] = {}
    if curve in ("constant", "poisson"):
        kw["rate"] = r.num("rate", required=True, lo=0, lo_open=True)
    elif curve == "ramp":
        kw["start_rate"] = r.num("start_rate", 0.0, lo=0)
        kw["end_rate"] = r.num("end_rate", required=True, lo=0, lo_open=True)
        kw["ramp_s"] = r.dur("ramp_s", required=True)
        if duration is not None and kw["ramp_s"] is not None and kw["ramp_s"] > duration:
            r.err("ramp_s", f"expected ramp_s <= duration_s ({duration:g}s), got {kw['ramp_s']:g}s")
    elif curve == "steps":
        steps = []
        for i, s in enumerate(r.list_("steps", required=True, min_len=1)):
            sr = Reader(errors, f"arrival.steps[{i}]", s)
            rate, d = sr.num("rate", required=True, lo=0), sr.dur("duration_s", required=True, lo=0.001)
            sr.done()
            if rate is not None and d is not None:
                steps.append(Step(float(rate), d))
        kw["steps"] = tuple(steps)
        total = sum(s.duration_s for s in steps)
        if duration is not None and steps and total > duration + 1e-9:
            r.err("steps", f"steps last {total:g}s in all, longer than duration_s ({duration:g}s)")
    elif curve == "spike":
        kw["rate"] = r.num("rate", required=True, lo=0)
        kw["spike_rate"] = r.num("spike_rate", required=True, lo=0, lo_open=True)
        kw["spike_at_s"] = r.dur("spike_at_s", required=True)
        kw["spike_duration_s"] = r.dur("spike_duration_s", required=True, lo=0.001)
        if duration is not None and kw["spike_at_s"] is not None and kw["spike_at_s"] >= duration:
            r.err("spike_at_s", f"expected a time before duration_s ({duration:g}s), got {kw['spike_at_s']:g}s")
    per_user = r.num("per_user_rate", 1.0, lo=0, lo_open=True)
    max_inst = r.num("max_instances", None, lo=1, integer=True)
    seed = r.num("seed", 1, integer=True)
    # keys valid for other curves are errors here: a 'rate' on a ramp is a typo, not a default
    known_for = {"constant": {"rate"}, "poisson": {"rate"}, "ramp": {"start_rate", "end_rate", "ramp_s"},
                 "steps": {"steps"}, "spike": {"rate", "spike_rate", "spike_at_s", "spike_duration_s"}}
    all_curve_keys = set().union(*known_for.values())
    for k in r.doc:
        if k in all_curve_keys and curve in known_for and k not in known_for[curve]:
            r.err(k, f"not used by curve {curve!r} (it takes: {', '.join(sorted(known_for[curve]))})")
            r.seen.add(k)
    r.done()
    if curve is None or duration is None or any(v is None for k, v in kw.items() if k != "steps"):
        return None
    return ArrivalSpec(curve=curve, duration_s=duration, per_user_rate=float(per_user or 1.0),
                       max_instances=max_inst, seed=int(seed if seed is not None else 1), **kw)


def _faults(errors: list[FieldError], doc: Any, duration: float | None) -> tuple[FaultSpec, ...]:
    if doc is None:
        return ()
    if not isinstance(doc, list):
        errors.append(FieldError("faults", f"expected a list, got {_show(doc)}"))
        return ()
    out = []
    for i, f in enumerate(doc):
        r = Reader(errors, f"faults[{i}]", f)
        if not r.ok:
            continue
        typ = r.str_("type", required=True, choices=FAULT_TYPES)
        at = r.dur("at_s", required=True)
        frac = r.num("fraction", required=True, lo=0, hi=1, lo_open=True)
        dur = r.dur("duration_s", required=True, lo=0.001)
        seed = r.num("seed", 1, integer=True)
        code = r.num("exit_code", 137, lo=0, hi=255, integer=True) if typ == "pod-failures" else 137
        if at is not None and duration is not None and at >= duration:
            r.err("at_s", f"expected a time within the load (< {duration:g}s), got {at:g}s")
        r.done()
        if typ and at is not None and frac is not None and dur is not None:
            out.append(FaultSpec(typ, at, float(frac), dur, int(seed or 1), int(code if code is not None else 137)))
    return tuple(out)


def _measurements(errors: list[FieldError], doc: Any) -> MeasurementSpec:
    r = Reader(errors, "measurements", {} if doc is None else doc)
    spec = MeasurementSpec(
        prometheus=r.bool_("prometheus", True),
        scrape_interval_s=r.dur("scrape_interval_s", 1.0, lo=0.2) or 1.0,
        crosscheck_tolerance_pct=float(r.num("crosscheck_tolerance_pct", 5.0, lo=0, hi=100) or 5.0),
        settle_timeout_s=r.dur("settle_timeout_s", 120.0, lo=0) or 0.0,
        sample_interval_s=r.dur("sample_interval_s", 1.0, lo=0.1) or 1.0,
    )
    r.done()
    return spec


def _slo_metric_ok(metric: str) -> str | None:
    parts = metric.split(".")
    head = parts[0]
    if head not in SLO_METRICS:
        return f"expected a metric path starting with one of {', '.join(sorted(SLO_METRICS))}, got {metric!r}"
    leaves = SLO_METRICS[head]
    if head in ("api_latency_ms", "api_latency_slo_ms"):
        groups = ("mutating", "read_object", "read_list")
        if len(parts) != 3 or parts[2] not in leaves:
            return f"expected {head}.<{'VERB' if head == 'api_latency_ms' else '|'.join(groups)}>.<p50|p99>, got {metric!r}"
        if head == "api_latency_slo_ms" and parts[1] not in groups:
            return f"expected {head}.<{'|'.join(groups)}>.<p50|p99>, got {metric!r}"
        return None
    if len(parts) != 2 or parts[1] not in leaves:
        return f"expected {head}.<{'|'.join(leaves)}>, got {metric!r}"
    return None


def _slos(errors: list[FieldError], doc: Any, defaults: bool) -> tuple[SloSpec, ...]:
    out: dict[str, SloSpec] = {s.name: s for s in DEFAULT_SLOS} if defaults else {}
    if doc is None:
        return tuple(out.values())
    if not isinstance(doc, list):
        errors.append(FieldError("slos", f"expected a list, got {_show(doc)}"))
        return tuple(out.values())
    names: set[str] = set()
    for i, s in enumerate(doc):
        r = Reader(errors, f"slos[{i}]", s)
        if not r.ok:
            continue
        name = r.str_("name", required=True)
        metric = r.str_("metric", required=True)
        op = r.str_("op", "<=", choices=SLO_OPS)
        thr = r.num("threshold", required=True)
        desc = r.str_("description", "")
        if metric:
            msg = _slo_metric_ok(metric)
            if msg:
                r.err("metric", msg)
        if name in names:
            r.err("name", f"duplicate SLO name {name!r}")
        r.done()
        if name and metric and thr is not None:
            names.add(name)
            out[name] = SloSpec(name, metric, op or "<=", float(thr), desc or "")
    return tuple(out.values())


def _pools(errors: list[FieldError], doc: Any, source: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(doc, list) or not doc:
        errors.append(FieldError("pools", f"expected a non-empty list of node pools (the agent's format), got {_show(doc)}"))
        return ()
    try:
        from hollow.pools import PoolsError, parse_pools
    except ImportError:  # the agent is not installed: structural checks only
        parse_pools = None  # type: ignore[assignment]
    if parse_pools is not None:
        try:
            parse_pools({"pools": doc}, source)
        except PoolsError as exc:
            msg = str(exc).removeprefix(f"{source}: ")
            path, sep, rest = msg.partition(": ")
            ok_path = sep and path.startswith("pools")
            errors.append(FieldError(path if ok_path else "pools", rest if ok_path else msg))
        except Exception as exc:  # the agent's parser must not crash validation
            errors.append(FieldError("pools", f"rejected by the agent's pool parser: {exc}"))
    else:
        for i, p in enumerate(doc):
            r = Reader(errors, f"pools[{i}]", p)
            r.str_("name", required=True, dns=True)
            r.num("count", required=True, lo=0, integer=True)
            _resources(errors, r.sub("resources"), r.raw("resources", required=True))
    return tuple(dict(p) for p in doc if isinstance(p, dict))


def _check_fit(errors: list[FieldError], pools: tuple[dict[str, Any], ...], workloads: list[WorkloadSpec],
               paths: list[str]) -> None:
    """Every role must fit at least one pool's node (by GPUs/CPU and node selector keys the pools set)."""
    def q(res: dict[str, Any], key: str) -> float:
        try:
            return float(parse_quantity(res.get(key, "0")))
        except (ValueError, TypeError):
            return 0.0

    for w, wpath in zip(workloads, paths, strict=True):
        for j, role in enumerate(w.roles):
            fits = False
            for p in pools:
                res = p.get("resources") or {}
                labels = {str(k): str(v) for k, v in (p.get("labels") or {}).items()}
                sel_ok = all(labels.get(k) == v for k, v in role.node_selector.items() if k in labels) and all(
                    k in labels or not k.startswith("nvidia.com/") for k in role.node_selector
                )
                if not sel_ok:
                    continue
                if all(q(role.resources, k) <= q(res, k) for k in role.resources if k in res or k == "nvidia.com/gpu"):
                    fits = True
                    break
            if not fits and pools:
                errors.append(FieldError(
                    f"{wpath}.roles[{j}]",
                    f"requests {role.resources} with node_selector {role.node_selector} fit no node of any pool",
                ))


TOP_KEYS = ("name", "description", "cluster", "agents", "pools", "workloads", "arrival", "faults",
            "measurements", "slos", "slo_defaults", "timeout_s")


def parse_scenario(doc: Any, source: str) -> Scenario:
    """Validate a parsed YAML document; raise :class:`ScenarioError` listing every problem."""
    errors: list[FieldError] = []
    r = Reader(errors, "", doc, "a scenario mapping with pools, workloads and arrival")
    if not r.ok:
        raise ScenarioError(source, errors)
    name = r.str_("name", required=True, dns=True)
    description = r.str_("description", "") or ""
    cluster = _cluster(errors, r.raw("cluster", None))
    agents = _agents(errors, r.raw("agents", None))
    pools = _pools(errors, r.raw("pools", None, required=False), source)
    workloads: list[WorkloadSpec] = []
    wpaths: list[str] = []
    wnames: set[str] = set()
    for i, w in enumerate(r.list_("workloads", required=True, min_len=1)):
        spec = _workload(errors, f"workloads[{i}]", w)
        if spec is None:
            continue
        if spec.name in wnames:
            errors.append(FieldError(f"workloads[{i}].name", f"duplicate workload name {spec.name!r}"))
        wnames.add(spec.name)
        workloads.append(spec)
        wpaths.append(f"workloads[{i}]")
    arrival = _arrival(errors, r.raw("arrival", None, required=True)) if "arrival" in r.doc else None
    if "arrival" not in r.doc:
        r.raw("arrival", required=True)
    faults = _faults(errors, r.raw("faults", None), arrival.duration_s if arrival else None)
    measurements = _measurements(errors, r.raw("measurements", None))
    slos = _slos(errors, r.raw("slos", None), r.bool_("slo_defaults", True))
    default_timeout = (arrival.duration_s if arrival else 0) + measurements.settle_timeout_s + agents.ready_timeout_s + 120
    timeout = r.dur("timeout_s", default_timeout, lo=1)
    if timeout is not None and arrival is not None and timeout < arrival.duration_s:
        r.err("timeout_s", f"expected at least the load duration ({arrival.duration_s:g}s), got {timeout:g}s")
    r.done()
    _check_fit(errors, pools, workloads, wpaths)
    if errors:
        raise ScenarioError(source, errors)
    assert arrival is not None and name
    return Scenario(
        name=name,
        source=source,
        description=description,
        cluster=cluster,
        agents=agents,
        pools=pools,
        workloads=tuple(workloads),
        arrival=arrival,
        faults=faults,
        measurements=measurements,
        slos=slos,
        timeout_s=float(timeout or default_timeout),
    )


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    source = str(path)
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ScenarioError(source, [FieldError("", "file not found")]) from None
    except OSError as exc:
        raise ScenarioError(source, [FieldError("", f"cannot read: {exc.strerror}")]) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ScenarioError(source, [FieldError("", f"not valid YAML ({where}{getattr(exc, 'problem', exc)})")]) from None
    return parse_scenario(doc, source)

