"""JobSet as one more component of the local cluster, run the way a real install runs it.

A real install (``config/default`` of the module: namespace ``jobset-system``, names prefixed ``jobset-``) is a
Deployment with its CRD, RBAC, webhooks and certificates.  This module gives a process on 127.0.0.1 the same,
all read from the JobSet module in the Go module cache at :data:`JOBSET_VERSION`:

* **CRD**: ``config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml``, server-side applied before JobSet
  starts and waited for until Established.  The install's conversion-webhook patch is left out: the CRD
  serves one version (v1alpha2), so the API server never calls it.
* **RBAC**: its ``manager-role`` (ClusterRole), ``manager-secrets-role`` (Role in its namespace) and
  ``proxy-role`` (TokenReviews and SubjectAccessReviews, for its metrics' authn/authz filter), bound to the
  user ``jobset`` of its client certificate, so its requests are authorised as in a real cluster; and the
  ``metrics-reader`` ClusterRole bound to a ServiceAccount whose token Prometheus reads.
* **Webhooks**: ``config/components/webhook/manifests.yaml`` with the install's patches (the pod webhooks
  only for pods labelled ``jobset.sigs.k8s.io/jobset-name``), pointed at ``https://127.0.0.1:PORT/...``
  with the cluster CA as caBundle, registered once JobSet is ready.
* **Certificates**: webhook and metrics serving certificates from the cluster CA (SANs ``localhost``,
  ``127.0.0.1``), in the directories its Configuration names (``webhook.certDir``, ``metrics.certDir``);
  internal cert management off.  Unlike Kueue, nothing needs a fixed path, so JobSet needs no root.

Configuration (``config.jobset.x-k8s.io/v1alpha1``, strict decoder): leader election off, internal cert
management off, the client's QPS and burst from the cluster's profile.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hollowscale.cluster.installed import (
    BuiltComponent,
    ControllerLayout,
    InstalledComponentError,
    controller_rbac,
    install_crds_and_rbac,
    readyz,
    register_webhooks_and_token,
    served_by_url,
    write_credentials,
)
from hollowscale.cluster.kubectl import Kubectl
from hollowscale.versions import JOBSET_VERSION

NAME = "jobset"
NAMESPACE = "jobset-system"
#: JobSet's client certificate user (its RBAC subject)
USER = "jobset"
METRICS_READER = "hollowscale-jobset-metrics-reader"
#: the install's webhook patches: JobSet's pod webhooks see only its own pods
POD_OBJECT_SELECTOR: dict[str, Any] = {
    "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
PORT_NAMES: tuple[str, ...] = ("jobset-webhook", "jobset-metrics", "jobset-health")


class JobSetError(InstalledComponentError):
    """JobSet could not be installed or started; one line saying why."""


class JobSetLayout(ControllerLayout):
    """JobSet's files in the cluster directory (``<cluster>/jobset``)."""


def module_dir() -> Path:
    """The JobSet module's directory in the Go module cache (downloaded from the proxy when missing)."""
    from hollowscale.cluster.binaries import BuildError, go_mod_download

    try:
        info = go_mod_download("sigs.k8s.io/jobset", JOBSET_VERSION)
    except BuildError as exc:
        raise JobSetError(str(exc).splitlines()[0]) from None
    return Path(info["Dir"])


