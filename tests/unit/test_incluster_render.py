"""Rendering ``deploy/hollowscale`` for an in-cluster run (``kubectl kustomize`` of the cached kubectl).

The shipped base (a driver with a pod network), the local real-nodes overlay and the run's own
kustomization over it; the target RBAC (least privilege, renamed per run); the shard and port
arithmetic of the agent's command, run by a real shell.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hollowscale.cluster.binaries import binaries
from hollowscale.placements.incluster.network import KIND_OVERLAY, agent_services
from hollowscale.placements.incluster.render import (
    BASE,
    LOCAL_OVERLAY,
    Ports,
    RunManifestSettings,
    kustomize,
    place_target_objects,
    service_account,
    split_image,
    token_kubeconfig,
    without_secret_data,
    write_driver_kustomization,
    write_target_kustomization,
)
from kubecore.config import load_endpoint
from kubecore.namespaces import RUN_LABEL

WORKLOADS = ("StatefulSet", "Deployment")


@pytest.fixture(scope="module", autouse=True)
def _kubectl() -> None:
    if not binaries().kubectl.exists():
        pytest.fail(f"kubectl missing at {binaries().kubectl}: run `make setup`", pytrace=False)


def settings(**changes: Any) -> RunManifestSettings:
    base: dict[str, Any] = dict(
        namespace="hs-driver", run_id="20261201-120000-incluster", shards=3, locust_workers=2,
        agent_image="hollowscale.local/agent:0.1.0", prometheus_image="hollowscale.local/prometheus:2.42.0-ds",
        ports=Ports(agent_base=20000, locust_master=20100, locust_web=20101, prometheus=20102),
        target_server="127.0.0.1:6443", load_namespaces=("load-a", "load-b"), agent_args=("--heartbeat-factor", "2"))
    base.update(changes)
    return RunManifestSettings(**base)


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in WORKLOADS]


def env_of(workload: dict[str, Any]) -> dict[str, Any]:
    c = workload["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def render_run(tmp_path: Path, s: RunManifestSettings,
               extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    pools = {"pools": [{"name": "p", "count": 5}]}
    load = {"name": "x", "namespace": "load-a"}
    folder = write_driver_kustomization(tmp_path / "driver", s, pools, load,
                                        {"hollowscale-target-agent": "agent-kubeconfig",
                                         "hollowscale-target-load": "load-kubeconfig"},
                                        {"token": "t0k", "ca.crt": "CA", "server": s.target_server}, extra)
    return kustomize(folder)


@pytest.mark.integration  # starts a process
def test_base_is_for_a_pod_network_and_needs_no_driver_api() -> None:
    docs = kustomize(BASE)
    assert {d["kind"] for d in docs} >= {"ServiceAccount", "Service", "StatefulSet", "Deployment", "ConfigMap"}
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
    for sa in by_kind(docs, "ServiceAccount").values():
        assert sa["automountServiceAccountToken"] is False
    for w in workloads(docs):
        pod = w["spec"]["template"]["spec"]
        assert "hostNetwork" not in pod and pod["automountServiceAccountToken"] is False, w["metadata"]["name"]
    assert env_of(by_kind(docs, "StatefulSet")["hollow-agent"])["AGENT_PORT_STEP"] == "0"
    assert env_of(by_kind(docs, "Deployment")["locust-worker"])["LOCUST_MASTER_HOST"] == "locust-master"
    assert by_kind(docs, "Service")["hollow-agent"]["spec"]["clusterIP"] == "None"  # one DNS name per shard
    # an early SIGTERM (a run interrupted while they start) must end them, not wait out the grace period
    assert by_kind(docs, "StatefulSet")["hollow-agent"]["spec"]["template"]["spec"]["shareProcessNamespace"] is True
    for name in ("locust-master", "locust-worker"):
        assert by_kind(docs, "Deployment")[name]["spec"]["template"]["spec"]["shareProcessNamespace"] is True


@pytest.mark.integration  # starts a process
def test_local_overlay_runs_on_real_nodes_host_network_loopback() -> None:
    docs = kustomize(LOCAL_OVERLAY)
    assert len(workloads(docs)) == 4
    for w in workloads(docs):
        pod = w["spec"]["template"]["spec"]
        assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert pod["nodeSelector"] == {"hollowscale.io/node-kind": "real"}
        assert {"key": "hollowscale.io/real-node", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        assert pod["containers"][0]["imagePullPolicy"] == "Never"
    agent = env_of(by_kind(docs, "StatefulSet")["hollow-agent"])
    assert agent["AGENT_PORT_STEP"] == "1" and agent["HOLLOW_METRICS_HOST"] == "127.0.0.1"
    deps = by_kind(docs, "Deployment")
    assert env_of(deps["locust-master"])["LOCUST_BIND_HOST"] == "127.0.0.1"
    assert env_of(deps["locust-worker"])["LOCUST_MASTER_HOST"] == "127.0.0.1"
    assert env_of(deps["prometheus"])["PROMETHEUS_LISTEN"].startswith("127.0.0.1:")


@pytest.mark.integration  # starts a process
def test_run_kustomization_sets_namespace_label_replicas_ports_images(tmp_path: Path) -> None:
    s = settings()
    docs = render_run(tmp_path, s)
    for d in docs:
        assert d["metadata"]["namespace"] == s.namespace, d["metadata"]["name"]
        assert d["metadata"]["labels"][RUN_LABEL] == s.run_id, d["metadata"]["name"]
    for w in workloads(docs):
        assert w["spec"]["template"]["metadata"]["labels"][RUN_LABEL] == s.run_id
        assert RUN_LABEL not in w["spec"]["selector"]["matchLabels"]  # selectors stay as shipped
    sts = by_kind(docs, "StatefulSet")["hollow-agent"]
    deps = by_kind(docs, "Deployment")
    assert sts["spec"]["replicas"] == 3 and deps["locust-worker"]["spec"]["replicas"] == 2
    agent = env_of(sts)
    assert (agent["HOLLOW_REPLICAS"], agent["AGENT_METRICS_PORT"], agent["AGENT_PORT_STEP"]) == ("3", "20000", "1")
    assert sts["spec"]["template"]["spec"]["containers"][0]["args"] == ["--heartbeat-factor", "2"]
    master = env_of(deps["locust-master"])
    assert (master["LOCUST_MASTER_PORT"], master["LOCUST_WEB_PORT"], master["LOCUST_RUN_ID"]) == \
        ("20100", "20101", s.run_id)
    assert env_of(deps["locust-worker"])["LOCUST_MASTER_PORT"] == "20100"
    assert env_of(deps["prometheus"])["PROMETHEUS_LISTEN"] == "127.0.0.1:20102"
    images = {w["spec"]["template"]["spec"]["containers"][0]["image"] for w in workloads(docs)}
    assert images == {s.agent_image, s.prometheus_image}
    # every Secret and ConfigMap a pod mounts is rendered (generated names carry their hash)
    secrets, maps = by_kind(docs, "Secret"), by_kind(docs, "ConfigMap")
    for w in workloads(docs):
        for v in w["spec"]["template"]["spec"].get("volumes", []):
            if "secret" in v:
                assert v["secret"]["secretName"] in secrets
            if "configMap" in v:
                assert v["configMap"]["name"] in maps
    pools = next(m for n, m in maps.items() if n.startswith("hollow-pools"))
    assert yaml.safe_load(pools["data"]["pools.yaml"]) == {"pools": [{"name": "p", "count": 5}]}
    spec = next(m for n, m in maps.items() if n.startswith("locust-loadspec"))
    assert json.loads(spec["data"]["loadspec.json"]) == {"name": "x", "namespace": "load-a"}
    prom = yaml.safe_load(maps["prometheus-config"]["data"]["prometheus.yml"])
    targets = {j["job_name"]: j["static_configs"][0]["targets"] for j in prom["scrape_configs"]}
    assert targets == {"apiserver": ["127.0.0.1:6443"],
                       "hollow-agents": ["127.0.0.1:20000", "127.0.0.1:20001", "127.0.0.1:20002"]}
    assert set(next(v for n, v in secrets.items() if n.startswith("hollowscale-target-metrics"))["data"]) == \
        {"token", "ca.crt", "server"}
    kept = without_secret_data(docs)
    assert all(set(d["data"].values()) == {"(left out)"} for d in kept if d["kind"] == "Secret")


@pytest.mark.integration  # starts a process
def test_run_kustomization_over_the_base_without_host_ports(tmp_path: Path) -> None:
    docs = render_run(tmp_path, settings(ports=None))
    assert all("hostNetwork" not in w["spec"]["template"]["spec"] for w in workloads(docs))
    prom = yaml.safe_load(by_kind(docs, "ConfigMap")["prometheus-config"]["data"]["prometheus.yml"])
    agents = next(j for j in prom["scrape_configs"] if j["job_name"] == "hollow-agents")
    assert agents["static_configs"][0]["targets"] == [f"hollow-agent-{i}.hollow-agent:8080" for i in range(3)]


@pytest.mark.integration  # starts a process
def test_kind_overlay_keeps_the_pod_network_on_the_workers_with_node_ports(tmp_path: Path) -> None:
    s = settings(ports=None, overlay=KIND_OVERLAY, target_server="kubernetes.default.svc:443")
    docs = render_run(tmp_path, s, agent_services(s.shards))
    for w in workloads(docs):
        pod = w["spec"]["template"]["spec"]
        assert "hostNetwork" not in pod and pod["nodeSelector"] == {"hollowscale.io/node-kind": "real"}
        assert {"key": "hollowscale.io/real-node", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        assert pod["containers"][0]["imagePullPolicy"] == "Never"  # loaded into the workers, no registry
    spread = by_kind(docs, "StatefulSet")["hollow-agent"]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = spread["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {"app.kubernetes.io/name": "hollow-agent"}
    services = by_kind(docs, "Service")
    assert {n: v["spec"].get("type") for n, v in services.items()} == {
        "hollow-agent": None, "locust-master": "NodePort", "prometheus": "NodePort",
        **{f"hollow-agent-{i}-control": "NodePort" for i in range(3)}}
    for i in range(3):  # the run's own Services: in its namespace, labelled, each selecting one shard's pod
        svc = services[f"hollow-agent-{i}-control"]
        assert svc["metadata"]["namespace"] == s.namespace and svc["metadata"]["labels"][RUN_LABEL] == s.run_id
        assert svc["spec"]["selector"] == {"statefulset.kubernetes.io/pod-name": f"hollow-agent-{i}"}
    prom = yaml.safe_load(by_kind(docs, "ConfigMap")["prometheus-config"]["data"]["prometheus.yml"])
    targets = {j["job_name"]: j["static_configs"][0]["targets"] for j in prom["scrape_configs"]}
    assert targets == {"apiserver": ["kubernetes.default.svc:443"],
                       "hollow-agents": [f"hollow-agent-{i}.hollow-agent:8080" for i in range(3)]}


@pytest.mark.integration  # starts a process
@pytest.mark.parametrize(("index", "step", "expected"), [(0, "1", "0/3 --metrics-port 20000"),
                                                         (2, "1", "2/3 --metrics-port 20002"),
                                                         (2, "0", "2/3 --metrics-port 20000")])
def test_agent_command_takes_its_shard_and_port_from_the_ordinal(index: int, step: str, expected: str) -> None:
    docs = kustomize(LOCAL_OVERLAY)
    c = by_kind(docs, "StatefulSet")["hollow-agent"]["spec"]["template"]["spec"]["containers"][0]
    assert c["command"][:2] == ["sh", "-c"]
    script = c["command"][2].replace("exec python", "exec echo python", 1)
    env = {"POD_INDEX": str(index), "HOLLOW_REPLICAS": "3", "AGENT_METRICS_PORT": "20000", "AGENT_PORT_STEP": step,
           "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["/bin/busybox", "sh", "-c", script, c["command"][3], "--extra", "flag"], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == f"python -m hollow run --shard {expected} --extra flag"


@pytest.mark.integration  # starts a process
def test_target_rbac_is_renamed_per_run_and_least_privilege(tmp_path: Path) -> None:
    s = settings()
    docs = place_target_objects(kustomize(write_target_kustomization(tmp_path / "target", s)), s)
    for d in docs:
        assert d["metadata"]["name"].endswith(s.suffix) and d["metadata"]["labels"][RUN_LABEL] == s.run_id
        for subject in d.get("subjects", []):
            assert subject["namespace"] == s.namespace and subject["name"].endswith(s.suffix)
    assert {d["metadata"]["namespace"] for d in docs if d["kind"] == "ServiceAccount"} == {s.namespace}
    load_bindings = [d for d in docs if d["kind"] == "RoleBinding" and d["roleRef"]["name"].startswith("hollowscale-load")]
    assert sorted(b["metadata"]["namespace"] for b in load_bindings) == ["load-a", "load-b"]
    leases = [d for d in docs if d["kind"] in ("Role", "RoleBinding") and "leases" in d["metadata"]["name"]]
    assert {d["metadata"]["namespace"] for d in leases} == {"kube-node-lease"}
    roles = {d["metadata"]["name"].removesuffix(s.suffix): d["rules"] for d in docs if d["kind"] in ("ClusterRole", "Role")}
    for name, rules in roles.items():
        for rule in rules:
            assert "*" not in rule.get("verbs", []) and "*" not in rule.get("resources", []), name
            assert not {"secrets", "configmaps", "serviceaccounts"} & set(rule.get("resources", [])), name
    assert roles["hollowscale-metrics"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert not any("delete" in r["verbs"] for r in roles["hollowscale-load"])  # the run cleans up, not Locust
    assert {"nodes", "nodes/status", "pods/status"} <= {res for r in roles["hollowscale-agent"] for res in r["resources"]}
    assert service_account(docs, "agent") == (s.namespace, f"hollowscale-agent{s.suffix}")


def test_token_kubeconfig_is_what_the_pods_load(tmp_path: Path) -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    path = tmp_path / "kubeconfig"
    path.write_text(token_kubeconfig("https://127.0.0.1:6443", pem, "abc.def", "hollowscale-agent"))
    ep = load_endpoint(path)
    assert (ep.server, ep.token, ep.cert_file, ep.insecure) == ("https://127.0.0.1:6443", "abc.def", None, False)
    assert ep.ca_file is not None and Path(ep.ca_file).read_text() == pem
    path.write_text(token_kubeconfig("https://10.0.0.1:443", None, "t", "x"))
    assert load_endpoint(path).insecure is True


def test_split_image() -> None:
    assert split_image("hollowscale.local/agent:0.1.0") == ("hollowscale.local/agent", "0.1.0")
    assert split_image("registry:5000/agent") == ("registry:5000/agent", "latest")
    assert split_image("agent") == ("agent", "latest")
