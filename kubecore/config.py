"""A kubeconfig (or a pod's service account) -> :class:`KubeEndpoint`, the facts a raw HTTP client needs.

Reading kubeconfigs is the official ``kubernetes`` client's job: it merges ``$KUBECONFIG`` lists,
picks contexts, runs ``exec`` credential plugins (the way managed cloud clusters hand out tokens),
handles auth-provider tokens and in-cluster config.  Hot paths (hollow agents, Locust users,
watchers) do not use its generated models; they talk raw HTTP with JSON, fed from an endpoint built
here.  A token that expires (exec plugins return an ``expirationTimestamp``) is refreshed through the
client's own hook when :meth:`KubeEndpoint.auth_headers` is asked for it.

Certificates and keys embedded in a kubeconfig (``*-data``) are never left to the client's temp
files: it writes them with ``mkstemp`` into the machine's temp folder and removes them only at a
normal interpreter exit, so every killed agent, Locust worker or ``os._exit``-ed test worker left
keys in ``/tmp``.  They are written here instead, into the caller's ``keys_dir`` (a folder of its
run, cluster or test, removed with it) or, by default, into anonymous memory files
(``memfd_create``) named ``/proc/self/fd/N``: TLS libraries read them like files, nothing is on any
file system, and they go with the process however it ends.  Such a path is this process's only (and
its forks'): :func:`shareable_file` copies one into a folder for a process that needs a real file
(Prometheus).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import shutil
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
            The three are the kubeconfig's own files, or where its embedded data was written: in
            ``keys_dir`` or in memory (``/proc/self/fd/N``, see :func:`in_memory`).
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


def load_endpoint(path: str | os.PathLike[str] | None = None, context: str | None = None,
                  keys_dir: Path | None = None) -> KubeEndpoint:
    """Load the current (or named) context of a kubeconfig into a :class:`KubeEndpoint`.

    Args:
        path: kubeconfig file; by default ``$KUBECONFIG`` (a list separated by ``:``, merged as kubectl
            does), then ``~/.kube/config``, then the pod's service account when running in a cluster.
        context: context name; defaults to ``current-context``.
        keys_dir: where certificates and keys embedded in the kubeconfig are written (made 0700 if
            missing; the caller removes it with the run, cluster or test it belongs to); None: in
            memory, for this process only (module docstring).

    Raises:
        KubeconfigError: naming the file(s) and what is wrong (missing file, no such context, an exec
            plugin that failed and left the user without credentials, ...).
    """
    cfg, source, ctx_name = _load(path, context, keys_dir)
    return _endpoint(cfg, source, ctx_name)


def client_configuration(path: str | os.PathLike[str] | None = None, context: str | None = None,
                         keys_dir: Path | None = None) -> Any:
    """The official client's ``Configuration`` for a kubeconfig, loaded as :func:`load_endpoint` loads it
    (embedded keys in ``keys_dir`` or in memory, never in the temp folder); for code that uses the
    client's generated APIs: ``kubernetes.client.ApiClient(client_configuration(path))``.  Use it
    instead of ``kubernetes.config.load_kube_config`` / ``new_client_from_config``."""
    return _load(path, context, keys_dir)[0]


def _load(path: str | os.PathLike[str] | None, context: str | None,
          keys_dir: Path | None) -> tuple[Any, str, str]:
    """(the client's Configuration, the source for messages, the context used)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = client.Configuration()
    env = os.environ.get("KUBECONFIG", "")
    default = Path.home() / ".kube" / "config"
    if path is None and not env and not default.exists() and _in_cluster_available():
        try:
            config.load_incluster_config(client_configuration=cfg)  # reads the mounted files: writes none
        except ConfigException as exc:
            raise KubeconfigError(f"in-cluster config: {exc}") from None
        return cfg, "in-cluster", ""
    source = str(path) if path is not None else (env or str(default))
    files = [p for p in source.split(os.pathsep) if p]
    if not files or not any(Path(p).expanduser().exists() for p in files):
        raise KubeconfigError(f"{source}: kubeconfig not found")
    errors = _capture_client_errors()
    try:
        # the client reads $KUBECONFIG once, at its import; pass what it says now (a list is merged)
        _load_kubeconfig(source, context, cfg, keys_dir)
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
    return cfg, source, ctx_name


#: embedded data -> the file key the client reads instead, per kubeconfig section, and the file's role
_EMBEDDED = {
    "cluster": (("certificate-authority-data", "certificate-authority", "ca.crt"),),
    "user": (("client-certificate-data", "client-certificate", "client.crt"),
             ("client-key-data", "client-key", "client.key")),
    "auth-provider": (("idp-certificate-authority-data", "idp-certificate-authority", "idp-ca.crt"),),
}


def _load_kubeconfig(source: str, context: str | None, cfg: Any, keys_dir: Path | None) -> None:
    """What ``config.load_kube_config(source, context, cfg, persist_config=False)`` does (the client's own
    merge and loader), with the active context's embedded data written first by :func:`_materialise`, so
    the client has none left to put in temp files.  An exec plugin that answers with a client certificate
    is the one case where the client still writes: into ``keys_dir``, or into a scratch folder of ours
    whose files are moved into memory and which is removed right after."""
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

    merger = KubeConfigMerger(source)
    if merger.config is None:
        raise ConfigException("Invalid kube-config file. No configuration found.")
    user = _materialise(merger.config, context, keys_dir)
    scratch = None
    if keys_dir is None and user is not None and "exec" in user:
        scratch = Path(tempfile.mkdtemp(prefix="hollowscale-exec-creds-"))
    try:
        loader = KubeConfigLoader(config_dict=merger.config, active_context=context, config_base_path=None,
                                  temp_file_path=str(keys_dir or scratch or "") or None)
        loader.load_and_set(cfg)
        if scratch is not None:
            for attr, role in (("cert_file", "client.crt"), ("key_file", "client.key")):
                made = getattr(cfg, attr, None)
                if made and Path(made).parent == scratch:
                    setattr(cfg, attr, _memory_file(Path(made).read_bytes(), role))
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)  # our own folder (mkdtemp above), exactly


