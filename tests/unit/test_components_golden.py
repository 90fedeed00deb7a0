"""Golden command lines: every component's argv, exactly, for fixed settings (KWOK's golden tests of
each runtime's command lines).

Each :mod:`hollowscale.cluster.components` module is called with settings of fixed paths and ports,
once per case that changes its flags (profile, gang gates, fake GPUs, DRA GPUs), and the result is compared with
``tests/fixtures/components/<component>.json``: a changed flag fails here and shows up as a diff of a
readable file.  Paths that depend on the machine (this Python) are written as ``<python>``.

Regenerate after an intended change with ``HOLLOWSCALE_UPDATE_GOLDEN=1 pytest
tests/unit/test_components_golden.py`` and review the diff of the golden files.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from hollow.dra import GpuSpec
from hollowscale.cluster import gang
from hollowscale.cluster.components import (
    apiserver,
    containerd,
    controller_manager,
    deviceplugin,
    draplugin,
    etcd,
    kubelet,
    kueue,
    scheduler,
)
from hollowscale.cluster.kueue import KueueLayout
from hollowscale.cluster.pki import CertPair, ClusterPKI
from hollowscale.cluster.profiles import get_profile
from hollowscale.cluster.realnode.layout import NodeLayout, PodNetwork, RealNodeSettings

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "components"
UPDATE = os.environ.get("HOLLOWSCALE_UPDATE_GOLDEN") == "1"
CLUSTER = Path("/c")
BIN = Path("/cache/bin")
GATES = tuple(f"{g}=true" for g in gang.GANG_GATES)


def _pair(stem: str) -> CertPair:
    return CertPair(CLUSTER / "pki" / f"{stem}.crt", CLUSTER / "pki" / f"{stem}.key")


PKI = ClusterPKI(ca=_pair("ca"), apiserver=_pair("apiserver"), etcd_server=_pair("etcd-server"),
                 apiserver_etcd_client=_pair("apiserver-etcd-client"), admin=_pair("admin"),
                 controller_manager=_pair("controller-manager"), scheduler=_pair("scheduler"),
                 apiserver_kubelet_client=_pair("apiserver-kubelet-client"),
                 service_account_key=CLUSTER / "pki" / "sa.key", service_account_pub=CLUSTER / "pki" / "sa.pub")


def _apiserver(profile: str, gated: bool) -> list[str]:
    return apiserver.argv(apiserver.ApiserverSettings(
        binary=BIN / "kube-apiserver", port=6443, etcd_port=2379, pki=PKI, audit_policy=CLUSTER / "audit-policy.yaml",
        audit_log=CLUSTER / "logs" / "audit.log", cert_dir=CLUSTER / "pki" / "apiserver-generated",
        profile_flags=get_profile(profile).apiserver_flags, feature_gates=GATES if gated else (),
        runtime_config=gang.GANG_RUNTIME_CONFIG if gated else None))


def _controller_manager(profile: str, gated: bool) -> list[str]:
    p = get_profile(profile)
    return controller_manager.argv(controller_manager.ControllerManagerSettings(
        binary=BIN / "kube-controller-manager", kubeconfig=CLUSTER / "controller-manager.kubeconfig", port=10257,
        cert_dir=CLUSTER / "pki" / "kube-controller-manager", pki=PKI, qps=p.controller_manager_qps,
        burst=p.controller_manager_burst, feature_gates=GATES if gated else ()))


def _scheduler_settings(profile: str, gated: bool) -> scheduler.SchedulerSettings:
    p = get_profile(profile)
    return scheduler.SchedulerSettings(
        binary=BIN / "kube-scheduler", kubeconfig=CLUSTER / "scheduler.kubeconfig",
        config=CLUSTER / "scheduler-config.yaml", port=10259, cert_dir=CLUSTER / "pki" / "kube-scheduler",
        qps=p.scheduler_qps, burst=p.scheduler_burst, feature_gates=GATES if gated else ())


def _node(fake_gpus: int, dra_gpus: int = 0) -> dict[str, Any]:
    layout, net = NodeLayout(CLUSTER, 1), PodNetwork(bridge="hsbr-0123abcd", cidr="10.89.0.0/16")
    out: dict[str, Any] = {"containerd": containerd.argv(Path("/usr/bin/containerd"), layout),
                           "kubelet": kubelet.argv(BIN / "kubelet", layout, net)}
    if fake_gpus:
        out["deviceplugin"] = [a.replace(sys.executable, "<python>") for a in deviceplugin.argv(
            layout, RealNodeSettings(count=1, fake_gpus=fake_gpus, gpu_model="H100"))]
    if dra_gpus:
        spec = GpuSpec(expose="dra", model="a100-40gb", sharing="memory")
        out["draplugin"] = [a.replace(sys.executable, "<python>") for a in draplugin.argv(
            layout, RealNodeSettings(count=1, dra_gpus=dra_gpus, dra=spec))]
    return out


def _kueue(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(kueue.shutil, "which", lambda _name: None)  # /usr/bin/unshare wherever it is here
    layout = KueueLayout(CLUSTER / "kueue")
    own = kueue.argv(BIN / "kueue", layout)
    return {"kueue": own, "in its mount namespace": kueue.namespaced_argv(own, layout)}


CASES: dict[str, dict[str, Any]] = {
    "etcd": {"default": etcd.argv(etcd.EtcdSettings(
        binary=BIN / "etcd", data_dir=CLUSTER / "etcd", client_port=2379, peer_port=2380, metrics_port=2381,
        cert=PKI.etcd_server.cert, key=PKI.etcd_server.key, ca=PKI.ca.cert))},
    "kube-apiserver": {f"{profile}{' + gang' if gated else ''}": _apiserver(profile, gated)
                       for profile in ("default", "scale") for gated in (False, True)},
    "kube-controller-manager": {f"{profile}{' + gang' if gated else ''}": _controller_manager(profile, gated)
                                for profile in ("default", "scale") for gated in (False, True)},
    "kube-scheduler": {f"{profile}{' + gang' if gated else ''}": {
        "argv": scheduler.argv(_scheduler_settings(profile, gated)),
        "config": scheduler.config(_scheduler_settings(profile, gated))}
        for profile in ("default", "scale") for gated in (False, True)},
    "real-node": {"no GPUs": _node(0), "4 fake GPUs": _node(4), "2 DRA GPUs, memory sharing": _node(0, 2)},
}


def _check(name: str, got: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(got, indent=2) + "\n"
    if UPDATE:
        path.write_text(text)
    assert path.read_text() == text, f"{name}: the command line changed; see the docstring to regenerate {path}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_command_lines_match_the_golden_files(name: str) -> None:
    _check(name, CASES[name])


def test_kueue_command_line_matches_the_golden_file(monkeypatch: pytest.MonkeyPatch) -> None:
    _check("kueue", _kueue(monkeypatch))


def test_apiserver_audit_policy_counts_only_creates_of_pods_bindings_and_jobs() -> None:
    [counted, rest] = apiserver.AUDIT_POLICY["rules"]
    assert counted["verbs"] == ["create"] and rest == {"level": "None"}
    assert counted["resources"] == [{"group": "", "resources": ["pods", "pods/binding"]},
                                    {"group": "batch", "resources": ["jobs"]}]
