"""How a run reaches a cluster's real nodes: the part of running real pods that differs between clusters.

A feature that runs real pods (the distillation jobs, :mod:`hollowscale.distilljobs`) needs three things
of the nodes its pods land on, and each kind of cluster answers them its own way:

- **images**: there is no registry here, so every built image is put into the nodes' container runtime
  (the local cluster: ``ctr images import`` into each node's containerd; kind: ``kind load
  image-archive``, :class:`hollowscale.cluster.kind.KindRealNodes`);
- **host folders**: a folder of this machine (the trained teacher) as the nodes see it.  The local
  nodes share this machine's filesystem; kind's nodes are containers, which see only what was mounted
  into them when the cluster was created;
- **the apiserver from a pod**: the local cluster runs no kube-proxy, so a pod that talks to the API
  runs on its node's network and uses the apiserver's loopback address; kind routes the ``kubernetes``
  Service as any cluster does (None).

A backend hands its answer to the run in ``ClusterAccess.real_nodes``; the features use only this
interface, with no branch on the backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from hollowscale.images import BuiltImage

Log = Callable[[str], None]


class RealNodeError(RuntimeError):
    """The cluster's real nodes cannot do what was asked (none there, a folder not visible on them)."""


class RealNodeAccess(Protocol):
    """What a feature may do with a cluster's real nodes (module docstring)."""

    @property
    def count(self) -> int:
        """How many real nodes the cluster has (0: none; features needing them refuse to start)."""
        ...

    @property
    def pod_apiserver(self) -> tuple[str, int] | None:
        """``(host, port)`` a pod on a node's network reaches the apiserver at when the cluster routes no
        Service; None when in-cluster networking works."""
        ...

    def load_images(self, images: Sequence[BuiltImage], log: Log) -> None:
        """Put ``images`` into every real node's container runtime (cheap when they are there already)."""
        ...

    def host_dir(self, path: Path) -> str:
        """Where this machine's folder ``path`` is on the real nodes (for a ``hostPath`` volume);
        :class:`RealNodeError` when they cannot see it."""
        ...


@dataclass(frozen=True)
class NoRealNodes:
    """A cluster whose real nodes hollowscale does not know (an existing cluster's, or none)."""

    why: str = "the cluster has no real nodes hollowscale knows of"

    @property
    def count(self) -> int:
        return 0

    @property
    def pod_apiserver(self) -> tuple[str, int] | None:
        return None

    def load_images(self, images: Sequence[BuiltImage], log: Log) -> None:
        raise RealNodeError(self.why)

    def host_dir(self, path: Path) -> str:
        raise RealNodeError(self.why)


@dataclass(frozen=True)
class LocalRealNodes:
    """The local cluster's real nodes: kubelets of this machine, each with its own containerd.

    Attributes:
        sockets: each node's containerd socket.
        apiserver: the apiserver's loopback address (the local cluster runs no kube-proxy).
    """

    sockets: tuple[str, ...]
    apiserver: tuple[str, int]

    @classmethod
    def at(cls, sockets: Sequence[str], server: str) -> LocalRealNodes:
        """The nodes of ``sockets``, with the apiserver of the URL ``server`` (the cluster's kubeconfig's)."""
        url = urlsplit(server)
        return cls(tuple(sockets), (url.hostname or "127.0.0.1", url.port or 443))

    @property
    def count(self) -> int:
        return len(self.sockets)

    @property
    def pod_apiserver(self) -> tuple[str, int] | None:
        return self.apiserver

    def load_images(self, images: Sequence[BuiltImage], log: Log) -> None:
        from hollowscale.cluster.realnode.images import ctr_binary
        from hollowscale.images import import_images

        for sock in self.sockets:
            log(f"importing {', '.join(i.name for i in images)} into {sock}")
            import_images(images, ctr=ctr_binary(), address=Path(sock))

    def host_dir(self, path: Path) -> str:
        return str(path)  # the nodes are this machine


__all__ = ["LocalRealNodes", "NoRealNodes", "RealNodeAccess", "RealNodeError"]
