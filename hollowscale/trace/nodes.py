"""A trace's nodes as hollow node pools: every trace node one hollow node of exactly its shape.

Nodes of one shape (CPU, memory, GPUs, GPU model) form one pool, in the order the shapes first appear
in the trace (Alibaba's 1,213 GPU nodes have 15 shapes); the hollow agent names a pool's nodes
``<pool>-<i>``, and :func:`trace_pools` says which trace node each one stands for.  Every node carries
its GPU model as the label :data:`MODEL_LABEL` (also one of the labels a cluster dump's model is read
from, so a dump of a replayed cluster reads back the same models).

GPUs are counted (``nvidia.com/gpu`` in the node's allocatable, a share rounded up to a whole GPU by
the pods that ask) or DRA devices published by the hollow agent, each offering 1,000 milli-GPU
``shares`` as consumable capacity with the trace's model as its ``productName`` (:mod:`hollow.dra`,
``sharing: shares``); the trace has no pod limit per node, so nodes allow
:data:`PODS_PER_NODE` pods and only CPU, memory and GPUs bind, as in the paper's simulator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hollowscale.trace.model import Trace, TraceNode
from kubecore.quantity import format_quantity

#: the node label holding a trace node's GPU model
MODEL_LABEL = "hollowscale.io/gpu-model"
#: the label and the taint key of a replay's own nodes (value: its run id), so that a shared cluster's
#: other pods stay off them and the replay's pods stay on them
REPLAY_NODE_KEY = "hollowscale.io/replay-run"
#: the counted GPU resource
GPU_RESOURCE = "nvidia.com/gpu"
_MILLI = Fraction(1, 1000)
#: the catalogue entry (``hollow.dra.GPU_MODELS``) whose attributes and memory a trace model's DRA devices
#: carry beside its own ``productName``: the trace names models only; no claim of the replay reads more
STAND_IN = {"T4": "t4", "V100M16": "v100-32gb", "V100M32": "v100-32gb", "P100": "p4", "A10": "l4"}
DEFAULT_STAND_IN = "h100-80gb"
#: pods a replayed node allows (the trace sets no limit; CPU, memory and GPUs bind first)
PODS_PER_NODE = 1000


@dataclass(frozen=True)
class TracePool:
    """One pool: the nodes of one shape.

    Attributes:
        name: the pool's name (its nodes are ``<name>-<i>``).
        shape: the trace node every node of the pool copies (its name is the first such node's).
        members: the trace nodes it stands for, in trace order (node ``<name>-<i>`` is ``members[i]``).
    """

    name: str
    shape: TraceNode
    members: tuple[TraceNode, ...]

    def doc(self, gpu_mode: str = "counted", isolate: str | None = None) -> dict[str, Any]:
        """The pool as a pools-file entry (``hollow.pools``).

        Args:
            gpu_mode: ``counted`` (``nvidia.com/gpu`` in the nodes' allocatable) or ``dra-shared`` /
                ``dra-whole`` (each
                GPU a DRA device offering 1,000 milli-GPU ``shares``, its ``productName`` the trace's
                model; :data:`STAND_IN` names the catalogue entry lending the other attributes).
            isolate: a run id the nodes are labelled and tainted with (:data:`REPLAY_NODE_KEY`).
        """
        n = self.shape
        resources = {"cpu": format_quantity(n.cpu_milli * _MILLI), "memory": f"{n.memory_mib}Mi",
                     "pods": str(PODS_PER_NODE)}
        if n.gpus:
            resources[GPU_RESOURCE] = str(n.gpus)
        labels = {MODEL_LABEL: n.model} if n.model else {}
        doc: dict[str, Any] = {"name": self.name, "count": len(self.members), "resources": resources,
                               "labels": labels}
        if gpu_mode in ("dra-shared", "dra-whole") and n.gpus:
            doc["gpus"] = {"expose": "dra", "model": STAND_IN.get(n.model, DEFAULT_STAND_IN), "sharing": "shares",
                           "product": n.model}
        elif gpu_mode not in ("counted", "dra-shared", "dra-whole"):
            raise ValueError(f"gpu_mode {gpu_mode!r}: expected counted, dra-shared or dra-whole")
        if isolate:
            labels[REPLAY_NODE_KEY] = isolate
            doc["taints"] = [{"key": REPLAY_NODE_KEY, "value": isolate, "effect": "NoSchedule"}]
        return doc

    def node_names(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(len(self.members))]


def _slug(model: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return s[:24] or "gpu"


def trace_pools(trace: Trace, prefix: str = "trace") -> list[TracePool]:
    """The pools of ``trace``'s nodes: one per shape, named ``<prefix>-<model>-<k>`` (``cpu`` for nodes
    without GPUs, ``k`` counting the shapes of that model)."""
    groups: dict[tuple[int, int, int, str], list[TraceNode]] = {}
    for n in trace.nodes:
        groups.setdefault((n.cpu_milli, n.memory_mib, n.gpus, n.model), []).append(n)
    per_model: dict[str, int] = {}
    out = []
    for (_cpu, _mem, gpus, model), members in groups.items():
        slug = _slug(model) if gpus else "cpu"
        k = per_model[slug] = per_model.get(slug, -1) + 1
        out.append(TracePool(f"{prefix}-{slug}-{k}", members[0], tuple(members)))
    return out


def node_map(pools: list[TracePool]) -> dict[str, TraceNode]:
    """Cluster node name -> the trace node it stands for."""
    return {name: node for p in pools for name, node in zip(p.node_names(), p.members, strict=True)}
