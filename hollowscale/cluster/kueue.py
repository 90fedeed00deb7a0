"""Kueue as one more component of the local cluster, run the way a real install runs it.

What a real install gets from its Deployment, Services and cert-manager, this module gives a process on
127.0.0.1 (all of it read from the Kueue module in the Go module cache, at :data:`KUEUE_VERSION`):

* **CRDs**: the v1beta2 CRDs of ``config/components/crd/bases/``, server-side applied before Kueue
  starts, waited for until Established.
* **RBAC**: Kueue's own ``manager-role``, ``manager-secrets-role`` and ``metrics-auth-role``
  (``config/components/rbac/``), bound to the user ``kueue`` of its client certificate (no
  ``system:masters``), so its requests are authorised as in a real cluster.
* **Webhooks**: Kueue's ``mutating-``/``validating-webhook-configuration`` from
  ``config/components/webhook/manifests.yaml``, kept for Kueue's own kinds and the enabled
  integrations (``batch/job``) and pointed at ``https://127.0.0.1:PORT/...`` with the cluster CA as
  caBundle, registered once Kueue is ready: a Job created with ``kueue.x-k8s.io/queue-name`` and not
  suspended is suspended by the webhook, as in a real install.
* **Certificates**: webhook and metrics serving certificates from the cluster CA (SANs ``localhost``,
  ``127.0.0.1``).  Kueue reads its metrics certificate from the fixed path
  ``/etc/kueue/metrics/certs/tls.{crt,key}`` (``cmd/kueue/main.go``; no flag or config field moves it
  when ``internalCertManagement`` is off).  Nothing is written into the machine's ``/etc``: Kueue runs
  in a private mount namespace (``unshare --mount --propagation private``) where a tmpfs on
  ``<cluster>/kueue/mnt`` holds an overlay's upper dir over ``/etc``; only Kueue's view has
  ``/etc/kueue/...``, and every mount vanishes with its process (nothing to unmount on ``down``).
  Mounts below ``/etc`` (a container's ``/etc/hosts``) are bound again on top of the overlay.
* **Metrics**: https behind controller-runtime's authn/authz filter: a ServiceAccount
  ``hollowscale-metrics-reader`` with ``get`` on ``/metrics`` and a TokenRequest token (1 year) in
  ``<cluster>/kueue/metrics-token``, for Prometheus's ``authorization.credentials_file``.

Configuration (``config.kueue.x-k8s.io/v1beta2``, strict decoder): leader election off, internal cert
management off, fair sharing on (``fairSharing`` present = on in v1beta2; preemption strategies
``[LessThanOrEqualToFinalShare, LessThanInitialShare]``, Kueue's documented default pair),
``waitForPodsReady`` on (present = on in v1beta2: ``timeout: 5m``, ``blockAdmission: false``), and
``--feature-gates=VisibilityOnDemand=false`` (the visibility API server would need an APIService).

Topology-aware scheduling (TAS) needs nothing more: its gate ``TopologyAwareScheduling`` is beta and on
by default since Kueue v0.14 (``pkg/features/kube_features.go``); for ``batch/job`` Kueue adds the
``kueue.x-k8s.io/topology`` scheduling gate to the Job's pod template when it starts an admitted Job
(``pkg/podset``: no pod webhook, which only the ``pod`` integration needs) and its ungater gives each pod
the ``nodeSelector`` of its assigned domain.  The run's ``Topology`` and TAS flavors are batch objects
(:mod:`hollowscale.batch.objects`).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hollowscale.cluster.installed import (
    ControllerLayout,
    InstalledComponentError,
    controller_rbac,
    install_crds_and_rbac,
    readyz,
    register_webhooks_and_token,
    served_by_url,
)
from hollowscale.cluster.kubectl import Kubectl
from hollowscale.versions import KUEUE_VERSION

NAMESPACE = "kueue-system"
#: Kueue's client certificate user (its RBAC subject)
USER = "kueue"
#: the visibility on-demand API server needs an APIService and a Service: off out of cluster
FEATURE_GATES = "VisibilityOnDemand=false"
FRAMEWORKS: tuple[str, ...] = ("batch/job",)
#: v1beta2: ``fairSharing`` present means enabled; this is the default pair of strategies of the docs
FAIR_SHARING: dict[str, Any] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
#: v1beta2: ``waitForPodsReady`` present means enabled (v1beta1's ``enable`` field is gone)
WAIT_FOR_PODS_READY: dict[str, Any] = {"timeout": "5m", "blockAdmission": False}
METRICS_READER = "hollowscale-metrics-reader"
#: the admitted workloads' resources the webhooks of each integration cover: (API group, resource)
_FRAMEWORK_RESOURCES: dict[str, tuple[str, str]] = {"batch/job": ("batch", "jobs"), "pod": ("", "pods")}
#: the kustomize patch of a real install: the pod webhooks skip these namespaces
_POD_WEBHOOK_EXCLUDED = ["kube-system", NAMESPACE]
#: how long the metrics reader's token lives (the cluster CA lives 365 days too)
TOKEN_DURATION = "8760h"


class KueueError(InstalledComponentError):
    """Kueue could not be installed or started; one line saying why."""


@dataclass(frozen=True)
class KueuePorts:
    """Kueue's listeners on 127.0.0.1: webhook (https), metrics (https + token), health (http)."""

    webhook: int
    metrics: int
    health: int


