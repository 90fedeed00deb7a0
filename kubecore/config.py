"""A kubeconfig (or a pod's service account) -> :class:`KubeEndpoint`, the facts a raw HTTP client needs.

Reading kubeconfigs is the official ``kubernetes`` client's job: it merges ``$KUBECONFIG`` lists,
picks contexts, runs ``exec`` credential plugins (the way managed cloud clusters hand out tokens),
handles auth-provider tokens and in-cluster config.  Hot paths (hollow agents, Locust users,
watchers) do not use its generated models; they talk raw HTTP with JSON, fed from an endpoint built
here.  A token that expires (exec plugins return an ``expirationTimestamp``) is refreshed through the
client's own hook when :meth:`KubeEndpoint.auth_headers` is asked for it.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubecore.tls import client_ssl_context

#: how often a token with a refresh hook is looked at again (the hook itself checks the expiry)
TOKEN_RECHECK_S = 10.0
_SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


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
        token: bearer token at load time, or None (use :meth:`auth_headers`, which refreshes it).
        insecure: skip server verification (only when the kubeconfig says so).
        source: the kubeconfig file(s) or ``in-cluster``, for messages.
        context: the context used ('' in-cluster).
        refresh: returns the current token (refreshing an expired one), or None for static credentials.
    """

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure: bool = False
    source: str = ""
    context: str = ""
    refresh: Callable[[], str | None] | None = field(default=None, compare=False, repr=False)

    def ssl_context(self) -> ssl.SSLContext | None:
        """An SSL context for https servers (None for plain http)."""
        if not self.server.startswith("https://"):
            return None
        return client_ssl_context(self.ca_file, self.cert_file, self.key_file, self.insecure)

    def current_token(self) -> str | None:
        """The bearer token now (refreshed through the kubeconfig's exec plugin when it expired)."""
        return self.refresh() if self.refresh is not None else self.token

    def auth_headers(self) -> dict[str, str]:
        """Headers that authenticate a request (bearer token), empty for mTLS."""
        token = self.current_token()
        return {"Authorization": f"Bearer {token}"} if token else {}


class _TokenSource:
    """Calls the client's refresh hook at most every :data:`TOKEN_RECHECK_S` seconds (thread-safe)."""

    def __init__(self, configuration: object, hook: Callable[[object], None]):
        self._cfg = configuration
        self._hook = hook
        self._lock = threading.Lock()
        self._checked = 0.0
        self._token = _bearer(configuration)

    def __call__(self) -> str | None:
        now = time.monotonic()
        if now - self._checked >= TOKEN_RECHECK_S:
            with self._lock:
                if now - self._checked >= TOKEN_RECHECK_S:
                    self._hook(self._cfg)
                    self._token = _bearer(self._cfg)
                    self._checked = now
        return self._token


def _bearer(configuration: object) -> str | None:
    keys = getattr(configuration, "api_key", {}) or {}
    raw = keys.get("BearerToken") or keys.get("authorization")
    if not raw:
        return None
    return str(raw).removeprefix("Bearer ").strip() or None


def _in_cluster_available() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (_SERVICE_ACCOUNT / "token").exists()


def load_endpoint(path: str | os.PathLike[str] | None = None, context: str | None = None) -> KubeEndpoint:
    """Load the current (or named) context of a kubeconfig into a :class:`KubeEndpoint`.

    Args:
        path: kubeconfig file; by default ``$KUBECONFIG`` (a list separated by ``:``, merged as kubectl
            does), then ``~/.kube/config``, then the pod's service account when running in a cluster.
        context: context name; defaults to ``current-context``.

    Raises:
        KubeconfigError: naming the file(s) and what is wrong (missing file, no such context, an exec
            plugin that failed and left the user without credentials, ...).
    """
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = client.Configuration()
    env = os.environ.get("KUBECONFIG", "")
    default = Path.home() / ".kube" / "config"
    if path is None and not env and not default.exists() and _in_cluster_available():
        try:
            config.load_incluster_config(client_configuration=cfg)
        except ConfigException as exc:
            raise KubeconfigError(f"in-cluster config: {exc}") from None
        return _endpoint(cfg, "in-cluster", "")
    source = str(path) if path is not None else (env or str(default))
    files = [p for p in source.split(os.pathsep) if p]
    if not files or not any(Path(p).expanduser().exists() for p in files):
        raise KubeconfigError(f"{source}: kubeconfig not found")
    errors = _capture_client_errors()
    try:
        # the client reads $KUBECONFIG once, at its import; pass what it says now (a list is merged)
        config.load_kube_config(config_file=source, context=context,
                                client_configuration=cfg, persist_config=False)
    except ConfigException as exc:
        raise KubeconfigError(f"{source}: {exc}") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise KubeconfigError(f"{source}: not a usable kubeconfig ({exc.__class__.__name__}: {exc})") from None
    finally:
        logging.getLogger().removeHandler(errors)
    ctx_name = context or _current_context(files)
    if not _bearer(cfg) and not cfg.cert_file and errors.messages:
        # the client logs (and swallows) exec plugin failures; without credentials every call would be 401
        raise KubeconfigError(f"{source}: context {ctx_name!r}: no credentials: {errors.messages[-1]}")
    return _endpoint(cfg, source, ctx_name)


