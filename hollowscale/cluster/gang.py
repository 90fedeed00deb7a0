"""Kubernetes' in-tree gang scheduling (v1.36, alpha): its feature gates, its API group, and which
gates each binary of our build knows.

A local cluster started with ``gang_scheduling`` gives these gates to apiserver, scheduler and
controller-manager, and serves ``scheduling.k8s.io/v1alpha2`` (Workload, PodGroup).  A binary exits at
start on a gate it does not know ("unrecognized feature gate"), so each component gets only the gates
its own ``--help`` lists (:func:`known_feature_gates`).
"""

from __future__ import annotations

import functools
import re
import subprocess

#: in-tree gang scheduling of Kubernetes v1.36 (alpha): Workload/PodGroup API, gang plugin, Job integration
GANG_GATES = ("GenericWorkload", "GangScheduling", "WorkloadWithJob", "TopologyAwareWorkloadScheduling",
              "WorkloadAwarePreemption")
#: the API group version that serves ``workloads`` and ``podgroups``
GANG_RUNTIME_CONFIG = "scheduling.k8s.io/v1alpha2=true"
#: components that take the gang gates (each gets only the gates its binary knows)
GATED_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


@functools.lru_cache(maxsize=16)
def known_feature_gates(binary: str) -> frozenset[str]:
    """The feature gates a Kubernetes binary knows, from its ``--help`` (``Name=true|false (...)``).

    An unreadable help text yields all of :data:`GANG_GATES` (the component's own error then says
    which one it refused).
    """
    try:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset(GANG_GATES)
    found = frozenset(re.findall(r"\b([A-Z][A-Za-z0-9]+)=true\|false", out.stdout + out.stderr))
    return found or frozenset(GANG_GATES)


def gates_for(binaries: dict[str, str]) -> dict[str, list[str]]:
    """component -> the gang gates it gets (``Name=true``), from ``binaries`` (component -> executable)."""
    return {c: [f"{g}=true" for g in GANG_GATES if g in known_feature_gates(binaries[c])] for c in GATED_COMPONENTS}
