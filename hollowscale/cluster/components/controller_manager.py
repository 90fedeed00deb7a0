"""kube-controller-manager's command line."""

from __future__ import annotations

from dataclasses import dataclass

from hollowscale.cluster.components.shared import ServedComponentSettings, gate_flags, secure_serving
from hollowscale.cluster.pki import ClusterPKI


@dataclass(frozen=True, kw_only=True)
class ControllerManagerSettings(ServedComponentSettings):
    """What kube-controller-manager's command line says: the shared settings (upstream client limits
    20/30 in the default profile) and ``pki``, the cluster CA it signs CSRs with and the
    service-account signing key."""

    pki: ClusterPKI


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
