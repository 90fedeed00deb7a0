"""kube-scheduler's command line and its configuration file (client limits live only there)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hollowscale.cluster.components.shared import ServedComponentSettings, gate_flags, secure_serving


@dataclass(frozen=True, kw_only=True)
class SchedulerSettings(ServedComponentSettings):
    """What kube-scheduler's command line and configuration say: the shared settings (upstream client
    limits 50/100 in the default profile), ``config``, where its ``KubeSchedulerConfiguration``
    (:func:`config`) is written by the caller, and ``user``: fields of the run's own configuration
    (:data:`USER_FIELDS`: its profiles, a packing profile or a user's file; empty: the defaults)."""

    config: Path
    user: tuple[tuple[str, Any], ...] = ()


#: the KubeSchedulerConfiguration fields a run may set; the client connection and leader election stay ours
USER_FIELDS = ("parallelism", "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds",
               "profiles", "extenders", "delayCacheUntilActive")


def config(s: SchedulerSettings) -> dict[str, Any]:
    """The ``KubeSchedulerConfiguration``: the client connection with the profile's QPS and burst
    (no flag sets them), leader election on, then the run's own fields (``user``)."""
    doc: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(s.kubeconfig), "qps": s.qps, "burst": s.burst},
        "leaderElection": {"leaderElect": True},
    }
    for key, value in s.user:
        if key not in USER_FIELDS:
            raise ValueError(f"kube-scheduler configuration field {key!r}: a run may set {', '.join(USER_FIELDS)}")
        doc[key] = value
    return doc


def argv(s: SchedulerSettings) -> list[str]:
    """kube-scheduler's argv: the configuration file, secure serving, the gang gates when asked."""
    return [
        str(s.binary),
        f"--config={s.config}",
        *secure_serving(s.port, s.cert_dir, s.kubeconfig),
        *gate_flags(s.feature_gates),
    ]
