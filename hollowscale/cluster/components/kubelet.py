"""A real node's kubelet: its command line (everything else is in its ``KubeletConfiguration``,
:func:`hollowscale.cluster.realnode.render.kubelet_config`, which says why each setting is there)."""

from __future__ import annotations

from pathlib import Path

from hollowscale.cluster.realnode.layout import NODE_KIND_LABEL, NODE_KIND_VALUE, NodeLayout, PodNetwork


def argv(kubelet: Path, layout: NodeLayout, net: PodNetwork) -> list[str]:
    """The kubelet's argv: what the config file cannot say (its config, kubeconfig and root dir, the
    node's name and address on the pod bridge, the real-node label)."""
    return [
        str(kubelet),
        f"--config={layout.kubelet_config}",
        f"--kubeconfig={layout.kubeconfig}",
        f"--root-dir={layout.kubelet_root}",
        f"--hostname-override={layout.name}",
        f"--node-ip={net.gateway}",
        f"--node-labels={NODE_KIND_LABEL}={NODE_KIND_VALUE}",
        "--v=1",
    ]