def _materialise(merged: Any, context: str | None, keys_dir: Path | None) -> dict[str, Any] | None:
    """Replace the embedded data of the active context's cluster and user in the client's merged config
    (``KubeConfigMerger.config``) with files of ours; the user's section (None when it has none).  An
    entry that is not there is left for the client's loader to report."""

    def entry(kind: str, name: object) -> dict[str, Any] | None:
        for item in merged.value.get(kind) or []:
            doc = getattr(item, "value", item)
            if isinstance(doc, dict) and doc.get("name") == name:
                return doc
        return None

    ctx_name = context or merged.value.get("current-context")
    ctx = entry("contexts", ctx_name)
    body = (ctx or {}).get("context") or {}
    if not isinstance(body, dict):
        return None
    cluster = (entry("clusters", body.get("cluster")) or {}).get("cluster")
    user = (entry("users", body.get("user")) or {}).get("user") if body.get("user") else None
    provider = (user or {}).get("auth-provider") if isinstance(user, dict) else None
    sections = [("cluster", cluster), ("user", user),
                ("auth-provider", provider.get("config") if isinstance(provider, dict) else None)]
    for kind, section in sections:
        if not isinstance(section, dict):
            continue
        for data_key, file_key, role in _EMBEDDED[kind]:
            data = section.pop(data_key, None)
            if data:
                content = base64.standard_b64decode(data)
                section[file_key] = _memory_file(content, role) if keys_dir is None else \
                    _key_file(keys_dir, content, role)
    return user if isinstance(user, dict) else None


_IN_MEMORY: dict[bytes, str] = {}
_IN_MEMORY_LOCK = threading.Lock()
_IN_MEMORY_PREFIX = "/proc/self/fd/"


def _memory_file(content: bytes, role: str) -> str:
    """``/proc/self/fd/N`` of an anonymous memory file holding ``content`` (one per content, kept open
    for the life of the process; close-on-exec, so a program this process starts does not inherit it)."""
    key = hashlib.sha256(content).digest()
    with _IN_MEMORY_LOCK:
        known = _IN_MEMORY.get(key)
        if known is not None:
            return known
        fd = os.memfd_create(f"kubeconfig-{role}")
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        _IN_MEMORY[key] = path = f"{_IN_MEMORY_PREFIX}{fd}"
        return path


def in_memory(path: str | None) -> bool:
    """Whether ``path`` (an endpoint's ``ca_file``, ``cert_file`` or ``key_file``) is one of this
    process's memory files: readable here and in forks, not by a program this process starts."""
    return bool(path) and str(path).startswith(_IN_MEMORY_PREFIX)


def _key_file(folder: Path, content: bytes, role: str) -> str:
    """``folder/<role stem>-<digest><suffix>`` holding ``content`` (0600), written once per content:
    through a temp name in the same folder and a rename, so a reader never sees half a key."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    stem, suffix = os.path.splitext(role)
    path = folder / f"{stem}-{hashlib.sha256(content).hexdigest()[:16]}{suffix}"
    if not path.exists():
        tmp = folder / f".{path.name}.{os.getpid()}.{threading.get_ident()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        os.replace(tmp, path)
    return str(path)


def shareable_file(path: str | None, folder: Path, name: str) -> str | None:
    """``path`` as a file another program can read: an in-memory one (:func:`in_memory`) is copied to
    ``folder/name`` (0600; the caller removes it when that program is done), any other is returned as is."""
    if not in_memory(path):
        return path
    assert path is not None
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    out = (folder / name).absolute()  # another program resolves a relative path from elsewhere (Prometheus: its config's folder)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(Path(path).read_bytes())
    return str(out)


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
