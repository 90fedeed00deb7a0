"""Flags more than one control-plane component takes: secure serving and feature gates."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class ServedComponentSettings:
    """What kube-controller-manager's and kube-scheduler's command lines both say.

    Attributes:
        binary: the executable.
        kubeconfig: its own kubeconfig (its own user, e.g. ``system:kube-scheduler``).
        port: its https port on 127.0.0.1 (``/metrics`` for Prometheus).
        cert_dir: where it writes its self-signed serving certificate.
        qps, burst: its client limits (the profile's).
        feature_gates: ``Name=true`` gates it gets (empty: no ``--feature-gates``).
    """

    binary: Path
    kubeconfig: Path
    port: int
    cert_dir: Path
    qps: float
    burst: int
    feature_gates: tuple[str, ...] = ()


def secure_serving(port: int, cert_dir: Path, kubeconfig: Path) -> list[str]:
    """Serve https on 127.0.0.1:``port`` with a self-signed certificate written into ``cert_dir``;
    authenticate and authorise through the apiserver (``kubeconfig``), except the health and metrics
    paths, which Prometheus scrapes without credentials."""
    return [
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        # Prometheus scrapes these without credentials; everything else stays authorised.
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
    ]


def gate_flags(gates: tuple[str, ...]) -> list[str]:
    """``--feature-gates=A=true,B=true``, or nothing without gates (every gated component's form)."""
    return [f"--feature-gates={','.join(gates)}"] if gates else []
