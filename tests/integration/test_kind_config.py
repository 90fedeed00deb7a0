"""kind-config.yaml and kind-config-gpu.yaml, checked with kind v0.33.0's own code (no Docker needed).

``tests/tools/kindcheck`` is a small Go program built against ``sigs.k8s.io/kind v0.33.0`` (from the Go
module proxy; the binary is cached under ``cache_root()/tools``). It runs kind's strict v1alpha4 decoder,
its defaulting, conversion and validation, and renders the kubeadm config kind would write to each node
with the file's patches applied. Here that output is checked against what hollowscale needs: the scale
profile's limits, workers labelled and tainted like real nodes, the GPU passthrough mount, and flags that
the v1.36.3 control-plane binaries accept. A broken copy must fail and name what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hollowscale.cluster.binaries import binaries, go_binary
from hollowscale.cluster.profiles import get_profile
from hollowscale.cluster.realnode.layout import NODE_KIND_LABEL, NODE_KIND_VALUE, TAINT_EFFECT, TAINT_KEY, TAINT_VALUE
from hollowscale.paths import cache_root

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TOOL_SRC = REPO / "tests" / "tools" / "kindcheck"
CONFIGS = [REPO / "kind-config.yaml", REPO / "kind-config-gpu.yaml"]
GPU_MOUNT = {"hostPath": "/dev/null", "containerPath": "/var/run/nvidia-container-devices/all"}


@pytest.fixture(scope="module")
def kindcheck() -> Path:
    """The kindcheck binary, built once per source version (go.mod, go.sum, main.go) and cached."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((TOOL_SRC / name).read_bytes())
    binary = cache_root() / "tools" / f"kindcheck-{digest.hexdigest()[:16]}" / "kindcheck"
    if binary.exists():
        return binary
    go = go_binary()
    tmp = binary.with_name(f".kindcheck.{os.getpid()}")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    p = subprocess.run([go, "build", "-trimpath", "-o", str(tmp), "."], cwd=TOOL_SRC, env=env,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    if p.returncode != 0:
        pytest.fail(f"building {TOOL_SRC} failed (needs Go and the Go module proxy):\n{p.stderr[-3000:]}")
    tmp.replace(binary)
    return binary


def _check(kindcheck: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kindcheck), "-name", "hollowscale", *map(str, files)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def _docs(kubeadm: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(kubeadm) if d}


def _args(component: dict[str, Any] | None) -> dict[str, str]:
    return {a["name"]: a["value"] for a in (component or {}).get("extraArgs") or []}


@pytest.fixture(scope="module")
def reports(kindcheck: Path) -> dict[str, dict[str, Any]]:
    p = _check(kindcheck, *CONFIGS)
    assert p.returncode == 0, p.stderr
    return {Path(r["file"]).name: r for r in json.loads(p.stdout)}


def test_both_configs_pass_kinds_own_validation(reports: dict[str, dict[str, Any]]) -> None:
    assert set(reports) == {"kind-config.yaml", "kind-config-gpu.yaml"}
    for name, rep in reports.items():
        roles = [n["role"] for n in rep["nodes"]]
        assert roles.count("control-plane") == 1 and "worker" in roles, name
        for n in rep["nodes"]:
            assert n["kubernetesVersion"].startswith("v1.36."), (name, n["image"])
            assert "@sha256:" in n["image"], f"{name}: {n['name']} image not pinned by digest"


def test_control_plane_carries_the_scale_profile(reports: dict[str, dict[str, Any]]) -> None:
    scale = get_profile("scale")
    want_apiserver = dict(f.removeprefix("--").split("=", 1) for f in scale.apiserver_flags)
    for name, rep in reports.items():
        cp = next(n for n in rep["nodes"] if n["role"] == "control-plane")
        cc = _docs(cp["kubeadm"])["ClusterConfiguration"]
        assert cc["apiVersion"] == "kubeadm.k8s.io/v1beta4"  # kind converted the map-form extraArgs
        apiserver = _args(cc["apiServer"])
        assert {k: apiserver.get(k) for k in want_apiserver} == want_apiserver, name
        cm, sched = _args(cc["controllerManager"]), _args(cc["scheduler"])
        assert float(cm["kube-api-qps"]) == scale.controller_manager_qps, name
        assert int(cm["kube-api-burst"]) == scale.controller_manager_burst, name
        assert float(sched["kube-api-qps"]) == scale.scheduler_qps, name
        assert int(sched["kube-api-burst"]) == scale.scheduler_burst, name


def test_workers_are_labelled_and_tainted_like_real_nodes(reports: dict[str, dict[str, Any]]) -> None:
    taint = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": TAINT_EFFECT}
    for name, rep in reports.items():
        workers = [n for n in rep["nodes"] if n["role"] == "worker"]
        for w in workers:
            assert w["labels"] == {NODE_KIND_LABEL: NODE_KIND_VALUE}, (name, w["name"])
            reg = _docs(w["kubeadm"])["JoinConfiguration"]["nodeRegistration"]
            assert reg["taints"] == [taint], (name, w["name"])
            assert (
                _args({"extraArgs": reg["kubeletExtraArgs"]})["node-labels"] == f"{NODE_KIND_LABEL}={NODE_KIND_VALUE}"
            )
    gpu_workers = [n for n in reports["kind-config-gpu.yaml"]["nodes"] if GPU_MOUNT in (n["extraMounts"] or [])]
    assert [n["role"] for n in gpu_workers] == ["worker"]
    plain = reports["kind-config.yaml"]["nodes"]
    assert not any(GPU_MOUNT in (n["extraMounts"] or []) for n in plain)


def test_every_flag_exists_in_the_control_plane_binaries(reports: dict[str, dict[str, Any]]) -> None:
    """kind passes extraArgs to kubeadm unchecked: a misspelt flag would only fail in the node."""
    bins = binaries()
    if bins.missing():
        pytest.fail(f"control-plane binary missing: {bins.missing()[0]} -- run `make setup` first", pytrace=False)
    helps = {
        "apiServer": subprocess.run([str(bins.kube_apiserver), "--help"], capture_output=True, text=True).stdout,
        "controllerManager": subprocess.run([str(bins.kube_controller_manager), "--help"], capture_output=True,
                                            text=True).stdout,
        "scheduler": subprocess.run([str(bins.kube_scheduler), "--help"], capture_output=True, text=True).stdout,
    }  # fmt: skip
    checked = 0
    for name, rep in reports.items():
        cp = next(n for n in rep["nodes"] if n["role"] == "control-plane")
        cc = _docs(cp["kubeadm"])["ClusterConfiguration"]
        for component, text in helps.items():
            for flag in _args(cc.get(component)):
                assert f"--{flag} " in text or f"--{flag}=" in text, f"{name}: {component} has no --{flag}"
                checked += 1
    assert checked >= 2 * 8  # 3 apiserver + 2 controller-manager + 2 scheduler ours, plus kind's own


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (("labels:", "labelz:"), "field labelz not found in type v1alpha4.Node"),
        (("role: worker", "role: wroker"), '"wroker" is not a valid node role'),
        (("kind: JoinConfiguration", "kind: JoinConfig"), 'kind "JoinConfig"'),
        (("apiVersion: kind.x-k8s.io/v1alpha4", "apiVersion: kind.x-k8s.io/v1alpha3"), "unknown apiVersion"),
    ],
)
def test_a_broken_copy_fails_naming_the_problem(
    kindcheck: Path, tmp_path: Path, edit: tuple[str, str], named: str
) -> None:
    for src in CONFIGS:
        text = src.read_text()
        assert edit[0] in text, f"{src.name} no longer has {edit[0]!r}: update this test"
        broken = tmp_path / src.name
        broken.write_text(text.replace(edit[0], edit[1]))
        p = _check(kindcheck, broken)
        assert p.returncode == 1, (src.name, p.stdout)
        assert named in p.stderr and str(broken) in p.stderr, p.stderr