# --------------------------------------------------------------------------------------------- rendering
def render_config(layout: JobSetLayout, ports: Mapping[str, int], client_qps: tuple[float, int]) -> dict[str, Any]:
    """JobSet's ``config.jobset.x-k8s.io/v1alpha1`` Configuration for a process on 127.0.0.1."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports["jobset-webhook"], "certDir": str(layout.webhook_certs)},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['jobset-metrics']}", "certDir": str(layout.metrics_certs)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['jobset-health']}"},
        "clientConnection": {"qps": client_qps[0], "burst": client_qps[1]},
    }


def render_webhooks(manifests: str, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """JobSet's webhook configurations served by URL, with the install's patches.

    ``manifests`` is ``config/components/webhook/manifests.yaml``: each webhook's ``clientConfig.service``
    becomes ``url: https://127.0.0.1:PORT<path>`` with ``caBundle``; the pod webhooks get the install's
    ``objectSelector`` (:data:`POD_OBJECT_SELECTOR`); names get the install's ``jobset-`` prefix.
    """
    out = []
    for doc in yaml.safe_load_all(manifests):
        if not doc:
            continue
        doc = copy.deepcopy(doc)
        hooks = [served_by_url(hook, port, ca_pem) for hook in doc.get("webhooks") or []]
        for hook in hooks:
            if any("pods" in (rule.get("resources") or []) for rule in hook.get("rules") or []):
                hook["objectSelector"] = copy.deepcopy(POD_OBJECT_SELECTOR)
        doc["metadata"] = {"name": f"jobset-{doc['metadata']['name']}"}
        doc["webhooks"] = hooks
        out.append(doc)
    return out


def render_rbac(module: Path) -> list[dict[str, Any]]:
    """The namespace, JobSet's roles bound to :data:`USER`, and the metrics reader (a ServiceAccount bound to
    ``metrics-reader``); names get the install's ``jobset-`` prefix."""
    return controller_rbac(module / "config" / "components" / "rbac", "jobset", NAMESPACE, USER, METRICS_READER,
                           ("role.yaml", "manager_secrets_role.yaml", "auth_proxy_role.yaml"),
                           ("auth_proxy_client_clusterrole.yaml",))


def crd_file(module: Path) -> Path:
    return module / "config" / "components" / "crd" / "bases" / "jobset.x-k8s.io_jobsets.yaml"


# --------------------------------------------------------------------------------------------- the component
class JobSetComponent(BuiltComponent[JobSetLayout]):
    """JobSet (:data:`JOBSET_VERSION`) as an :class:`~hollowscale.cluster.installed.InstalledComponent`."""

    name: str = NAME
    port_names: tuple[str, ...] = PORT_NAMES
    error = JobSetError
    build_hint = "`hollowscale setup --jobset` (or `make setup-test`) to build JobSet"

    def find_module(self) -> Path:
        return module_dir()

    def prepare(self, pki_dir: Path, api: str, ports: Mapping[str, int], client_qps: tuple[float, int]) -> None:
        write_credentials(self.layout, pki_dir, NAME, USER, api)
        self.layout.config.write_text(yaml.safe_dump(render_config(self.layout, ports, client_qps), sort_keys=False))

    def install_before_start(self, kubectl: Kubectl, timeout_s: float) -> None:
        install_crds_and_rbac(kubectl, crd_file(self.module), render_rbac(self.module), self.layout, timeout_s)

    def argv(self) -> list[str]:
        """Its Configuration, its kubeconfig (user ``jobset``), info logs."""
        return [str(self.binary), f"--config={self.layout.config}", f"--kubeconfig={self.layout.kubeconfig}",
                "--zap-log-level=info"]

    def ready(self, ports: Mapping[str, int]) -> bool:
        return readyz(ports["jobset-health"])

    def install_after_ready(self, kubectl: Kubectl, ports: Mapping[str, int], ca_pem: bytes) -> dict[str, Any]:
        hooks = render_webhooks((self.module / "config" / "components" / "webhook" / "manifests.yaml").read_text(),
                                ports["jobset-webhook"], ca_pem)
        return {"webhooks": register_webhooks_and_token(kubectl, hooks, self.layout, METRICS_READER, NAMESPACE)}

    def features(self, ports: Mapping[str, int]) -> dict[str, Any]:
        return {"version": JOBSET_VERSION, "namespace": NAMESPACE,
                "ports": {n: int(ports[n]) for n in PORT_NAMES if n in ports}}

    def metrics(self, ports: Mapping[str, int]) -> tuple[str, Path] | None:
        return f"https://127.0.0.1:{ports['jobset-metrics']}/metrics", self.layout.token
