"""Prometheus scrapes the apiserver with a kubeconfig's embedded client certificate (the existing and kind
backends' target): kubecore.config keeps that key in memory, so the Prometheus of the run gets files of its
own for it, in its folder, and they go when it stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from hollowscale.backends.base import apiserver_target
from hollowscale.cluster.local import ClusterInfo
from hollowscale.measure.prom import PrometheusServer
from kubecore.config import in_memory, load_endpoint

pytestmark = pytest.mark.integration


def test_prometheus_scrapes_the_apiserver_with_in_memory_keys_and_their_files_go(cluster: ClusterInfo,
                                                                                    tmp_path: Path) -> None:
    endpoint = load_endpoint(cluster.kubeconfig)  # the session cluster's admin kubeconfig embeds its keys
    assert in_memory(endpoint.key_file) and in_memory(endpoint.cert_file) and in_memory(endpoint.ca_file)
    prom = PrometheusServer(tmp_path / "prometheus", apiserver_target(endpoint), interval_s=1.0)
    try:
        prom.start()
        assert len(prom.shared) == 3 and all(p.parent == tmp_path / "prometheus" / "tls" for p in prom.shared)
        assert prom.wait_scraped(30.0) == {"apiserver": "up"}
    finally:
        prom.stop()
    assert not (tmp_path / "prometheus" / "tls").exists()
