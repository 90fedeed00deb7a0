"""Batch-scheduling pieces of the local cluster that need no running control plane: the gang gates in
each component's command line, Kueue's Configuration, command line, webhooks and RBAC, and the
Prometheus target of Kueue's metrics (golden-style: the exact documents)."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import yaml

from hollowscale.cluster import gang, kueue
from hollowscale.cluster.components import apiserver, controller_manager, scheduler
from hollowscale.cluster.components import kueue as kueue_component
from hollowscale.cluster.gang import GANG_GATES
from hollowscale.cluster.local import ClusterError, LocalCluster, _State
from hollowscale.cluster.pki import create_pki
from hollowscale.measure.prom import scrape_config, targets_from_metrics
from kubecore.procs import free_ports

PORTS = kueue.KueuePorts(webhook=9443, metrics=8443, health=8081)
ALL_GATES = ",".join(f"{g}=true" for g in GANG_GATES)


def _ports() -> dict[str, int]:
    names = ["etcd", "etcd-peer", "etcd-metrics", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
    return dict(zip(names, free_ports(len(names)), strict=True))


def test_gang_gates_on_every_control_plane_component(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gang, "known_feature_gates", lambda _binary: frozenset(GANG_GATES))
    pki, ports = create_pki(tmp_path / "pki"), _ports()
    gated = LocalCluster(tmp_path, gang_scheduling=True)
    api = apiserver.argv(gated._apiserver(pki, ports))
    assert f"--feature-gates={ALL_GATES}" in api
    assert "--runtime-config=scheduling.k8s.io/v1alpha2=true" in api
    assert f"--feature-gates={ALL_GATES}" in controller_manager.argv(gated._controller_manager(pki, ports))
    assert f"--feature-gates={ALL_GATES}" in scheduler.argv(gated._scheduler(ports))
    assert ALL_GATES == ("GenericWorkload=true,GangScheduling=true,WorkloadWithJob=true,"
                         "TopologyAwareWorkloadScheduling=true,WorkloadAwarePreemption=true")
    plain = LocalCluster(tmp_path)
    for argv in (apiserver.argv(plain._apiserver(pki, ports)),
                 controller_manager.argv(plain._controller_manager(pki, ports)), scheduler.argv(plain._scheduler(ports))):
        assert not [a for a in argv if a.startswith(("--feature-gates", "--runtime-config"))]


def test_a_binary_gets_only_the_gates_it_knows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def known(binary: str) -> frozenset[str]:
        return frozenset(GANG_GATES) - ({"WorkloadWithJob"} if binary.endswith("kube-scheduler") else set())

    monkeypatch.setattr(gang, "known_feature_gates", known)
    cluster = LocalCluster(tmp_path, gang_scheduling=True)
    gates = cluster.feature_gates()
    assert gates["kube-scheduler"] == [f"{g}=true" for g in GANG_GATES if g != "WorkloadWithJob"]
    assert gates["kube-apiserver"] == [f"{g}=true" for g in GANG_GATES]
    features = cluster._features(_ports())
    assert features["feature_gates_dropped"] == {"kube-scheduler": ["WorkloadWithJob"]}
    assert features["runtime_config"] == "scheduling.k8s.io/v1alpha2=true" and features["kueue"] is None


@pytest.mark.integration  # starts a process
def test_known_feature_gates_parses_help(tmp_path: Path) -> None:
    fake = tmp_path / "kube-fake"
    fake.write_text("#!/bin/sh\necho '      GangScheduling=true|false (ALPHA - default=false)'\n"
                    "echo '      GenericWorkload=true|false (ALPHA - default=false)'\n")
    fake.chmod(0o755)
    assert gang.known_feature_gates(str(fake)) == {"GangScheduling", "GenericWorkload"}
    # no binary: every gate (the component's own start error then names a refused one)
    assert gang.known_feature_gates(str(tmp_path / "missing")) == frozenset(GANG_GATES)


def test_up_refuses_a_running_cluster_with_other_features(tmp_path: Path) -> None:
    running = _State(profile="default", ports={}, complete=True,
                     features={"gang_scheduling": True, "kueue": None})
    LocalCluster(tmp_path, gang_scheduling=True)._check_features(running)  # same features: reused
    with pytest.raises(ClusterError, match="has features gang-scheduling, this asks for gang-scheduling, kueue"):
        LocalCluster(tmp_path, gang_scheduling=True, kueue=True)._check_features(running)
    with pytest.raises(ClusterError, match="has features none, this asks for gang-scheduling; stop it"):
        LocalCluster(tmp_path, gang_scheduling=True)._check_features(_State(profile="default", ports={}))


def test_kueue_configuration_golden(tmp_path: Path) -> None:
    layout = kueue.KueueLayout(tmp_path / "kueue")
    assert kueue.render_config(layout, PORTS) == {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": 9443, "certDir": str(tmp_path / "kueue" / "webhook-certs")},
        "metrics": {"bindAddress": "127.0.0.1:8443"},
        "health": {"healthProbeBindAddress": "127.0.0.1:8081"},
        "integrations": {"frameworks": ["batch/job"]},
        "clientConnection": {"qps": 20.0, "burst": 30},  # Kueue's own defaults (default profile)
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        "waitForPodsReady": {"timeout": "5m", "blockAdmission": False},
    }
    bare = kueue.render_config(layout, PORTS, fair_sharing=None, wait_for_pods_ready=None)
    assert "fairSharing" not in bare and "waitForPodsReady" not in bare
    scale = kueue.render_config(layout, PORTS, client_qps=(5000.0, 10000))  # the scale profile's
    assert scale["clientConnection"] == {"qps": 5000.0, "burst": 10000}


def test_kueue_argv_runs_in_a_private_mount_namespace(tmp_path: Path) -> None:
    layout = kueue.KueueLayout(tmp_path / "kueue")
    own = kueue_component.argv(Path("/cache/kueue"), layout)
    assert own == ["/cache/kueue", f"--config={layout.config}", f"--kubeconfig={layout.kubeconfig}",
                   "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=info"]
    argv = kueue_component.namespaced_argv(own, layout)
    assert argv[1:6] == ["--mount", "--propagation", "private", "--", "/bin/sh"]
    assert argv[-len(own) - 3:] == ["kueue-mount-namespace", str(layout.mount_dir), str(layout.metrics_certs), *own]
    script = argv[7]
    assert "mount -t overlay" in script and 'exec "$@"' in script and "/kueue/metrics/certs" in script
    with pytest.raises(kueue.KueueError, match="overlay mount option"):
        kueue_component.namespaced_argv(own, kueue.KueueLayout(tmp_path / "a,b" / "kueue"))


@pytest.mark.integration  # starts a process
def test_namespace_script_is_valid_sh() -> None:
    subprocess.run(["sh", "-n", "-c", kueue_component._NAMESPACE_SCRIPT], check=True)


MANIFESTS = """---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}}
  failurePolicy: Fail
  name: mjob.kb.io
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
  failurePolicy: Fail
  name: mpod.kb.io
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-ray-io-v1-rayjob}}
  failurePolicy: Fail
  name: mrayjob.kb.io
  rules: [{apiGroups: [ray.io], apiVersions: [v1], operations: [CREATE], resources: [rayjobs]}]
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-kueue-x-k8s-io-v1beta2-workload}}
  failurePolicy: Fail
  name: vworkload.kb.io
  rules: [{apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE, UPDATE],
           resources: [workloads, workloads/status]}]
  sideEffects: None
