"""The images a real node needs before its kubelet starts: the sandbox (pause) image and busybox.

No registry is reachable here, so images are OCI layouts written by the project
(:mod:`hollowscale.images`, cached by content) and imported into each node's containerd with
``ctr images import`` before its kubelet starts; the CRI config's ``sandbox_image`` is
:data:`hollowscale.images.PAUSE_IMAGE`.  Pods use ``imagePullPolicy: Never``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hollowscale.images import BUSYBOX_IMAGE, PAUSE_IMAGE, BuiltImage, ImageError, build_images, import_images

#: the images every node gets (short names of :mod:`hollowscale.images`)
NODE_IMAGES = ("pause", "busybox")

__all__ = ["BUSYBOX_IMAGE", "PAUSE_IMAGE", "build_node_images", "ctr_binary", "import_node_images"]


def build_node_images() -> list[BuiltImage]:
    """Build (or take from the cache) the pause and busybox images."""
    try:
        return build_images(NODE_IMAGES)
    except ImageError as exc:
        raise RuntimeError(f"building the node images: {exc}") from None


def import_node_images(images: list[BuiltImage], address: Path) -> None:
    """Import ``images`` into the containerd at ``address`` (namespace ``k8s.io``, the CRI's)."""
    try:
        import_images(images, ctr=ctr_binary(), address=address, namespace="k8s.io")
    except ImageError as exc:
        raise RuntimeError(str(exc)) from None


def ctr_binary() -> str:
    """containerd's ``ctr`` (Debian package ``containerd``)."""
    return shutil.which("ctr") or "/usr/bin/ctr"
