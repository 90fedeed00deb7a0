"""What a scenario needs set up beyond the core, and whether this machine has it.

The core (``make setup``: the venv without PyTorch, Prometheus, the control-plane binaries) runs every
scenario made of hollow nodes, the default one included. Real nodes need containerd, runc, the CNI
plugins and a kubelet build; Kueue needs its own build; real distillation jobs need PyTorch. So
``make scale-test SCENARIO=...`` asks :func:`scenario_needs` (through ``hollowscale setup --for SCENARIO
--print-needs``) and installs only those, and ``hollowscale run`` asks :func:`refusal` before it starts
anything: a scenario whose needs are not set up here stops with one line naming the make command, not
minutes later with a control plane half up.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hollowscale.cluster.binaries import jobset_binary, kubelet_binary, kueue_binary

if TYPE_CHECKING:
    from hollowscale.scenario import Scenario

#: why real nodes and Kueue need root (one phrase, for messages)
ROOT_WHY = ("real nodes run containerd, runc and a kubelet, which make mounts, network namespaces and a "
            "bridge; Kueue runs in a private mount namespace; kind's nodes are privileged podman containers")
#: what a real node needs on the machine besides those the cluster checks itself
#: (:data:`hollowscale.cluster.realnode.pool.REQUIREMENTS`): the node images' tools
NODE_IMAGE_TOOLS = (
    ("gcc (the pause image)", "gcc", "gcc"),
    ("busybox (the busybox image)", "/bin/busybox", "busybox-static"),
)


@dataclass(frozen=True)
class Needs:
    """What a scenario needs beyond the core.

    Attributes:
        real_nodes: kubelets with their containerd, runc and CNI plugins: ``cluster.real_nodes``,
            ``distill_jobs`` (they run on real nodes) and ``agents.placement: in-cluster`` (its pods run
            on the local cluster's real nodes, its images are imported into their containerd).
        kueue: the Kueue binary: ``cluster.kueue`` or any variant's ``kueue``.
        jobset: the JobSet binary: ``cluster.jobset`` or any variant's ``jobset`` (no root needed).
        distill: the ``distill`` extra (PyTorch): ``distill_jobs`` train their teacher here.
        kind: ``cluster.backend: kind``: its node image holds the kubelet and the pause image and takes
            containerd's default spec from ``ctr`` (the real-node packages), and podman runs it as root.
    """

    real_nodes: bool = False
    kueue: bool = False
    jobset: bool = False
    distill: bool = False
    kind: bool = False

    @property
    def root(self) -> bool:
        """Real nodes, Kueue and kind clusters run only as root (:data:`ROOT_WHY`)."""
        return self.real_nodes or self.kueue or self.kind

    def describe(self) -> str:
        """What is needed beyond the core, in words."""
        parts = [
            *(["real nodes (the kubelet, containerd, runc, the CNI plugins; root)"] if self.real_nodes else []),
            *(["Kueue (root)"] if self.kueue else []),
            *(["JobSet"] if self.jobset else []),
            *(["PyTorch (the distill extra)"] if self.distill else []),
            *(["a kind cluster built here (the kubelet, containerd's ctr, runc, gcc; podman unpacked into the "
               "cache; root)"] if self.kind else []),
        ]
        return ", ".join(parts) if parts else "the core only (hollow nodes on the local control plane; no root)"

    def setup_vars(self) -> str:
        """The variables scripts/setup.sh reads, on one line."""
        return (f"REAL_NODES={int(self.real_nodes or self.kind)} KUEUE={int(self.kueue)} JOBSET={int(self.jobset)} "
                f"EXTRAS={'distill' if self.distill else ''} ROOT={int(self.root)}")


def scenario_needs(sc: Scenario) -> Needs:
    """What running ``sc`` with ``hollowscale run`` needs beyond the core."""
    local = sc.cluster.backend == "local"
    return Needs(
        real_nodes=(local and sc.cluster.real_nodes > 0) or bool(sc.distill_jobs)
        or sc.agents.placement == "in-cluster",
        kueue=local and (sc.cluster.kueue or any(v.kueue for v in sc.variants)),
        jobset=local and (sc.cluster.jobset or any(v.jobset for v in sc.variants)),
        distill=bool(sc.distill_jobs),
        kind=sc.cluster.backend == "kind",
    )


def _present(cmd: str) -> bool:
    return os.access(cmd, os.X_OK) if cmd.startswith("/") else shutil.which(cmd) is not None


def missing(needs: Needs) -> list[str]:
    """What of ``needs`` this machine lacks (root aside), each named with where it comes from."""
    from hollowscale.cluster.realnode.pool import REQUIREMENTS

    gaps: list[str] = []
    if needs.real_nodes or needs.kind:
        if not os.access(kubelet_binary(), os.X_OK):
            gaps.append(f"the kubelet ({kubelet_binary()})")
        gaps += [f"{what} (Debian {package})" for what, cmd, package in (*REQUIREMENTS, *NODE_IMAGE_TOOLS)
                 if not _present(cmd)]
    if needs.kueue and not os.access(kueue_binary(), os.X_OK):
        gaps.append(f"Kueue ({kueue_binary()})")
    if needs.jobset and not os.access(jobset_binary(), os.X_OK):
        gaps.append(f"JobSet ({jobset_binary()})")
    if needs.distill and importlib.util.find_spec("torch") is None:
        gaps.append("PyTorch (the distill extra)")
    return gaps


def refusal(sc: Scenario, path: str) -> str | None:
    """One line saying why ``sc`` (read from ``path``) cannot run here and what to run; None when it can."""
    needs = scenario_needs(sc)
    if needs.root and os.geteuid() != 0:
        return (f"{path} needs root ({ROOT_WHY}), and this runs as uid {os.geteuid()}: run it as root; "
                "without root, scenarios of hollow nodes alone run (make scale-test: scenarios/default.yaml)")
    gaps = missing(needs)
    if gaps:
        return (f"{path} needs {needs.describe()}, and this machine lacks {', '.join(gaps)}: run "
                f"`make setup SCENARIO={path}` first (or `make scale-test SCENARIO={path}`, which also runs it)")
    return None
