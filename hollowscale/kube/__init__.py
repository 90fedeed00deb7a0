"""Leaf helpers shared by the engines: kubeconfig -> connection settings, resource quantities.

Nothing here imports any other module of the project, so :mod:`hollow`, :mod:`loadgen` and
:mod:`distill` may all depend on it without creating cycles.
"""

from hollowscale.kube.config import KubeEndpoint, load_endpoint
from hollowscale.kube.quantity import format_quantity, parse_quantity

__all__ = ["KubeEndpoint", "format_quantity", "load_endpoint", "parse_quantity"]
