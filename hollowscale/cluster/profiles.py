"""Cluster profiles: which upstream limits stay and which are lifted.

``default`` keeps upstream limits, which is what users measure in production.  ``scale`` lifts them
the way KWOK's ``--disable-qps-limits`` does, so the harness measures the components' real capacity
rather than client-side throttles.  The chosen profile is recorded in every report's metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Profile:
    """Limits applied to the components of a local cluster.

    Attributes:
        name: ``default`` or ``scale``.
        apiserver_flags: extra kube-apiserver flags.
        scheduler_qps: kube-scheduler client QPS (requests/s) and ``scheduler_burst``.
        controller_manager_qps: kube-controller-manager client QPS (requests/s) and ``..._burst``.
        kueue_qps: Kueue's client QPS (requests/s) and ``kueue_burst`` (Kueue's defaults: 20/30), when
            the cluster runs Kueue.
        jobset_qps: JobSet's client QPS and ``jobset_burst`` (JobSet's own defaults: 500/500,
            ``api/config/v1alpha1/defaults.go``), when the cluster runs JobSet.
    """

    name: str
    apiserver_flags: tuple[str, ...] = field(default_factory=tuple)
    scheduler_qps: float = 50.0
    scheduler_burst: int = 100
    controller_manager_qps: float = 20.0
    controller_manager_burst: int = 30
    kueue_qps: float = 20.0
    kueue_burst: int = 30
    jobset_qps: float = 500.0
    jobset_burst: int = 500

    def limits(self, component: str) -> tuple[float, int]:
        """The client (QPS, burst) of ``component`` (a key of :data:`CLIENT_FIELDS`)."""
        f_qps, f_burst = CLIENT_FIELDS[component]
        return float(getattr(self, f_qps)), int(getattr(self, f_burst))

    def client_qps(self) -> dict[str, tuple[float, int]]:
        """Client QPS/burst per component, for reports."""
        return {
            "kube-scheduler": (self.scheduler_qps, self.scheduler_burst),
            "kube-controller-manager": (self.controller_manager_qps, self.controller_manager_burst),
        }


PROFILES: dict[str, Profile] = {
    # Upstream defaults: apiserver 400 read / 200 mutating in-flight with APF on; scheduler 50/100,
    # controller-manager 20/30.
    "default": Profile(name="default"),
    "scale": Profile(
        name="scale",
        apiserver_flags=(
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
            "--enable-priority-and-fairness=false",
        ),
        scheduler_qps=5000.0,
        scheduler_burst=10000,
        controller_manager_qps=5000.0,
        controller_manager_burst=10000,
        kueue_qps=5000.0,
        kueue_burst=10000,
        jobset_qps=5000.0,
        jobset_burst=10000,
    ),
}


#: the components whose client limits :func:`with_client_limits` sets, and the profile's fields for them
CLIENT_FIELDS: dict[str, tuple[str, str]] = {
    "controller-manager": ("controller_manager_qps", "controller_manager_burst"),
    "scheduler": ("scheduler_qps", "scheduler_burst"),
    "kueue": ("kueue_qps", "kueue_burst"),
    "jobset": ("jobset_qps", "jobset_burst"),
}


def with_client_limits(profile: Profile, limits: Mapping[str, tuple[float, int]] | None) -> Profile:
    """``profile`` with some components' client (QPS, burst) replaced (``limits``: component of
    :data:`CLIENT_FIELDS` -> (qps, burst)); the name stays the profile's, the limits are in its fields
    (and so in every report's ``client_qps``)."""
    changes: dict[str, Any] = {}
    for comp, (qps, burst) in (limits or {}).items():
        if comp not in CLIENT_FIELDS:
            raise ValueError(f"no client limit for {comp!r}; expected one of: {', '.join(CLIENT_FIELDS)}")
        f_qps, f_burst = CLIENT_FIELDS[comp]
        changes[f_qps], changes[f_burst] = float(qps), int(burst)
    return replace(profile, **changes) if changes else profile


def get_profile(name: str) -> Profile:
    """The profile called ``name``; ``ValueError`` listing the valid names otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown cluster profile {name!r}; expected one of: {', '.join(PROFILES)}") from None