"""


def test_webhooks_by_url_for_kueue_kinds_and_enabled_integrations() -> None:
    ca = b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"
    bundle = base64.b64encode(ca).decode()
    mutating, validating = kueue.render_webhooks(MANIFESTS, 9443, ca)
    assert mutating["metadata"] == {"name": "kueue-mutating-webhook-configuration"}
    assert mutating["webhooks"] == [{
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://127.0.0.1:9443/mutate-batch-v1-job", "caBundle": bundle},
        "failurePolicy": "Fail",
        "name": "mjob.kb.io",
        "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}],
        "sideEffects": "None",
    }]
    assert [h["name"] for h in validating["webhooks"]] == ["vworkload.kb.io"]
    assert validating["webhooks"][0]["clientConfig"]["url"] == (
        "https://127.0.0.1:9443/validate-kueue-x-k8s-io-v1beta2-workload")
    with_pods = kueue.render_webhooks(MANIFESTS, 9443, ca, frameworks=("batch/job", "pod"))[0]["webhooks"]
    pod = next(h for h in with_pods if h["name"] == "mpod.kb.io")
    assert pod["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]


def test_rbac_binds_kueue_roles_to_its_user(tmp_path: Path) -> None:
    rbac = tmp_path / "config" / "components" / "rbac"
    rbac.mkdir(parents=True)
    (rbac / "role.yaml").write_text("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
                                    "metadata: {name: manager-role}\nrules: [{apiGroups: [''], resources: [pods], "
                                    "verbs: [get]}]\n")
    (rbac / "manager_secrets_role.yaml").write_text("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n"
                                                    "metadata: {name: manager-secrets-role, namespace: system}\n"
                                                    "rules: [{apiGroups: [''], resources: [secrets], verbs: [list]}]\n")
    (rbac / "metrics_auth_role.yaml").write_text("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
                                                 "metadata: {name: metrics-auth-role}\nrules: []\n")
    (rbac / "metrics_reader_role.yaml").write_text("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
                                                   "metadata: {name: metrics-reader}\nrules: [{nonResourceURLs: "
                                                   "[/metrics], verbs: [get]}]\n")
    objs = kueue.render_rbac(tmp_path)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert kinds == [("Namespace", "kueue-system"), ("ServiceAccount", "hollowscale-metrics-reader"),
                     ("ClusterRole", "kueue-manager-role"), ("ClusterRoleBinding", "kueue-manager-role"),
                     ("Role", "kueue-manager-secrets-role"), ("RoleBinding", "kueue-manager-secrets-role"),
                     ("ClusterRole", "kueue-metrics-auth-role"), ("ClusterRoleBinding", "kueue-metrics-auth-role"),
                     ("ClusterRole", "kueue-metrics-reader"), ("ClusterRoleBinding", "kueue-metrics-reader")]
    assert objs[3]["subjects"] == [{"kind": "User", "name": "kueue", "apiGroup": "rbac.authorization.k8s.io"}]
    assert objs[4]["metadata"] == {"name": "kueue-manager-secrets-role", "namespace": "kueue-system"}
    assert objs[5]["roleRef"]["kind"] == "Role" and objs[5]["metadata"]["namespace"] == "kueue-system"
    assert objs[9]["subjects"] == [{"kind": "ServiceAccount", "name": "hollowscale-metrics-reader",
                                    "namespace": "kueue-system"}]
    yaml.safe_dump_all(objs)  # what kubectl gets


def test_prometheus_scrapes_kueue_with_token_and_ca() -> None:
    metrics = {"kueue": "https://127.0.0.1:8443/metrics", "scheduler": "https://127.0.0.1:1/metrics"}
    targets = targets_from_metrics(metrics, "/c/pki/ca.crt", "/c/pki/admin.crt", "/c/pki/admin.key",
                                   tokens={"kueue": Path("/c/kueue/metrics-token")})
    job = next(j for j in scrape_config(targets, 1.0)["scrape_configs"] if j["job_name"] == "kueue")
    assert job == {
        "job_name": "kueue", "scheme": "https", "metrics_path": "/metrics", "scrape_interval": "1000ms",
        "scrape_timeout": "1000ms", "static_configs": [{"targets": ["127.0.0.1:8443"]}],
        "tls_config": {"insecure_skip_verify": False, "ca_file": "/c/pki/ca.crt"},
        "authorization": {"type": "Bearer", "credentials_file": "/c/kueue/metrics-token"},
    }
    sched = next(j for j in scrape_config(targets, 1.0)["scrape_configs"] if j["job_name"] == "scheduler")
    assert "authorization" not in sched and sched["tls_config"] == {"insecure_skip_verify": True}


def test_kueue_is_an_installed_component_with_its_profile_limits(tmp_path: Path) -> None:
    from hollowscale.cluster.profiles import get_profile

    ports = {"kueue-webhook": 9443, "kueue-metrics": 8443, "kueue-health": 8081}
    both = LocalCluster(tmp_path, kueue=True, jobset=True, kueue_bin=tmp_path / "no-kueue")
    assert [c.name for c in both.installed] == ["kueue", "jobset"]  # started in this order
    component = both.installed[0]
    assert component.features(ports) == kueue.features(PORTS)
    assert component.metrics(ports) == ("https://127.0.0.1:8443/metrics", tmp_path / "kueue" / "metrics-token")
    assert get_profile("default").limits("kueue") == (20.0, 30)  # Kueue's own defaults
    assert get_profile("scale").limits("kueue") == (5000.0, 10000)
    with pytest.raises(ClusterError, match=r"missing binary .*no-kueue; run `make setup KUEUE=1`"):
        both.up()
