"""A real node's fake GPU device plugin (:mod:`hollowscale.deviceplugin`): its command line."""

from __future__ import annotations

import sys

from hollowscale.cluster.realnode.layout import NodeLayout, RealNodeSettings


def argv(layout: NodeLayout, settings: RealNodeSettings) -> list[str]:
    """``python -m hollowscale.deviceplugin`` registering ``settings.fake_gpus`` GPUs of
    ``settings.gpu_model`` with the node's kubelet."""
    return [sys.executable, "-m", "hollowscale.deviceplugin", "--kubelet-root", str(layout.kubelet_root),
            "--node", layout.name, "--fake-gpus", str(settings.fake_gpus), "--gpu-model", settings.gpu_model]
