"""What a trace holds, counted: the figures of ``hollowscale trace inspect`` (and the replay's checks).

Everything here is exact arithmetic on the trace (whole numbers: milli-CPU, MiB, milli-GPU); ratios are
the only floats.  The replay's report checks its pod counts per kind against :func:`inspect_trace`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hollowscale.trace.model import GPU_MILLI, KINDS, Trace, TracePod


def node_shapes(trace: Trace) -> set[tuple[int, int, int, str]]:
    """The nodes' distinct shapes: (milli-CPU, MiB, GPUs, model)."""
    return {(n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in trace.nodes}


def fits_somewhere(pod: TracePod, shapes: set[tuple[int, int, int, str]]) -> bool:
    """Some node shape of a model the pod allows (any without a constraint) is large enough for it alone."""
    return any(pod.cpu_milli <= c and pod.memory_mib <= m and pod.num_gpu <= g and (not pod.gpu_spec or mo in pod.gpu_spec)
               for c, m, g, mo in shapes)


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def inspect_trace(trace: Trace) -> dict[str, Any]:
    """The trace's figures as a JSON-able mapping (``hollowscale trace inspect --json``)."""
    nodes = trace.nodes
    by_model: dict[str, dict[str, Any]] = {}
    for n in nodes:
        m = by_model.setdefault(n.model, {"model": n.model, "nodes": 0, "gpus": 0, "cpu_milli": 0, "memory_mib": 0,
                                          "gpus_per_node": Counter()})
        m["nodes"] += 1
        m["gpus"] += n.gpus
        m["cpu_milli"] += n.cpu_milli
        m["memory_mib"] += n.memory_mib
        m["gpus_per_node"][n.gpus] += 1
    models = sorted(by_model.values(), key=lambda m: (m["model"] == "", -m["gpus"], m["model"]))
    for m in models:
        m["gpus_per_node"] = {str(k): v for k, v in sorted(m["gpus_per_node"].items())}
    cap_gpu = sum(n.gpus for n in nodes) * GPU_MILLI
    cap_cpu = sum(n.cpu_milli for n in nodes)
    cap_mem = sum(n.memory_mib for n in nodes)

    kinds = {k: {"pods": 0, "gpu_milli": 0, "gpus_counted": 0, "cpu_milli": 0, "memory_mib": 0} for k in KINDS}
    for p in trace.pods:
        k = kinds[p.kind]
        k["pods"] += 1
        k["gpu_milli"] += p.gpu_milli_total
        k["gpus_counted"] += p.gpus_counted
        k["cpu_milli"] += p.cpu_milli
        k["memory_mib"] += p.memory_mib
    gpu = sum(k["gpu_milli"] for k in kinds.values())
    cpu = sum(k["cpu_milli"] for k in kinds.values())
    mem = sum(k["memory_mib"] for k in kinds.values())
    counted = sum(k["gpus_counted"] for k in kinds.values())

    constrained = [p for p in trace.pods if p.gpu_spec]
    sets: dict[str, dict[str, Any]] = {}
    for p in constrained:
        key = "|".join(p.gpu_spec)
        s = sets.setdefault(key, {"models": key, "pods": 0, "gpu_milli": 0,
                                  "gpus_available": sum(n.gpus for n in nodes if n.model in p.gpu_spec)})
        s["pods"] += 1
        s["gpu_milli"] += p.gpu_milli_total
    shapes = node_shapes(trace)
    never = [p for p in constrained if not fits_somewhere(p, shapes)]
    creations = [p.creation_s for p in trace.pods if p.creation_s is not None]
    deletions = [p.deletion_s for p in trace.pods if p.deletion_s is not None]
    return {
        "source": {"pods": trace.pods_source, "nodes": trace.nodes_source, "format": trace.format,
                   "columns": list(trace.columns)},
        "nodes": {"total": len(nodes), "gpu_nodes": sum(1 for n in nodes if n.gpus),
                  "cpu_only_nodes": sum(1 for n in nodes if not n.gpus), "gpus": cap_gpu // GPU_MILLI,
                  "cpu_milli": cap_cpu, "memory_mib": cap_mem, "models": len(trace.models), "by_model": models},
        "pods": {"total": len(trace.pods), "by_kind": kinds},
        "demand": {
            "gpu_milli": gpu, "gpu_capacity_milli": cap_gpu, "gpu_ratio": _ratio(gpu, cap_gpu),
            "gpus_counted": counted, "gpus_counted_ratio": _ratio(counted * GPU_MILLI, cap_gpu),
            "cpu_milli": cpu, "cpu_capacity_milli": cap_cpu, "cpu_ratio": _ratio(cpu, cap_cpu),
            "memory_mib": mem, "memory_capacity_mib": cap_mem, "memory_ratio": _ratio(mem, cap_mem),
        },
        "constraints": {
            "pods": len(constrained),
            "by_models": sorted(sets.values(), key=lambda s: (-s["pods"], s["models"])),
            "never_fit": {"pods": len(never), "names": [p.name for p in never[:10]]},
        },
        "qos": dict(sorted(Counter(p.qos or "(none)" for p in trace.pods).items(), key=lambda kv: (-kv[1], kv[0]))),
        "phases": dict(sorted(Counter(p.phase or "(none)" for p in trace.pods).items(), key=lambda kv: (-kv[1], kv[0]))),
        "times": {"timed": trace.timed, "first_creation_s": min(creations, default=None),
                  "last_creation_s": max(creations, default=None), "last_deletion_s": max(deletions, default=None)},
        "notes": list(trace.notes),
    }
