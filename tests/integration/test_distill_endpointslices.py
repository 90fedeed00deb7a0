"""Teachers discovered from a Service's EndpointSlices on the real local control plane.

The Service has no selector and we write its EndpointSlices ourselves, pointing at real
teacher processes on this machine; adding and deleting slices while the reader runs is
exactly what the EndpointSlice controller does when teacher pods come and go. The API server
refuses loopback addresses in EndpointSlices (as it would for a pod IP), and load in this project
only ever targets loopback, so the slices carry FQDN addresses (``teacher-a.hollowscale.test``)
that the discovery's ``host_aliases`` maps to 127.0.0.1, as a pod's ``hostAliases`` would.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from kubernetes import client

from distill.data import StreamSettings, iter_epoch, make_split, synthetic_dataset
from distill.discovery import EndpointSliceSettings, EndpointSliceTeachers
from distill.models import ConvNet, NetConfig, load_checkpoint, save_checkpoint
from distill.procs import TeacherProcess
from distill.reader import DistillReader, ReaderSettings
from kubecore.config import client_configuration

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
TINY = NetConfig(channels=(4, 8), convs_per_stage=1, hidden=16)



@pytest.fixture
def teachers(tmp_path: Path) -> Iterator[tuple[Path, list[TeacherProcess]]]:
    torch.manual_seed(0)
    ckpt = tmp_path / "tiny.pt"
    save_checkpoint(ConvNet(TINY), ckpt)
    ts = [TeacherProcess(ckpt, tmp_path, f"t{i}") for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.wait_ready(120)
    yield ckpt, ts
    for t in ts:
        t.stop()


ALIASES = {"teacher-a.hollowscale.test": "127.0.0.1", "teacher-b.hollowscale.test": "127.0.0.1"}


def _slice(name: str, service: str, fqdn: str, port: int) -> client.V1EndpointSlice:
    return client.V1EndpointSlice(
        metadata=client.V1ObjectMeta(
            name=name,
            labels={
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "hollowscale-tests",
            },
        ),
        address_type="FQDN",
        ports=[client.DiscoveryV1EndpointPort(name="http", port=port, protocol="TCP")],
        endpoints=[client.V1Endpoint(addresses=[fqdn], conditions=client.V1EndpointConditions(ready=True))],
    )


def test_reader_follows_endpointslices_while_training(
    cluster: Any, teachers: tuple[Path, list[TeacherProcess]]
) -> None:
    ckpt, (a, b) = teachers
    api_client = client.ApiClient(client_configuration(str(cluster.kubeconfig)))
    core = client.CoreV1Api(api_client)
    disc = client.DiscoveryV1Api(api_client)
    ns = f"distill-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        core.create_namespaced_service(
            ns,
            client.V1Service(
                metadata=client.V1ObjectMeta(name="teachers"),
                spec=client.V1ServiceSpec(ports=[client.V1ServicePort(name="http", port=8501)]),
            ),
        )
        disc.create_namespaced_endpoint_slice(ns, _slice("teachers-a", "teachers", "teacher-a.hollowscale.test", a.port))

        sp = make_split(synthetic_dataset(n_train=2600, n_test=10), labelled=200)
        stream = list(iter_epoch(sp, StreamSettings(batch_size=32, labelled_per_batch=8), seed=0, epoch=0))
        net = load_checkpoint(ckpt).build()
        source = EndpointSliceTeachers(EndpointSliceSettings(ns, "teachers", str(cluster.kubeconfig), "http",
                                                             host_aliases=ALIASES))
        got = []
        marks: dict[str, int] = {}
        with DistillReader(stream, source, ReaderSettings(window=8)) as r:
            for i, (batch, logits) in enumerate(r):
                got.append((batch, logits))
                if i == 10:
                    disc.create_namespaced_endpoint_slice(ns, _slice("teachers-b", "teachers", "teacher-b.hollowscale.test", b.port))
                    deadline = time.monotonic() + 30
                    while b.url not in r.live_teachers() and time.monotonic() < deadline:
                        time.sleep(0.05)
                    assert b.url in r.live_teachers(), "added EndpointSlice never reached the reader"
                if i == 50:
                    disc.delete_namespaced_endpoint_slice("teachers-a", ns)
                    deadline = time.monotonic() + 30
                    while a.url in r.live_teachers() and time.monotonic() < deadline:
                        time.sleep(0.05)
                    assert a.url not in r.live_teachers(), "deleted EndpointSlice still in rotation"
                    marks["a"] = r.teachers[a.url].samples_ok
                time.sleep(0.01)
        st = r.result_json()
    finally:
        core.delete_namespace(ns)
    assert [bt.step for bt, _ in got] == [bt.step for bt in stream]
    with torch.inference_mode():
        for bt, logits in got:
            np.testing.assert_allclose(logits, net(torch.from_numpy(bt.x)).numpy(), rtol=1e-4, atol=1e-5)
    assert st["lost_samples"] == 0 and st["duplicate_results_dropped"] == 0
    assert st["teachers"][b.url]["samples_ok"] > 0
    assert st["teachers"][a.url]["samples_ok"] - marks["a"] <= 2 * 32
    kinds = [(e["event"], e["teacher"]) for e in st["events"]]
    assert ("added", b.url) in kinds and ("removed", a.url) in kinds