def _endpoint(cfg: object, source: str, context: str) -> KubeEndpoint:
    hook = getattr(cfg, "refresh_api_key_hook", None)
    token = _bearer(cfg)
    refresh = _TokenSource(cfg, hook) if hook is not None and token else None
    server = str(getattr(cfg, "host", "")).rstrip("/")
    if not server:
        raise KubeconfigError(f"{source}: the cluster has no server")
    return KubeEndpoint(
        server=server,
        ca_file=getattr(cfg, "ssl_ca_cert", None) or None,
        cert_file=getattr(cfg, "cert_file", None) or None,
        key_file=getattr(cfg, "key_file", None) or None,
        token=token,
        insecure=not bool(getattr(cfg, "verify_ssl", True)),
        source=source,
        context=context,
        refresh=refresh,
    )


def _current_context(files: list[str]) -> str:
    import yaml

    for f in files:
        try:
            doc = yaml.safe_load(Path(f).expanduser().read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(doc, dict) and doc.get("current-context"):
            return str(doc["current-context"])
    return ""


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _capture_client_errors() -> _Collect:
    handler = _Collect()
    logging.getLogger().addHandler(handler)
    return handler


_PATH_KEYS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


def flatten_kubeconfig(source: str, out: Path, context: str | None = None) -> Path:
    """Write the one context of a ``$KUBECONFIG`` list that kubectl would use as a single file.

    Child processes (agents, Locust) take one ``--kubeconfig``; this gives them the same cluster and
    user (an ``exec`` user stays an exec user, so its tokens keep being refreshed), with relative
    file names made absolute against the file each entry came from.  The first file that names an
    entry wins, as kubectl merges.
    """
    import yaml

    docs: list[tuple[Path, dict[str, object]]] = []
    for name in (p for p in source.split(os.pathsep) if p):
        path = Path(name).expanduser()
        if path.exists():
            doc = yaml.safe_load(path.read_text()) or {}
            if isinstance(doc, dict):
                docs.append((path, doc))
    ctx_name = context or next((str(d["current-context"]) for _, d in docs if d.get("current-context")), "")

    def find(kind: str, name: str) -> tuple[Path, dict[str, object]]:
        for path, doc in docs:
            for item in doc.get(kind) or []:  # type: ignore[attr-defined]
                if isinstance(item, dict) and item.get("name") == name:
                    return path, item
        raise KubeconfigError(f"{source}: no {kind[:-1]} named {name!r}")

    _, ctx = find("contexts", ctx_name)
    body = ctx.get("context") or {}
    assert isinstance(body, dict)
    entries: dict[str, list[dict[str, object]]] = {"contexts": [ctx], "clusters": [], "users": []}
    for kind, key in (("clusters", "cluster"), ("users", "user")):
        if body.get(key):
            path, item = find(kind, str(body[key]))
            inner = dict(item.get(key) or {})  # type: ignore[call-overload]
            for k in _PATH_KEYS:
                if isinstance(inner.get(k), str):
                    inner[k] = str((path.parent / inner[k]).resolve())
            entries[kind].append({"name": item["name"], key: inner})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": ctx_name, **entries}))
    out.chmod(0o600)
    return out
