"""JobSet as a component of the local cluster, without a running control plane: its Configuration, command
line, webhooks (with the install's pod objectSelector) and RBAC (golden-style: the exact documents), and what
the cluster records and scrapes of it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hollowscale.cluster import jobset
from hollowscale.cluster.local import ClusterError, LocalCluster, _State
from hollowscale.measure.prom import scrape_config, targets_from_metrics
from hollowscale.versions import JOBSET_VERSION

PORTS = {"jobset-webhook": 9443, "jobset-metrics": 8443, "jobset-health": 8081}

#: the shape of config/components/webhook/manifests.yaml of sigs.k8s.io/jobset v0.12.0, one hook of each kind
MANIFESTS = """---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- admissionReviewVersions: [v1]
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-jobset-x-k8s-io-v1alpha2-jobset}}
  failurePolicy: Fail
  name: mjobset.kb.io
  rules: [{apiGroups: [jobset.x-k8s.io], apiVersions: [v1alpha2], operations: [CREATE], resources: [jobsets]}]
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
  failurePolicy: Fail
  name: mpod.kb.io
  rules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- admissionReviewVersions: [v1]
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-jobset-x-k8s-io-v1alpha2-jobset}}
  failurePolicy: Fail
  name: vjobset.kb.io
  rules: [{apiGroups: [jobset.x-k8s.io], apiVersions: [v1alpha2], operations: [CREATE, UPDATE], resources: [jobsets]}]
  sideEffects: None
