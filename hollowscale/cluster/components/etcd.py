"""etcd's command line: one member on 127.0.0.1, TLS clients, plain-http peer and metrics listeners."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EtcdSettings:
    """What etcd's command line says.

    Attributes:
        binary: the etcd executable.
        data_dir: its data directory (inside the cluster folder).
        client_port: https client port (the apiserver's ``--etcd-servers``).
        peer_port: http peer port (one member: never dialled, but etcd needs one).
        metrics_port: http ``/metrics`` and ``/health`` port (Prometheus, the start-up wait).
        cert, key: its serving certificate (also a client certificate: etcd checks its own peers).
        ca: the cluster CA that signs the apiserver's client certificate.
    """

    binary: Path
    data_dir: Path
    client_port: int
    peer_port: int
    metrics_port: int
    cert: Path
    key: Path
    ca: Path


def argv(s: EtcdSettings) -> list[str]:
    """etcd's argv: a single-member cluster named ``hollowscale``, client certificate auth, an 8 GiB
    backend quota (etcd's default is 2 GiB) and warnings only in its log."""
    client = f"https://127.0.0.1:{s.client_port}"
    peer = f"http://127.0.0.1:{s.peer_port}"
    return [
        str(s.binary),
        "--name=hollowscale",
        f"--data-dir={s.data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=hollowscale={peer}",
        "--initial-cluster-state=new",
        f"--listen-metrics-urls=http://127.0.0.1:{s.metrics_port}",
        f"--cert-file={s.cert}",
        f"--key-file={s.key}",
        f"--trusted-ca-file={s.ca}",
        "--client-cert-auth=true",
        "--quota-backend-bytes=8589934592",
        "--log-level=warn",
    ]
