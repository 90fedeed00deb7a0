"""Render ``deploy/hollowscale`` for one run, as ``kubectl kustomize`` does, without copying the files.

The files under ``deploy/hollowscale`` are what a user applies by hand; a run writes a kustomization
of its own into a scratch folder that names the shipped overlay as its resource and adds only what
is the run's: namespace, the run label, replicas, ports, images, the pools file and load spec
(ConfigMaps), the target kubeconfigs (Secrets) and Prometheus' scrape targets.  ``kubectl
kustomize`` (the cached kubectl) renders it; what comes out is what is applied.

The target side (``deploy/hollowscale/target``: ServiceAccounts and least-privilege roles on the
target cluster) is rendered the same way, with a name suffix of the run (cluster-scoped names must not
collide between runs) and the run's namespace for the ServiceAccounts; the load's RoleBinding is
repeated in each of the load's namespaces.

Pure functions apart from running kubectl and writing the scratch folder.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hollowscale.paths import REPO_ROOT
from kubecore.namespaces import RUN_LABEL

DEPLOY_DIR = REPO_ROOT / "deploy" / "hollowscale"
LOCAL_OVERLAY = DEPLOY_DIR / "overlays" / "local-real-nodes"
BASE = DEPLOY_DIR / "base"
TARGET = DEPLOY_DIR / "target"
#: the namespace the shipped target RBAC names for its ServiceAccounts (replaced by the run's)
SHIPPED_NAMESPACE = "hollowscale-driver"
AGENT_IMAGE_REPO = "hollowscale.local/agent"
PROMETHEUS_IMAGE_REPO = "hollowscale.local/prometheus"
#: where the pods mount what the run gives them (the paths of deploy/hollowscale/base)
METRICS_SECRET_DIR = "/etc/hollowscale/target-metrics"


class RenderError(RuntimeError):
    """The manifests could not be rendered (kubectl's message, the folder it rendered)."""


@dataclass(frozen=True)
class Ports:
    """Host ports of a host-network driver (the local overlay): agents from ``agent_base`` on."""

    agent_base: int
    locust_master: int
    locust_web: int
    prometheus: int


@dataclass(frozen=True)
class RunManifestSettings:
    """What the run sets in the shipped manifests.

    Attributes:
        namespace: driver namespace of the run's pods (and, target = driver, of its ServiceAccounts).
        run_id: value of :data:`RUN_LABEL` on every object.
        shards: agent StatefulSet replicas (pod N takes shard N/shards).
        locust_workers: Locust worker replicas.
        agent_image: full reference of the agent image.
        prometheus_image: full reference of the Prometheus image.
        ports: the host ports (local overlay), or None for the base (pod network, fixed ports).
        agent_args: extra flags of every agent (``agents.args``).
        scrape_interval_s: Prometheus' scrape interval.
        target_server: the target apiserver's address as the driver's pods reach it (``host:port``).
        load_namespaces: the load's namespaces (a RoleBinding for Locust in each).
        token_seconds: lifetime of the minted tokens (the run's timeout and a margin).
        overlay: the shipped overlay to render over (:mod:`~.network`); None: the local one with host
            ports, else the base.
    """

    namespace: str
    run_id: str
    shards: int
    locust_workers: int
    agent_image: str
    prometheus_image: str
    ports: Ports | None
    target_server: str
    load_namespaces: tuple[str, ...] = ("hollowscale-load",)
    agent_args: tuple[str, ...] = ()
    scrape_interval_s: float = 1.0
    token_seconds: int = 3600
    delete_nodes_on_exit: bool = True
    extra_scrape_jobs: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    overlay: Path | None = None

    @property
    def suffix(self) -> str:
        """``-<8 hex>`` of the run id: cluster-scoped names of the run."""
        return "-" + hashlib.sha256(self.run_id.encode()).hexdigest()[:8]

    @property
    def agent_ports(self) -> list[int]:
        """Each shard's metrics port on the host network (empty with a pod network)."""
        return [self.ports.agent_base + i for i in range(self.shards)] if self.ports else []


def split_image(ref: str) -> tuple[str, str]:
    """``repo:tag`` -> (repo, tag) (a registry port is not a tag)."""
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return repo, tag


def kubectl_binary() -> str:
    """The cached kubectl (``kubectl kustomize`` is kustomize as kubectl applies it)."""
    from hollowscale.cluster.binaries import binaries

    return str(binaries().kubectl)


def kustomize(folder: Path, kubectl: str | None = None) -> list[dict[str, Any]]:
    """``kubectl kustomize folder``, parsed."""
    cmd = [kubectl or kubectl_binary(), "kustomize", str(folder)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise RenderError(f"kubectl not found at {cmd[0]}: run `make setup` (it caches kubectl)") from None
    if proc.returncode != 0:
        raise RenderError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()[-2000:]}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def scrape_config(s: RunManifestSettings) -> dict[str, Any]:
    """Prometheus' config: the target apiserver (the metrics token) and the agents (their ports)."""
    iv = f"{max(1, round(s.scrape_interval_s * 1000))}ms"
    agents = ([f"127.0.0.1:{p}" for p in s.agent_ports] if s.ports
              else [f"hollow-agent-{i}.hollow-agent:8080" for i in range(s.shards)])
    jobs: list[dict[str, Any]] = [
        {"job_name": "apiserver", "scheme": "https", "metrics_path": "/metrics", "scrape_interval": iv,
         "scrape_timeout": iv, "static_configs": [{"targets": [s.target_server]}],
         "tls_config": {"ca_file": f"{METRICS_SECRET_DIR}/ca.crt"},
         "authorization": {"type": "Bearer", "credentials_file": f"{METRICS_SECRET_DIR}/token"}},
        {"job_name": "hollow-agents", "scheme": "http", "metrics_path": "/metrics", "scrape_interval": iv,
         "scrape_timeout": iv, "static_configs": [{"targets": agents}]},
        *s.extra_scrape_jobs,
    ]
    return {"global": {"scrape_interval": iv, "evaluation_interval": iv}, "scrape_configs": jobs}


def _env_patch(kind: str, name: str, container: str, env: dict[str, str],
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": container, "env": [{"name": k, "value": v} for k, v in env.items()]}
    body.update(extra or {})
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
            "spec": {"template": {"spec": {"containers": [body]}}}}


def driver_patches(s: RunManifestSettings) -> list[dict[str, Any]]:
    """Strategic-merge patches of the run: shard count, run id, ports, agent flags."""
    agent_env = {"HOLLOW_REPLICAS": str(s.shards),
                 "HOLLOW_DELETE_NODES_ON_EXIT": "true" if s.delete_nodes_on_exit else "false"}
    master_env = {"LOCUST_RUN_ID": s.run_id}
    worker_env = {"LOCUST_RUN_ID": s.run_id}
    prom_env: dict[str, str] = {}
    if s.ports:
        agent_env["AGENT_METRICS_PORT"] = str(s.ports.agent_base)
        master_env.update(LOCUST_MASTER_PORT=str(s.ports.locust_master), LOCUST_WEB_PORT=str(s.ports.locust_web))
        worker_env["LOCUST_MASTER_PORT"] = str(s.ports.locust_master)
        prom_env["PROMETHEUS_LISTEN"] = f"127.0.0.1:{s.ports.prometheus}"
    patches = [
        _env_patch("StatefulSet", "hollow-agent", "agent", agent_env, {"args": list(s.agent_args)}),
        _env_patch("Deployment", "locust-master", "master", master_env),
        _env_patch("Deployment", "locust-worker", "worker", worker_env),
    ]
    if prom_env:
        patches.append(_env_patch("Deployment", "prometheus", "prometheus", prom_env))
    return patches


def write_driver_kustomization(folder: Path, s: RunManifestSettings, pools: dict[str, Any], load_spec: dict[str, Any],
                               kubeconfigs: dict[str, str], metrics_secret: dict[str, str],
                               extra_objects: list[dict[str, Any]] | None = None) -> Path:
    """The run's kustomization in ``folder`` (created), over the shipped overlay (or the base).

    ``kubeconfigs``: Secret name -> kubeconfig text (``hollowscale-target-agent``, ``...-load``);
    ``metrics_secret``: the metrics Secret's files (``token``, ``ca.crt``, ``server``);
    ``extra_objects``: the run's own objects beside the overlay's (they get its namespace and label too).
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pools.yaml").write_text(yaml.safe_dump(pools, sort_keys=False))
    (folder / "loadspec.json").write_text(json.dumps(load_spec, indent=2))
    (folder / "prometheus.yml").write_text(yaml.safe_dump(scrape_config(s), sort_keys=False))
    secrets = []
    for name, text in sorted(kubeconfigs.items()):
        (folder / f"{name}.kubeconfig").write_text(text)
        (folder / f"{name}.kubeconfig").chmod(0o600)
        secrets.append({"name": name, "files": [f"kubeconfig={name}.kubeconfig"]})
    files = []
    for key, value in sorted(metrics_secret.items()):
        (folder / f"metrics-{key}").write_text(value)
        (folder / f"metrics-{key}").chmod(0o600)
        files.append(f"{key}=metrics-{key}")
    secrets.append({"name": "hollowscale-target-metrics", "files": files})
    patches = driver_patches(s)
    for i, patch in enumerate(patches):
        (folder / f"patch-{i}.yaml").write_text(yaml.safe_dump(patch, sort_keys=False))
    overlay = s.overlay or (LOCAL_OVERLAY if s.ports else BASE)
    resources = [os.path.relpath(overlay, folder)]
    if extra_objects:
        (folder / "run-objects.yaml").write_text(yaml.safe_dump_all(extra_objects, sort_keys=False))
        resources.append("run-objects.yaml")
    agent_repo, agent_tag = split_image(s.agent_image)
    prom_repo, prom_tag = split_image(s.prometheus_image)
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
        "namespace": s.namespace,
        "labels": [{"pairs": {RUN_LABEL: s.run_id}, "includeSelectors": False, "includeTemplates": True}],
        "replicas": [{"name": "hollow-agent", "count": s.shards}, {"name": "locust-worker", "count": s.locust_workers}],
        "images": [{"name": AGENT_IMAGE_REPO, "newName": agent_repo, "newTag": agent_tag},
                   {"name": PROMETHEUS_IMAGE_REPO, "newName": prom_repo, "newTag": prom_tag}],
        "configMapGenerator": [
            {"name": "hollow-pools", "files": ["pools.yaml"]},
            {"name": "locust-loadspec", "files": ["loadspec.json"]},
            {"name": "prometheus-config", "behavior": "replace", "files": ["prometheus.yml"]},
        ],
        "secretGenerator": secrets,
        "patches": [{"path": f"patch-{i}.yaml"} for i in range(len(patches))],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return folder


def write_target_kustomization(folder: Path, s: RunManifestSettings) -> Path:
    """The run's kustomization of ``deploy/hollowscale/target`` (name suffix and run label)."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(TARGET, folder)],
        "nameSuffix": s.suffix,
        "labels": [{"pairs": {RUN_LABEL: s.run_id}, "includeSelectors": False}],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return folder


def place_target_objects(docs: list[dict[str, Any]], s: RunManifestSettings) -> list[dict[str, Any]]:
    """ServiceAccounts (and the subjects naming them) into the run's namespace; the load's
    RoleBinding once per load namespace.  Other namespaces (``kube-node-lease``) stay."""
    out: list[dict[str, Any]] = []
    for shipped in docs:
        doc = copy.deepcopy(shipped)
        meta = doc["metadata"]
        if meta.get("namespace") == SHIPPED_NAMESPACE:
            meta["namespace"] = s.namespace
        for subject in doc.get("subjects") or []:
            if subject.get("namespace") == SHIPPED_NAMESPACE:
                subject["namespace"] = s.namespace
        if doc["kind"] == "RoleBinding" and doc["roleRef"]["name"] == f"hollowscale-load{s.suffix}":
            for ns in s.load_namespaces:
                each = copy.deepcopy(doc)
                each["metadata"]["namespace"] = ns
                out.append(each)
            continue
        out.append(doc)
    return out


def service_account(docs: list[dict[str, Any]], role: str) -> tuple[str, str]:
    """(namespace, name) of the rendered ServiceAccount ``hollowscale-<role>``."""
    for doc in docs:
        name = doc["metadata"]["name"]
        if doc["kind"] == "ServiceAccount" and name.startswith(f"hollowscale-{role}-"):
            return doc["metadata"]["namespace"], name
    raise RenderError(f"no ServiceAccount hollowscale-{role} in {TARGET}")


def token_kubeconfig(server: str, ca_pem: str | None, token: str, name: str) -> str:
    """A kubeconfig that authenticates with a bearer token (what a pod's Secret holds)."""
    import base64

    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem.encode()).decode()
    else:
        cluster["insecure-skip-tls-verify"] = True
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": name,
           "clusters": [{"name": "target", "cluster": cluster}],
           "users": [{"name": name, "user": {"token": token}}],
           "contexts": [{"name": name, "context": {"cluster": "target", "user": name}}]}
    return yaml.safe_dump(doc, sort_keys=False)


def without_secret_data(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rendered objects with Secret values left out (what the run folder keeps)."""
    out = []
    for doc in docs:
        if doc.get("kind") == "Secret":
            doc = dict(doc, data={k: "(left out)" for k in doc.get("data") or {}})
        out.append(doc)
    return out
