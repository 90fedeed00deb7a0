"""A real node's DRA plugin (:mod:`hollowscale.draplugin`): its command line."""

from __future__ import annotations

import sys

from hollow.dra import GpuSpec
from hollowscale.cluster.realnode.layout import NodeLayout, RealNodeSettings


def argv(layout: NodeLayout, settings: RealNodeSettings) -> list[str]:
    """``python -m hollowscale.draplugin`` publishing ``settings.dra_gpus`` fake GPUs as ``settings.dra`` says,
    with the node's own kubeconfig and CDI dir."""
    spec = settings.dra or GpuSpec(expose="dra")
    out = [sys.executable, "-m", "hollowscale.draplugin", "--kubelet-root", str(layout.kubelet_root),
           "--node", layout.name, "--kubeconfig", str(layout.kubeconfig), "--cdi-dir", str(layout.cdi_dir),
           "--fake-gpus", str(settings.dra_gpus), "--gpu-model", spec.model, "--sharing", spec.sharing]
    return out + (["--partitions", ",".join(spec.partitions)] if spec.partitions else [])