"""


def test_configuration_golden(tmp_path: Path) -> None:
    layout = jobset.JobSetLayout(tmp_path / "jobset")
    assert jobset.render_config(layout, PORTS, (500.0, 500)) == {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": 9443, "certDir": str(tmp_path / "jobset" / "webhook-certs")},
        "metrics": {"bindAddress": "127.0.0.1:8443", "certDir": str(tmp_path / "jobset" / "metrics-certs")},
        "health": {"healthProbeBindAddress": "127.0.0.1:8081"},
        "clientConnection": {"qps": 500.0, "burst": 500},
    }
    component = jobset.JobSetComponent(layout, tmp_path / "bin" / "jobset")
    assert component.argv() == [str(tmp_path / "bin" / "jobset"), f"--config={layout.config}",
                                f"--kubeconfig={layout.kubeconfig}", "--zap-log-level=info"]
    with pytest.raises(jobset.JobSetError, match=r"missing binary .*hollowscale setup --jobset"):
        component.check()


def test_webhooks_by_url_and_the_pod_hooks_only_for_jobset_pods() -> None:
    ca = b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"
    bundle = base64.b64encode(ca).decode()
    mutating, validating = jobset.render_webhooks(MANIFESTS, 9443, ca)
    assert mutating["metadata"] == {"name": "jobset-mutating-webhook-configuration"}
    assert validating["metadata"] == {"name": "jobset-validating-webhook-configuration"}
    js, pod = mutating["webhooks"]
    assert js["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate-jobset-x-k8s-io-v1alpha2-jobset",
                                  "caBundle": bundle}
    assert "objectSelector" not in js
    assert pod["clientConfig"]["url"] == "https://127.0.0.1:9443/mutate--v1-pod"
    assert pod["objectSelector"] == {"matchExpressions": [
        {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}  # the install's patch
    assert [h["name"] for h in validating["webhooks"]] == ["vjobset.kb.io"]


def test_rbac_binds_jobset_roles_to_its_user_and_the_reader_to_its_account(tmp_path: Path) -> None:
    rbac = tmp_path / "config" / "components" / "rbac"
    rbac.mkdir(parents=True)
    for file, kind, name in (("role.yaml", "ClusterRole", "manager-role"),
                             ("manager_secrets_role.yaml", "Role", "manager-secrets-role"),
                             ("auth_proxy_role.yaml", "ClusterRole", "proxy-role"),
                             ("auth_proxy_client_clusterrole.yaml", "ClusterRole", "metrics-reader")):
        (rbac / file).write_text(f"apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata: {{name: {name}}}\n"
                                 "rules: []\n")
    objs = jobset.render_rbac(tmp_path)
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("Namespace", "jobset-system"), ("ServiceAccount", "hollowscale-jobset-metrics-reader"),
        ("ClusterRole", "jobset-manager-role"), ("ClusterRoleBinding", "jobset-manager-role"),
        ("Role", "jobset-manager-secrets-role"), ("RoleBinding", "jobset-manager-secrets-role"),
        ("ClusterRole", "jobset-proxy-role"), ("ClusterRoleBinding", "jobset-proxy-role"),
        ("ClusterRole", "jobset-metrics-reader"), ("ClusterRoleBinding", "jobset-metrics-reader")]
    assert objs[3]["subjects"] == [{"kind": "User", "name": "jobset", "apiGroup": "rbac.authorization.k8s.io"}]
    assert objs[5]["metadata"] == {"name": "jobset-manager-secrets-role", "namespace": "jobset-system"}
    assert objs[9]["subjects"] == [{"kind": "ServiceAccount", "name": "hollowscale-jobset-metrics-reader",
                                    "namespace": "jobset-system"}]
    yaml.safe_dump_all(objs)  # what kubectl gets


def test_the_cluster_records_and_scrapes_jobset_only_when_it_runs(tmp_path: Path) -> None:
    with_it, without = LocalCluster(tmp_path, jobset=True), LocalCluster(tmp_path)
    assert [c.name for c in with_it.installed] == ["jobset"] and without.installed == []
    features = with_it._features({**PORTS})
    assert features["jobset"] == {"version": JOBSET_VERSION, "namespace": "jobset-system", "ports": PORTS}
    assert without._features({})["jobset"] is None
    running = _State(profile="default", ports={}, complete=True, features={"jobset": features["jobset"]})
    with pytest.raises(ClusterError, match="has features jobset, this asks for none"):
        without._check_features(running)
    with_it._check_features(running)
    # a cluster object asked for nothing (as `cluster status` makes one) still reports the running JobSet
    state = {"profile": "default", "ports": {**PORTS, "kube-apiserver": 1, "kube-controller-manager": 2,
                                             "kube-scheduler": 3, "etcd-metrics": 4},
             "features": {"jobset": features["jobset"]}, "processes": [], "complete": True}
    tmp_path.joinpath("state.json").write_text(json.dumps(state))
    info = without.info()
    assert info is not None and info.metrics["jobset"] == "https://127.0.0.1:8443/metrics"
    assert info.metrics_tokens["jobset"] == tmp_path / "jobset" / "metrics-token"
    targets = targets_from_metrics(info.metrics, "/c/pki/ca.crt", "/c/pki/admin.crt", "/c/pki/admin.key",
                                   tokens=info.metrics_tokens)
    job = next(j for j in scrape_config(targets, 1.0)["scrape_configs"] if j["job_name"] == "jobset")
    assert job["authorization"] == {"type": "Bearer", "credentials_file": str(tmp_path / "jobset" / "metrics-token")}


def test_crds_are_waited_for_until_established_also_while_their_conditions_are_null(tmp_path: Path) -> None:
    """``kubectl wait --for=condition=Established`` fails at once on a CRD whose conditions are still null (a CI
    run met it); the wait reads the CRDs back until each is Established, or names those that are not."""
    from hollowscale.cluster.installed import InstalledComponentError, wait_established

    def crd(name: str, conditions: Any) -> dict[str, Any]:
        return {"kind": "CustomResourceDefinition", "metadata": {"name": name}, "status": {"conditions": conditions}}

    class Replies:
        error = InstalledComponentError

        def __init__(self, docs: list[dict[str, Any]]) -> None:
            self.docs, self.calls = docs, 0

        def __call__(self, *args: str, **_: Any) -> str:
            assert args[:3] == ("get", "-f", str(tmp_path)) and args[3:] == ("-o", "json")
            self.calls += 1
            return json.dumps(self.docs[min(self.calls, len(self.docs)) - 1])

    ok = [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}]
    replies = Replies([crd("a", None), {"kind": "List", "items": [crd("a", [])]}, crd("a", ok)])
    wait_established(replies, tmp_path, timeout_s=5, poll_s=0)  # type: ignore[arg-type]
    assert replies.calls == 3
    never = Replies([{"kind": "List", "items": [crd("a", ok), crd("b", None)]}])
    with pytest.raises(InstalledComponentError, match="CRDs not Established after 0s: b"):
        wait_established(never, tmp_path, timeout_s=0, poll_s=0)  # type: ignore[arg-type]
