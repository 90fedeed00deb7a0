"""A smaller trace cut from a larger one, and any trace written back as the CSV format.

:func:`excerpt` keeps the node shapes in proportion (largest remainder over the distinct shapes) and
draws pods uniformly among those that fit a kept node of a model they allow, both seeded, both in the
file's order (a constraint keeps only the models the excerpt has); the integration test replays such an excerpt, and a user can cut one to try a trace
quickly (``hollowscale trace excerpt``).  :func:`write_trace` writes any trace (a cluster dump's too)
as a node list and a pod list that :func:`~hollowscale.trace.read.read_trace` reads back to the same
trace.
"""

from __future__ import annotations

import os
import random
import tempfile
from dataclasses import replace
from pathlib import Path

from hollowscale.trace.csvfile import POD_COLUMNS, write_csv
from hollowscale.trace.figures import fits_somewhere, node_shapes
from hollowscale.trace.model import NODE_HEADER, Trace, TraceNode, TracePod


def _apportion(total: int, sizes: list[int]) -> list[int]:
    """``total`` split over groups in proportion to ``sizes`` (largest remainder; ties to the earlier)."""
    whole = sum(sizes)
    exact = [total * s / whole for s in sizes]
    out = [int(e) for e in exact]
    order = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def excerpt(trace: Trace, nodes: int, pods: int, seed: int = 0) -> Trace:
    """``nodes`` nodes and ``pods`` pods of ``trace`` (fewer when it has fewer), drawn with ``seed``."""
    rng = random.Random(seed)
    nodes = min(nodes, len(trace.nodes))
    groups: dict[tuple[int, int, int, str], list[int]] = {}
    for i, n in enumerate(trace.nodes):
        groups.setdefault((n.cpu_milli, n.memory_mib, n.gpus, n.model), []).append(i)
    keys = list(groups)
    quotas = _apportion(nodes, [len(groups[k]) for k in keys])
    kept = sorted(i for k, q in zip(keys, quotas, strict=True) for i in rng.sample(groups[k], q))
    new_nodes = tuple(trace.nodes[i] for i in kept)
    small = replace(trace, nodes=new_nodes)
    shapes = node_shapes(small)
    eligible = [i for i, p in enumerate(trace.pods) if fits_somewhere(p, shapes)]
    chosen = sorted(rng.sample(eligible, min(pods, len(eligible))))
    note = (f"an excerpt (seed {seed}) of {trace.pods_source}: {len(new_nodes)} of {len(trace.nodes)} nodes, shapes in "
            f"proportion; {len(chosen)} of {len(trace.pods)} pods, drawn from the {len(eligible)} that fit a kept node")
    models = set(small.models)  # a constraint keeps the models the excerpt has (it fits one of them)
    kept_pods = tuple(replace(p, gpu_spec=tuple(m for m in p.gpu_spec if m in models))
                      for p in (trace.pods[i] for i in chosen))
    return replace(small, pods=kept_pods, notes=(*trace.notes, note))


def node_row(n: TraceNode) -> dict[str, str]:
    return {"sn": n.name, "cpu_milli": str(n.cpu_milli), "memory_mib": str(n.memory_mib), "gpu": str(n.gpus),
            "model": n.model}


def pod_row(p: TracePod) -> dict[str, str]:
    def opt(v: int | None) -> str:
        return "" if v is None else str(v)

    return {"name": p.name, "cpu_milli": str(p.cpu_milli), "memory_mib": str(p.memory_mib), "num_gpu": str(p.num_gpu),
            "gpu_milli": str(p.gpu_milli), "gpu_spec": "|".join(p.gpu_spec), "qos": p.qos, "pod_phase": p.phase,
            "creation_time": opt(p.creation_s), "deletion_time": opt(p.deletion_s), "scheduled_time": opt(p.scheduled_s)}


def write_trace(trace: Trace, pods_path: Path, nodes_path: Path) -> None:
    """The trace as a pod list and a node list (the pod columns the trace had; all of them for a dump).

    Each file is written whole beside itself and renamed into place, so an interrupted write leaves
    no half file.
    """
    header = trace.columns or tuple(c.name for c in POD_COLUMNS)
    for path, head, rows in ((nodes_path, NODE_HEADER, [node_row(n) for n in trace.nodes]),
                             (pods_path, header, [pod_row(p) for p in trace.pods])):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        try:
            write_csv(Path(tmp), head, rows)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
