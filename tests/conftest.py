"""Shared fixtures.

``cluster`` brings ONE real local control plane up for the whole test session (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler as processes, built from the Go module
proxy by ``make setup``) and tears it down at the end, also when tests fail or the run is
interrupted.  There is no fake API server anywhere in this suite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hollowscale.cluster.binaries import binaries
from hollowscale.cluster.local import ClusterInfo, LocalCluster

ARTIFACTS = Path(__file__).parent / ".artifacts"


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterInfo]:
    """A running local cluster (default profile) shared by every integration test."""
    missing = binaries().missing()
    if missing:
        pytest.fail(f"control-plane binary missing: {missing[0]} -- run `make setup` first", pytrace=False)
    cluster_dir = Path(os.environ.get("HOLLOWSCALE_TEST_CLUSTER_DIR") or tmp_path_factory.mktemp("cluster"))
    local = LocalCluster(cluster_dir / "cp", profile="default")
    info = local.up(timeout_s=180)
    try:
        yield info
    finally:
        logs = cluster_dir / "cp" / "logs"
        if logs.exists():  # keep the component logs for post-mortems
            ARTIFACTS.mkdir(exist_ok=True)
            target = ARTIFACTS / "cluster-logs"
            target.mkdir(exist_ok=True)
            for log in logs.iterdir():
                (target / log.name).write_bytes(log.read_bytes())
        local.down()


@pytest.fixture(scope="session")
def kubectl(cluster: ClusterInfo) -> list[str]:
    """argv prefix for the cached kubectl, pointed at the test cluster."""
    return [str(binaries().kubectl), f"--kubeconfig={cluster.kubeconfig}"]
