"""Read a kubeconfig into the few facts a raw HTTP client needs.

The official ``kubernetes`` client is the right tool for low-volume calls; hot paths (hollow agents,
Locust users) talk raw HTTP with JSON instead, and they all need the same thing from a kubeconfig:
the server URL and how to authenticate.  This module gives them exactly that, as a frozen dataclass,
and builds an :class:`ssl.SSLContext` from it.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class KubeEndpoint:
    """How to reach one API server.

    Attributes:
        server: base URL, e.g. ``https://127.0.0.1:6443`` (no trailing slash).
        ca_file: PEM bundle that verifies the server, or None to use the system store.
        cert_file: client certificate (PEM) for mTLS, or None.
        key_file: client private key (PEM) for mTLS, or None.
        token: bearer token, or None.
        insecure: skip server verification (only when the kubeconfig says so).
        source: the kubeconfig file this came from, for error messages.
    """

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure: bool = False
    source: str = ""

    def ssl_context(self) -> ssl.SSLContext | None:
        """An SSL context for https servers (None for plain http)."""
        if not self.server.startswith("https://"):
            return None
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def auth_headers(self) -> dict[str, str]:
        """Headers that authenticate a request (bearer token), empty for mTLS."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def _materialise(data_b64: str, suffix: str, cache_dir: Path) -> str:
    """Write base64 inline kubeconfig data to a private file and return its path."""
    raw = base64.b64decode(data_b64)
    cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, path = tempfile.mkstemp(suffix=suffix, dir=cache_dir)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    return path


def _named(items: list[dict[str, Any]], name: str, kind: str, source: str) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            value = item.get(kind)
            if not isinstance(value, dict):
                raise KubeconfigError(f"{source}: {kind} {name!r} has no body")
            return value
    raise KubeconfigError(f"{source}: no {kind} named {name!r}")


def load_endpoint(path: str | os.PathLike[str] | None = None, context: str | None = None) -> KubeEndpoint:
    """Load the current (or named) context of a kubeconfig.

    Args:
        path: kubeconfig file; defaults to ``$KUBECONFIG`` (first entry) then ``~/.kube/config``.
        context: context name; defaults to ``current-context``.

    Relative file paths in the kubeconfig are resolved against the kubeconfig's folder, as kubectl does.
    Inline ``*-data`` fields are written once to private files next to the temp dir.
    """
    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        path = env.split(os.pathsep)[0] if env else str(Path.home() / ".kube" / "config")
    source = str(path)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise KubeconfigError(f"{source}: kubeconfig not found") from None
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"{source}: not valid YAML ({exc})") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"{source}: expected a kubeconfig mapping")
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise KubeconfigError(f"{source}: no current-context and no context given")
    ctx = _named(doc.get("contexts", []), ctx_name, "context", source)
    cluster = _named(doc.get("clusters", []), ctx["cluster"], "cluster", source)
    user = _named(doc.get("users", []), ctx["user"], "user", source) if ctx.get("user") else {}
    base = Path(path).resolve().parent
    tmp = Path(tempfile.gettempdir()) / f"hollowscale-kubeconfig-{os.getuid()}"

    def file_or_data(body: dict[str, Any], key: str, suffix: str) -> str | None:
        if body.get(f"{key}-data"):
            return _materialise(body[f"{key}-data"], suffix, tmp)
        if body.get(key):
            return str((base / body[key]).resolve())
        return None

    server = str(cluster.get("server", "")).rstrip("/")
    if not server:
        raise KubeconfigError(f"{source}: cluster {ctx['cluster']!r} has no server")
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text().strip()
    return KubeEndpoint(
        server=server,
        ca_file=file_or_data(cluster, "certificate-authority", ".crt"),
        cert_file=file_or_data(user, "client-certificate", ".crt"),
        key_file=file_or_data(user, "client-key", ".key"),
        token=token,
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        source=source,
    )
