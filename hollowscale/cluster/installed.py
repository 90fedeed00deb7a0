"""What a controller installed beside the local control plane provides to the cluster that runs it.

A controller such as JobSet is, in a real cluster, a Deployment with its CRDs, RBAC, webhooks and
certificates.  The local cluster (:mod:`hollowscale.cluster.local`) runs it as one more supervised process on
127.0.0.1 and gives it those same objects; this interface is the part the cluster's start, its state and its
metrics need, so that one more controller is one more implementation, not one more set of branches (Kueue:
:class:`hollowscale.cluster.components.kueue.KueueComponent`; JobSet: :class:`hollowscale.cluster.jobset.JobSetComponent`).
Below it, :class:`BuiltComponent`, the part of such a component that is the same for each (its layout and
binary, its Go module, the check that the binary is built), and what their installs share: the layout of their
files, serving certificates and a client kubeconfig, role bindings, webhooks by URL, the steps before and after
the process starts.
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import yaml

from hollowscale.cluster.kubectl import Kubectl

#: the controllers a local cluster can install, by name: their ``features`` key, supervisor component and folder
#: in the cluster dir (``hollowscale.cluster.local.LocalCluster.installable`` makes each)
INSTALLABLE = ("kueue", "jobset")


class InstalledComponentError(RuntimeError):
    """The component could not be installed or started; one line saying why."""


class InstalledComponent(Protocol):
    """One controller installed and supervised by the local cluster.

    Attributes:
        name: its supervisor component name, log file stem and ``ClusterInfo.features`` key.
        port_names: the 127.0.0.1 ports it needs, allocated by the cluster with its own.
    """

    name: str
    port_names: tuple[str, ...]

    def check(self) -> None:
        """Raise :class:`InstalledComponentError` when it cannot run here (binary missing, ...)."""

    def prepare(self, pki_dir: Path, api: str, ports: Mapping[str, int], client_qps: tuple[float, int]) -> None:
        """Its certificates (from the cluster CA in ``pki_dir``), kubeconfig and configuration files."""

    def install_before_start(self, kubectl: Kubectl, timeout_s: float) -> None:
        """CRDs (Established), namespace and RBAC: what must exist before the process starts."""

    def argv(self) -> list[str]:
        """Its command line."""

    def ready(self, ports: Mapping[str, int]) -> bool:
        """Whether it serves (its readiness endpoint)."""

    def install_after_ready(self, kubectl: Kubectl, ports: Mapping[str, int], ca_pem: bytes) -> dict[str, Any]:
        """Webhooks (they need it serving) and tokens; returns what to add to its features."""

    def features(self, ports: Mapping[str, int]) -> dict[str, Any]:
        """What ``ClusterInfo.features[name]`` records of it (version, configuration, ports)."""

    def metrics(self, ports: Mapping[str, int]) -> tuple[str, Path] | None:
        """Its metrics URL and the bearer-token file Prometheus reads (None: no metrics)."""


#: the layout a :class:`BuiltComponent` keeps (its own :class:`ControllerLayout`)
LayoutT = TypeVar("LayoutT", bound="ControllerLayout")


class BuiltComponent(Generic[LayoutT]):
    """What an :class:`InstalledComponent` built from a Go module shares with the others (Kueue, JobSet): its
    layout and binary, its module in the Go module cache (looked up once, when first needed: only the install
    steps read it) and the check that the binary is built.

    Why a base class: each component repeated these lines, each with its own error and build hint; a subclass
    names those (:attr:`error`, :attr:`build_hint`), says how its module is found (:meth:`find_module`) and
    implements the rest of :class:`InstalledComponent`.
    """

    name: str
    port_names: tuple[str, ...]
    #: raised by :meth:`check` (the component's own :class:`InstalledComponentError`)
    error: type[InstalledComponentError] = InstalledComponentError
    #: how to build the binary, the end of :meth:`check`'s message ("`make ...` to build ...")
    build_hint: str = ""

    def __init__(self, layout: LayoutT, binary: Path) -> None:
        self.layout = layout
        self.binary = binary
        self._module: Path | None = None

    def find_module(self) -> Path:
        """The component's module directory in the Go module cache, at its pinned version."""
        raise NotImplementedError

    @property
    def module(self) -> Path:
        """:meth:`find_module`, looked up once."""
        if self._module is None:
            self._module = self.find_module()
        return self._module

    def check(self) -> None:
        """Raise :attr:`error` when the binary is missing or not executable."""
        if not os.access(self.binary, os.X_OK):
            raise self.error(f"missing binary {self.binary}; run {self.build_hint}")


