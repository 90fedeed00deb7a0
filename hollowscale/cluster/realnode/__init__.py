"""Real node pools beside the hollow ones: containerd + kubelet per node, on the local cluster.

Kubemark's design: a real control plane, a few real nodes, thousands of hollow ones.  A real node here
is a real kubelet (built from ``k8s.io/kubernetes/cmd/kubelet`` like the control plane) with its own
containerd (Debian's 1.6 with runc), pods on a CNI bridge that never leaves the machine.

* :mod:`.layout`: names, paths, ports, pod address ranges, settings (pure).
* :mod:`.render`: containerd, CNI and kubelet configuration and command lines (pure; why each setting).
* :mod:`.images`: the sandbox (pause) and busybox images, from :mod:`hollowscale.images`.
* :mod:`.host`: the bridge and the host state shared by every kubelet on the machine (claimed, restored).
* :mod:`.pool`: starting nodes under the cluster's supervisor and waiting until Ready.
* :mod:`.teardown`: taking them apart at ``down`` (:func:`tear_down`) and :func:`leftovers`, what of ours
  is still there.

Use it through :class:`hollowscale.cluster.local.LocalCluster` (``real_nodes=``, ``add_real_nodes``) or
``hollowscale cluster up --real-nodes N``.  Workloads for real nodes tolerate :data:`TAINT_KEY` and
select :data:`NODE_KIND_LABEL` = ``real`` (:func:`pod_placement` gives both).
"""

from __future__ import annotations

from typing import Any

from hollowscale.cluster.realnode.layout import (
    NODE_KIND_LABEL,
    NODE_KIND_VALUE,
    NODE_PREFIX,
    TAINT_EFFECT,
    TAINT_KEY,
    TAINT_VALUE,
    NodeLayout,
    PodNetwork,
    RealNodeInfo,
    RealNodeSettings,
)
from hollowscale.cluster.realnode.pool import RealNodeError
from hollowscale.cluster.realnode.teardown import leftovers, tear_down


def pod_placement(node: str | None = None) -> dict[str, Any]:
    """Pod spec fields that put a pod on a real node (``node``: that one only): selector + toleration."""
    selector = {NODE_KIND_LABEL: NODE_KIND_VALUE}
    if node:
        selector["kubernetes.io/hostname"] = node
    return {"nodeSelector": selector,
            "tolerations": [{"key": TAINT_KEY, "operator": "Equal", "value": TAINT_VALUE, "effect": TAINT_EFFECT}]}


__all__ = [
    "NODE_KIND_LABEL",
    "NODE_KIND_VALUE",
    "NODE_PREFIX",
    "TAINT_EFFECT",
    "TAINT_KEY",
    "TAINT_VALUE",
    "NodeLayout",
    "PodNetwork",
    "RealNodeError",
    "RealNodeInfo",
    "RealNodeSettings",
    "leftovers",
    "pod_placement",
    "tear_down",
]
