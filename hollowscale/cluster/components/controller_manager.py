"""kube-controller-manager's command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hollowscale.cluster.components.shared import gate_flags, secure_serving
from hollowscale.cluster.pki import ClusterPKI


@dataclass(frozen=True)
class ControllerManagerSettings:
    """What kube-controller-manager's command line says.

    Attributes:
        binary: the kube-controller-manager executable.
        kubeconfig: its own kubeconfig (user ``system:kube-controller-manager``).
        port: its https port on 127.0.0.1 (``/metrics`` for Prometheus).
        cert_dir: where it writes its self-signed serving certificate.
        pki: the cluster CA (it signs CSRs with it) and the service-account signing key.
        qps, burst: its client limits (the profile's: upstream 20/30 by default).
        feature_gates: ``Name=true`` gates it gets (empty: no ``--feature-gates``).
    """

    binary: Path
    kubeconfig: Path
    port: int
    cert_dir: Path
    pki: ClusterPKI
    qps: float
    burst: int
    feature_gates: tuple[str, ...] = ()


def argv(s: ControllerManagerSettings) -> list[str]:
    """kube-controller-manager's argv: leader election on, a service account per controller, the CA
    as the cluster's signer, the profile's client limits."""
    return [
        str(s.binary),
        f"--kubeconfig={s.kubeconfig}",
        *secure_serving(s.port, s.cert_dir, s.kubeconfig),
        f"--service-account-private-key-file={s.pki.service_account_key}",
        f"--root-ca-file={s.pki.ca.cert}",
        f"--cluster-signing-cert-file={s.pki.ca.cert}",
        f"--cluster-signing-key-file={s.pki.ca.key}",
        "--use-service-account-credentials=true",
        "--leader-elect=true",
        f"--kube-api-qps={s.qps:g}",
        f"--kube-api-burst={s.burst}",
        *gate_flags(s.feature_gates),
    ]
