"""kube-apiserver's command line, and the audit policy it is started with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hollowscale.cluster.components.shared import gate_flags
from hollowscale.cluster.pki import ClusterPKI

#: the Service network (the ``kubernetes`` Service's address is its first IP, in the serving certificate)
SERVICE_CIDR = "10.0.0.0/24"
#: the apiserver's audit policy: only what a run counts (creates of pods, bindings and Jobs), metadata only
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "Metadata", "verbs": ["create"],
         "resources": [{"group": "", "resources": ["pods", "pods/binding"]}, {"group": "batch", "resources": ["jobs"]}]},
        {"level": "None"},
    ],
}


@dataclass(frozen=True)
class ApiserverSettings:
    """What kube-apiserver's command line says.

    Attributes:
        binary: the kube-apiserver executable.
        port: its https port on 127.0.0.1.
        etcd_port: etcd's https client port.
        pki: the cluster's certificates and the service-account key pair.
        audit_policy: the file holding :data:`AUDIT_POLICY` (written by the caller).
        audit_log: where the audit log is appended (every apiserver process of the cluster).
        cert_dir: where the apiserver writes what it generates itself.
        profile_flags: the profile's extra flags (:class:`hollowscale.cluster.profiles.Profile`).
        feature_gates: ``Name=true`` gates it gets (empty: no ``--feature-gates``).
        runtime_config: ``--runtime-config`` value (the gang API group), or None.
    """

    binary: Path
    port: int
    etcd_port: int
    pki: ClusterPKI
    audit_policy: Path
    audit_log: Path
    cert_dir: Path
    profile_flags: tuple[str, ...] = ()
    feature_gates: tuple[str, ...] = ()
    runtime_config: str | None = None


def argv(s: ApiserverSettings) -> list[str]:
    """kube-apiserver's argv: etcd over TLS, Node and RBAC authorisation, service-account tokens,
    a kubelet client for real nodes, the narrow audit log, then the profile's and features' flags."""
    pki = s.pki
    return [
        str(s.binary),
        f"--etcd-servers=https://127.0.0.1:{s.etcd_port}",
        f"--etcd-cafile={pki.ca.cert}",
        f"--etcd-certfile={pki.apiserver_etcd_client.cert}",
        f"--etcd-keyfile={pki.apiserver_etcd_client.key}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={s.port}",
        f"--tls-cert-file={pki.apiserver.cert}",
        f"--tls-private-key-file={pki.apiserver.key}",
        f"--client-ca-file={pki.ca.cert}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.service_account_pub}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        # Loopback addresses are not valid Endpoints, so the `kubernetes` Service gets none:
        # nothing in this cluster reaches the apiserver through it (clients use the kubeconfig).
        "--endpoint-reconciler-type=none",
        # real nodes (logs, exec): the apiserver dials a kubelet at its InternalIP (the pod bridge's
        # gateway address; node names do not resolve) with its own client certificate
        f"--kubelet-client-certificate={pki.apiserver_kubelet_client.cert}",
        f"--kubelet-client-key={pki.apiserver_kubelet_client.key}",
        f"--kubelet-certificate-authority={pki.ca.cert}",
        "--kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP",
        f"--audit-policy-file={s.audit_policy}",
        f"--audit-log-path={s.audit_log}",
        "--audit-log-format=json",
        f"--cert-dir={s.cert_dir}",
        *s.profile_flags,
        *gate_flags(s.feature_gates),
        *([f"--runtime-config={s.runtime_config}"] if s.runtime_config else []),
    ]