class KueueLayout(ControllerLayout):
    """Kueue's files in the cluster directory (``<cluster>/kueue``); its ``metrics_certs`` are the source of
    ``/etc/kueue/metrics/certs`` in its mount namespace."""

    @property
    def mount_dir(self) -> Path:
        """Mount point of the tmpfs that exists in Kueue's mount namespace only (empty outside)."""
        return self.root / "mnt"


def module_dir() -> Path:
    """The Kueue module's directory in the Go module cache (downloaded from the proxy when missing)."""
    from hollowscale.cluster.binaries import BuildError, go_mod_download

    try:
        info = go_mod_download("sigs.k8s.io/kueue", KUEUE_VERSION)
    except BuildError as exc:
        raise KueueError(str(exc).splitlines()[0]) from None
    return Path(info["Dir"])


# --------------------------------------------------------------------------------------------- rendering
def render_config(layout: KueueLayout, ports: KueuePorts, frameworks: Iterable[str] = FRAMEWORKS,
                  fair_sharing: dict[str, Any] | None = FAIR_SHARING,
                  wait_for_pods_ready: dict[str, Any] | None = WAIT_FOR_PODS_READY,
                  client_qps: tuple[float, int] = (20.0, 30)) -> dict[str, Any]:
    """Kueue's ``config.kueue.x-k8s.io/v1beta2`` Configuration for a process on 127.0.0.1.

    ``client_qps`` is Kueue's API client limit (QPS, burst): Kueue's own defaults (20/30) in the
    ``default`` profile, lifted with the other components' in ``scale``.
    """
    doc: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports.webhook, "certDir": str(layout.webhook_certs)},
        "metrics": {"bindAddress": f"127.0.0.1:{ports.metrics}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.health}"},
        "integrations": {"frameworks": list(frameworks)},
        "clientConnection": {"qps": client_qps[0], "burst": client_qps[1]},
    }
    if fair_sharing is not None:
        doc["fairSharing"] = copy.deepcopy(fair_sharing)
    if wait_for_pods_ready is not None:
        doc["waitForPodsReady"] = copy.deepcopy(wait_for_pods_ready)
    return doc