# ------------------------------------------------------------------------------------ what such controllers share
@dataclass(frozen=True)
class ControllerLayout:
    """A controller's files in the cluster directory (``<cluster>/<name>``)."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def webhook_certs(self) -> Path:
        """``tls.crt``/``tls.key`` of the webhook server (the Configuration's ``webhook.certDir``)."""
        return self.root / "webhook-certs"

    @property
    def metrics_certs(self) -> Path:
        """``tls.crt``/``tls.key`` of the metrics server."""
        return self.root / "metrics-certs"

    @property
    def token(self) -> Path:
        """Bearer token of the metrics reader (Prometheus's ``credentials_file``)."""
        return self.root / "metrics-token"

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"


def write_credentials(layout: ControllerLayout, pki_dir: Path, name: str, user: str, api: str) -> None:
    """The controller's webhook and metrics serving certificates (from the cluster CA in ``pki_dir``; SANs
    ``localhost`` and ``127.0.0.1``) into its layout, and a kubeconfig of a client certificate for ``user``."""
    from hollowscale.cluster.pki import issue_cert, write_kubeconfig

    for sub in (layout.root, layout.webhook_certs, layout.metrics_certs):
        sub.mkdir(parents=True, exist_ok=True, mode=0o700)
    for stem, target in ((f"{name}-webhook", layout.webhook_certs), (f"{name}-metrics", layout.metrics_certs)):
        pair = issue_cert(pki_dir, stem, f"hollowscale-{stem}", server=True, dns=("localhost",), ips=("127.0.0.1",))
        shutil.copyfile(pair.cert, target / "tls.crt")
        shutil.copyfile(pair.key, target / "tls.key")
        os.chmod(target / "tls.key", 0o600)
    client = issue_cert(pki_dir, name, user, client=True)
    write_kubeconfig(layout.kubeconfig, api, pki_dir / "ca.crt", client.cert, client.key, user=user)


def bound_roles(rbac_dir: Path, files: Iterable[tuple[str, dict[str, Any]]], prefix: str,
                namespace: str) -> list[dict[str, Any]]:
    """The (Cluster)Roles of each file of ``rbac_dir``, named ``<prefix>-<name>`` as an install's kustomization
    names them (a Role in ``namespace``), each bound to its file's subject."""
    out: list[dict[str, Any]] = []
    for file, subject in files:
        for role in yaml.safe_load_all((rbac_dir / file).read_text()):
            if not role or role.get("kind") not in ("ClusterRole", "Role"):
                continue
            meta: dict[str, Any] = {"name": f"{prefix}-{role['metadata']['name']}"}
            if role["kind"] == "Role":
                meta["namespace"] = namespace
            out.append({**role, "metadata": meta})
            out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{role['kind']}Binding",
                        "metadata": dict(meta),
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": meta["name"]},
                        "subjects": [dict(subject)]})
    return out


def served_by_url(hook: dict[str, Any], port: int, ca_pem: bytes) -> dict[str, Any]:
    """A webhook of an install's manifests served by ``https://127.0.0.1:PORT<its service path>`` with the
    cluster CA as ``caBundle`` (a copy; the service reference is replaced)."""
    out = copy.deepcopy(hook)
    path = out["clientConfig"]["service"]["path"]
    out["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca_pem).decode()}
    return out


def controller_rbac(rbac_dir: Path, prefix: str, namespace: str, user: str, reader: str,
                    user_files: Iterable[str], reader_files: Iterable[str]) -> list[dict[str, Any]]:
    """A controller's namespace, its metrics reader's ServiceAccount, the roles of ``user_files`` bound to the
    user of its client certificate and those of ``reader_files`` bound to the reader (:func:`bound_roles`)."""
    as_user = {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}
    as_reader = {"kind": "ServiceAccount", "name": reader, "namespace": namespace}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": reader, "namespace": namespace}},
            *bound_roles(rbac_dir, [*((f, as_user) for f in user_files), *((f, as_reader) for f in reader_files)],
                         prefix, namespace)]


#: how long a metrics reader's token lives (the cluster CA lives 365 days too)
TOKEN_DURATION = "8760h"


def install_crds_and_rbac(kubectl: Kubectl, crds: Path, rbac: list[dict[str, Any]], layout: ControllerLayout,
                          timeout_s: float) -> None:
    """The CRDs (a file or folder of them) applied and waited for until Established, then the RBAC (kept in
    ``manifests/rbac.yaml``)."""
    kubectl.apply(crds)
    wait_established(kubectl, crds, timeout_s)
    layout.manifests.mkdir(parents=True, exist_ok=True)
    (layout.manifests / "rbac.yaml").write_text(yaml.safe_dump_all(rbac, sort_keys=False))
    kubectl.apply(rbac)


def established(crd: Mapping[str, Any]) -> bool:
    """Whether a CRD object's ``Established`` condition is True (a CRD just created has no conditions yet)."""
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or ())


def wait_established(kubectl: Kubectl, crds: Path, timeout_s: float, poll_s: float = 0.2) -> None:
    """Wait until every CRD of ``crds`` is Established, reading them back.  Not ``kubectl wait
    --for=condition=Established``: on a CRD whose ``status.conditions`` is still null it fails at once
    (".status.conditions accessor error: <nil>"), which a CI run met once for JobSet's."""
    import json
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        doc = json.loads(kubectl("get", "-f", str(crds), "-o", "json"))
        items = doc.get("items") if doc.get("kind") == "List" else [doc]
        pending = [str((i.get("metadata") or {}).get("name")) for i in items or () if not established(i)]
        if items and not pending:
            return
        if time.monotonic() > deadline:
            raise kubectl.error(f"CRDs not Established after {timeout_s:.0f}s: {', '.join(pending) or 'none listed'}")
        time.sleep(poll_s)


def register_webhooks_and_token(kubectl: Kubectl, hooks: list[dict[str, Any]], layout: ControllerLayout,
                                reader: str, namespace: str) -> list[str]:
    """The webhook configurations applied (kept in ``manifests/webhooks.yaml``) and a TokenRequest token of the
    metrics reader written to ``layout.token`` (mode 600); returns the webhooks' names."""
    layout.manifests.mkdir(parents=True, exist_ok=True)
    (layout.manifests / "webhooks.yaml").write_text(yaml.safe_dump_all(hooks, sort_keys=False))
    kubectl.apply(hooks)
    token = kubectl("create", "token", reader, "-n", namespace, f"--duration={TOKEN_DURATION}").strip()
    layout.token.write_text(token)
    os.chmod(layout.token, 0o600)
    return [h["name"] for doc in hooks for h in doc["webhooks"]]


def readyz(port: int) -> bool:
    """A controller-runtime manager's ``/readyz`` on 127.0.0.1:``port`` (ok once its webhook server listens with
    its certificate)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False
