"""A real node's containerd: its command line (its configuration,
:func:`hollowscale.cluster.realnode.render.containerd_config`, says why each setting is there)."""

from __future__ import annotations

from pathlib import Path

from hollowscale.cluster.realnode.layout import NodeLayout


def argv(containerd: Path, layout: NodeLayout) -> list[str]:
    """containerd's argv: its own configuration file (own root, state and socket per node)."""
    return [str(containerd), f"--config={layout.containerd_config}"]
