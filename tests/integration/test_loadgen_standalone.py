"""Locust on its own against the real cluster: single process and --processes 2 (master + workers), and
a kubeconfig that authenticates with a bearer token (a ServiceAccount token from the TokenRequest API)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kubecore.config import load_endpoint
from kubecore.watch import session_for
from loadgen.spec import LoadSpec, parse_load_spec
from loadgen.workloads import LABEL_INSTANCE, LABEL_WORKLOAD, WorkloadMix

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


@pytest.mark.parametrize("processes", [1, 2])
def test_locust_alone_follows_the_curve(cluster, tmp_path: Path, processes: int) -> None:  # type: ignore[no-untyped-def]
    ns = f"loadgen-alone-{processes}"
    spec = {"name": "alone", "namespace": ns,
            "workloads": [{"name": "tiny", "kind": "Job", "run_duration": "1s",
                           "roles": [{"name": "w", "resources": {"cpu": "10m"}}]},
                          {"name": "solo", "kind": "Pod", "share": 0.5, "run_duration": "1s",
                           "roles": [{"name": "p", "resources": {"cpu": "10m"}}]}],
            "arrival": {"curve": "constant", "rate": 4, "duration_s": 8, "per_user_rate": 1}}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(json.dumps(spec))  # JSON is valid YAML
    argv = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen" / "locustfile.py"), "--headless",
            "--kubeconfig", str(cluster.kubeconfig), "--load-spec", str(spec_file), "--run-id", f"alone{processes}",
            "--csv", str(tmp_path / "l"), "--only-summary"]
    if processes > 1:
        argv += ["--processes", str(processes)]
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {(row["Type"], row["Name"]): row for row in csv.DictReader((tmp_path / "l_stats.csv").open())}
    creates = sum(int(v["Request Count"]) for (t, _), v in rows.items() if t == "POST")
    assert sum(int(v["Failure Count"]) for (t, _), v in rows.items() if t == "POST") == 0
    # 4/s for 8 s = 32, users start at random phases: never above the curve (from above only; a loaded
    # machine's Locust falls behind it, which says nothing about the pacing)
    assert 0 < creates <= 40, creates
    ep = load_endpoint(cluster.kubeconfig)
    s = session_for(ep, 1)
    sel = {"labelSelector": f"hollowscale.io/run=alone{processes}"}
    jobs = orjson.loads(s.get(f"{ep.server}/apis/batch/v1/namespaces/{ns}/jobs", params=sel, timeout=30).content)["items"]
    bare = [p for p in orjson.loads(s.get(f"{ep.server}/api/v1/namespaces/{ns}/pods", params=sel, timeout=30).content)["items"]
            if not p["metadata"].get("ownerReferences")]
    # Locust kills users at the end of the run (stop_timeout 0): a create already sent may succeed on
    # the server without ever being recorded, at most one per user, and never the other way round.
    assert creates <= len(jobs) + len(bare) <= creates + 4
    assert {_workload(j) for j in jobs} == {"tiny"} and {_workload(p) for p in bare} == {"solo"}
    streams = _assert_replays(parse_load_spec(spec, str(spec_file)), jobs + bare)
    assert streams == 4, streams  # rate 4 at 1 per user: the curve's 4 users all created
    s.delete(f"{ep.server}/api/v1/namespaces/{ns}", timeout=30)


def _workload(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["labels"][LABEL_WORKLOAD])


def _assert_replays(spec: LoadSpec, objects: list[dict[str, Any]]) -> int:
    """Every user draws its mix from its own stream (seed and stream name, in the instance label), so the
    draw is random across runs but can be replayed: each stream's instances are numbered 1..n with none
    missing, and the n-th is the workload a fresh mix on that stream draws n-th. Returns the number of streams.  (How the draws follow the
    shares is a unit test over thousands of draws; 32 draws here would only check that statistically.)"""
    by_stream: dict[str, dict[int, str]] = {}
    for obj in objects:
        workload = _workload(obj)
        stream, number = obj["metadata"]["labels"][LABEL_INSTANCE].removeprefix(f"{workload}-").rsplit("-", 1)
        by_stream.setdefault(stream, {})[int(number)] = workload
    for stream, drawn in by_stream.items():
        assert sorted(drawn) == list(range(1, len(drawn) + 1)), (stream, sorted(drawn))
        mix = WorkloadMix(spec, stream=stream)
        assert [mix.next_instance()[0].workload for _ in drawn] == [drawn[n] for n in sorted(drawn)], stream
    return len(by_stream)


def _token_kubeconfig(cluster, tmp_path: Path, name: str) -> Path:  # type: ignore[no-untyped-def]
    """A kubeconfig with a ServiceAccount's bearer token (bound to cluster-admin) and the cluster's CA."""
    ep = load_endpoint(cluster.kubeconfig)
    s = session_for(ep, 1)
    headers = {"Content-Type": "application/json"}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": "default"}}
    r = s.post(f"{ep.server}/api/v1/namespaces/default/serviceaccounts", data=orjson.dumps(sa), headers=headers,
               timeout=30)
    assert r.status_code in (201, 409), r.text
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}]}
    r = s.post(f"{ep.server}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", data=orjson.dumps(binding),
               headers=headers, timeout=30)
    assert r.status_code in (201, 409), r.text
    req = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    r = s.post(f"{ep.server}/api/v1/namespaces/default/serviceaccounts/{name}/token", data=orjson.dumps(req),
               headers=headers, timeout=30)
    assert r.status_code == 201, r.text
    token = r.json()["status"]["token"]
    # the cluster's CA file (Locust is another process: the admin endpoint's embedded CA is in memory)
    cluster_entry: dict[str, object] = {"server": ep.server, "certificate-authority": str(cluster.ca_file)}
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "sa",
           "clusters": [{"name": "c", "cluster": cluster_entry}], "users": [{"name": name, "user": {"token": token}}],
           "contexts": [{"name": "sa", "context": {"cluster": "c", "user": name}}]}
    path = tmp_path / "token-kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_locust_alone_with_a_bearer_token(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Creates carry the token (no client certificate in this kubeconfig): every POST is a 201."""
    kubeconfig = _token_kubeconfig(cluster, tmp_path, "loadgen-token")
    token_ep = load_endpoint(kubeconfig)
    assert token_ep.cert_file is None and token_ep.token
    ns = "loadgen-token"
    spec = {"name": "token", "namespace": ns,
            "workloads": [{"name": "tiny", "kind": "Pod", "run_duration": "1s",
                           "roles": [{"name": "p", "resources": {"cpu": "10m"}}]}],
            "arrival": {"curve": "constant", "rate": 2, "duration_s": 4, "per_user_rate": 1}}
    spec_file = tmp_path / "loadspec.json"
    spec_file.write_text(json.dumps(spec))
    argv = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen" / "locustfile.py"), "--headless",
            "--kubeconfig", str(kubeconfig), "--load-spec", str(spec_file), "--run-id", "token1",
            "--csv", str(tmp_path / "l"), "--only-summary", "--no-latency-events"]
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = [row for row in csv.DictReader((tmp_path / "l_stats.csv").open()) if row["Type"] == "POST"]
    creates = sum(int(row["Request Count"]) for row in rows)
    assert creates >= 4 and sum(int(row["Failure Count"]) for row in rows) == 0, rows
    ep = load_endpoint(cluster.kubeconfig)
    s = session_for(ep, 1)
    pods = orjson.loads(s.get(f"{ep.server}/api/v1/namespaces/{ns}/pods",
                              params={"labelSelector": "hollowscale.io/run=token1"}, timeout=30).content)["items"]
    assert creates <= len(pods) <= creates + 2
    s.delete(f"{ep.server}/api/v1/namespaces/{ns}", timeout=30)
