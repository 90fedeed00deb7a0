"""kube-scheduler's command line and its configuration file (client limits live only there)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hollowscale.cluster.components.shared import gate_flags, secure_serving


@dataclass(frozen=True)
class SchedulerSettings:
    """What kube-scheduler's command line and configuration say.

    Attributes:
        binary: the kube-scheduler executable.
        kubeconfig: its own kubeconfig (user ``system:kube-scheduler``).
        config: where its ``KubeSchedulerConfiguration`` (:func:`config`) is written by the caller.
        port: its https port on 127.0.0.1 (``/metrics`` for Prometheus).
        cert_dir: where it writes its self-signed serving certificate.
        qps, burst: its client limits (the profile's: upstream 50/100 by default).
        feature_gates: ``Name=true`` gates it gets (empty: no ``--feature-gates``).
    """

    binary: Path
    kubeconfig: Path
    config: Path
    port: int
    cert_dir: Path
    qps: float
    burst: int
    feature_gates: tuple[str, ...] = ()


def config(s: SchedulerSettings) -> dict[str, Any]:
    """The ``KubeSchedulerConfiguration``: the client connection with the profile's QPS and burst
    (no flag sets them) and leader election on."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(s.kubeconfig), "qps": s.qps, "burst": s.burst},
        "leaderElection": {"leaderElect": True},
    }


def argv(s: SchedulerSettings) -> list[str]:
    """kube-scheduler's argv: the configuration file, secure serving, the gang gates when asked."""
    return [
        str(s.binary),
        f"--config={s.config}",
        *secure_serving(s.port, s.cert_dir, s.kubeconfig),
        *gate_flags(s.feature_gates),
    ]