def render_webhooks(manifests: str, port: int, ca_pem: bytes,
                    frameworks: Iterable[str] = FRAMEWORKS) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, for Kueue's kinds and ``frameworks`` only, served by URL.

    ``manifests`` is ``config/components/webhook/manifests.yaml`` of the module: each webhook's
    ``clientConfig.service`` becomes ``url: https://127.0.0.1:PORT<path>`` with ``caBundle``; webhooks of
    integrations that are off are dropped (Kueue does not serve their paths).  Names get a
    ``kueue-`` prefix, as the install's kustomization gives them.
    """
    allowed = {("kueue.x-k8s.io", "*")} | {_FRAMEWORK_RESOURCES[f] for f in frameworks if f in _FRAMEWORK_RESOURCES}
    out = []
    for doc in yaml.safe_load_all(manifests):
        if not doc:
            continue
        doc = copy.deepcopy(doc)
        kept = []
        for hook in doc.get("webhooks") or []:
            pairs = {(g, r.split("/")[0]) for rule in hook.get("rules") or []
                     for g in rule.get("apiGroups") or [] for r in rule.get("resources") or []}
            if not pairs or not all((g, r) in allowed or (g, "*") in allowed for g, r in pairs):
                continue
            hook = served_by_url(hook, port, ca_pem)
            if ("", "pods") in pairs:
                hook["namespaceSelector"] = {"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(_POD_WEBHOOK_EXCLUDED)}]}
            kept.append(hook)
        doc["metadata"] = {"name": f"kueue-{doc['metadata']['name']}"}
        doc["webhooks"] = kept
        out.append(doc)
    return out


def render_rbac(module: Path) -> list[dict[str, Any]]:
    """Kueue's roles bound to :data:`USER` (``manager-role``, ``metrics-auth-role``, and the Role
    ``manager-secrets-role`` in :data:`NAMESPACE`, whose Secrets its cache watches), and the metrics
    reader: a ServiceAccount with ``get`` on ``/metrics`` (``metrics-reader``).  Names get a ``kueue-``
    prefix, as the install's kustomization gives them."""
    return controller_rbac(module / "config" / "components" / "rbac", "kueue", NAMESPACE, USER, METRICS_READER,
                           ("role.yaml", "manager_secrets_role.yaml", "metrics_auth_role.yaml"),
                           ("metrics_reader_role.yaml",))


# --------------------------------------------------------------------------------------------- install
def crd_dir(module: Path) -> Path:
    return module / "config" / "components" / "crd" / "bases"


def install_before_start(kubectl: Kubectl, module: Path, layout: KueueLayout, timeout_s: float = 60.0) -> None:
    """CRDs (applied, then waited for until Established), namespace, RBAC and the metrics reader."""
    install_crds_and_rbac(kubectl, crd_dir(module), render_rbac(module), layout, timeout_s)


def install_after_ready(kubectl: Kubectl, module: Path, layout: KueueLayout, ports: KueuePorts,
                        ca_pem: bytes) -> list[str]:
    """Webhook configurations (by URL) and the metrics reader's token; returns the webhooks' names."""
    hooks = render_webhooks((module / "config" / "components" / "webhook" / "manifests.yaml").read_text(),
                            ports.webhook, ca_pem)
    return register_webhooks_and_token(kubectl, hooks, layout, METRICS_READER, NAMESPACE)


def ready(ports: KueuePorts) -> bool:
    """Kueue's ``/readyz``: ok once its webhook server listens with its certificate."""
    return readyz(ports.health)


def check_can_run() -> None:
    """Kueue's private mount namespace needs root (CAP_SYS_ADMIN) and util-linux's ``unshare``."""
    if os.geteuid() != 0:
        raise KueueError("Kueue runs in a private mount namespace (its metrics certificate must appear at "
                         "/etc/kueue/metrics/certs without touching the machine's /etc): that needs root")
    if shutil.which("unshare") is None and not Path("/usr/bin/unshare").exists():
        raise KueueError("`unshare` (util-linux) is not installed; Kueue needs it for its mount namespace")


def features(ports: KueuePorts, frameworks: Iterable[str] = FRAMEWORKS,
             wait_for_pods_ready: dict[str, Any] | None = WAIT_FOR_PODS_READY) -> dict[str, Any]:
    """What ``ClusterInfo.features['kueue']`` records of this Kueue."""
    return {"version": KUEUE_VERSION, "feature_gates": FEATURE_GATES, "frameworks": list(frameworks),
            "fair_sharing": copy.deepcopy(FAIR_SHARING), "wait_for_pods_ready": copy.deepcopy(wait_for_pods_ready),
            "namespace": NAMESPACE, "ports": json.loads(json.dumps(ports.__dict__))}


PORT_NAMES: tuple[str, ...] = ("kueue-webhook", "kueue-metrics", "kueue-health")


def ports_of(ports: Mapping[str, int]) -> KueuePorts:
    """Kueue's ports among the cluster's (:data:`PORT_NAMES`)."""
    return KueuePorts(webhook=ports["kueue-webhook"], metrics=ports["kueue-metrics"], health=ports["kueue-health"])
