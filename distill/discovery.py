"""Where teachers come from: a static list, or a Kubernetes Service's EndpointSlices.

A source reports the *complete* current set of teacher base URLs through a callback every
time it changes; the reader diffs it against what it knows. Readiness of each URL is the
reader's job (it probes ``/readyz``), not the source's: an endpoint listed as ready by
Kubernetes can still be dead by the time we send to it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger("distill.discovery")

OnChange = Callable[[frozenset[str]], None]


class TeacherSource(Protocol):
    """Anything that can tell the reader which teachers exist."""

    def start(self, on_change: OnChange) -> None:
        """Begin reporting; ``on_change`` may be called from any thread."""

    def stop(self) -> None:
        """Stop reporting and release resources."""

    def describe(self) -> str:
        """Human-readable origin, for logs and results."""


def normalise_url(u: str) -> str:
    """``host:port`` or ``http://host:port/`` -> ``http://host:port``."""
    from urllib.parse import urlsplit

    u = u.strip().rstrip("/")
    u = u if "://" in u else f"http://{u}"
    parts = urlsplit(u)
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ValueError(f"teacher address {u!r} needs a host and a port, e.g. 127.0.0.1:8501")
    return u


class StaticTeachers:
    """A fixed list; it can still be changed at run time with :meth:`set` (used by tests/bench)."""

    def __init__(self, urls: Iterable[str]) -> None:
        self._urls = frozenset(normalise_url(u) for u in urls if u.strip())
        self._on_change: OnChange | None = None

    def start(self, on_change: OnChange) -> None:
        self._on_change = on_change
        on_change(self._urls)

    def set(self, urls: Iterable[str]) -> None:
        self._urls = frozenset(normalise_url(u) for u in urls)
        if self._on_change is not None:
            self._on_change(self._urls)

    def stop(self) -> None:
        self._on_change = None

    def describe(self) -> str:
        return "static:" + ",".join(sorted(self._urls))


@dataclass(frozen=True)
class EndpointSliceSettings:
    """Which Service to follow.

    Attributes:
        namespace: the Service's namespace.
        service: the Service's name (slices are selected by ``kubernetes.io/service-name``).
        kubeconfig: kubeconfig path; None: in-cluster config, then ``~/.kube/config``.
        port_name: the named port to use; None: the first port of each slice.
        scheme: URL scheme of the teacher endpoints (``http``).
        watch_timeout_s: server-side watch timeout in seconds; the watch is re-opened after it.
        host_aliases: endpoint address -> host to connect to instead (see below).
    """

    namespace: str
    service: str
    kubeconfig: str | None = None  # None: in-cluster config, then ~/.kube/config
    port_name: str | None = None
    scheme: str = "http"
    watch_timeout_s: int = 30  # server-side watch timeout; the watch is re-opened after it
    #: Endpoint address -> host to connect to instead, as a pod's ``hostAliases`` would do in
    #: /etc/hosts: for FQDN slices whose names no DNS here resolves (and for tests, which keep all
    #: traffic on loopback although the API server refuses loopback addresses in EndpointSlices).
    host_aliases: Mapping[str, str] = field(default_factory=dict)


def endpoints_from_slices(slices: Iterable[Any], port_name: str | None = None, scheme: str = "http",
                          host_aliases: Mapping[str, str] | None = None) -> frozenset[str]:
    """Union of ready endpoint addresses x port over EndpointSlice objects (client models).

    Per the EndpointSlice API, an unset ``ready`` condition means ready; terminating or
    not-ready endpoints are left out. Addresses may be IPv4, IPv6 or FQDN; ``host_aliases``
    maps an address to the host actually connected to.
    """
    aliases = host_aliases or {}
    urls: set[str] = set()
    for s in slices:
        port = None
        for p in s.ports or []:
            if p.port is None:
                continue
            if port_name is None or p.name == port_name:
                port = p.port
                break
        if port is None:
            continue
        for ep in s.endpoints or []:
            cond = ep.conditions
            if cond is not None and cond.ready is False:
                continue
            for addr in ep.addresses or []:
                addr = aliases.get(addr, addr)
                host = f"[{addr}]" if ":" in addr else addr
                urls.add(f"{scheme}://{host}:{port}")
    return frozenset(urls)


class EndpointSliceTeachers:
    """Follows ``kubernetes.io/service-name=<service>`` EndpointSlices with list+watch.

    Uses the official client (low volume: one list, then a watch with bookmarks); resumes
    from the last resourceVersion (after a timeout, a dropped connection, an apiserver stall or
    restart) and relists on 410 Gone, replacing the known slices, so deletions missed meanwhile are
    seen; backs off on errors.  Every call has a client-side timeout (a LIST 60 s, a silent watch
    ``watch_timeout_s`` + 30 s), so a stalled apiserver never blocks the thread for good.
    """

    def __init__(self, settings: EndpointSliceSettings) -> None:
        self.settings = settings
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._slices: dict[str, Any] = {}
        self._last: frozenset[str] | None = None
        self._watch: Any = None

    def describe(self) -> str:
        return f"endpointslices:{self.settings.namespace}/{self.settings.service}"

    def start(self, on_change: OnChange) -> None:
        self._thread = threading.Thread(target=self._run, args=(on_change,), name="endpointslice-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _api(self) -> Any:
        from kubernetes import client, config

        from kubecore.config import client_configuration

        # a kubeconfig goes through kubecore: its embedded keys stay in memory, where the client's own
        # loader would leave them in /tmp for good when this process is killed
        if self.settings.kubeconfig:
            cfg = client_configuration(self.settings.kubeconfig)
        else:
            cfg = client.Configuration()
            try:
                config.load_incluster_config(client_configuration=cfg)  # the pod's mounted files: writes none
            except config.ConfigException:
                cfg = client_configuration()
        return client.DiscoveryV1Api(client.ApiClient(configuration=cfg))

    def _publish(self, on_change: OnChange) -> None:
        urls = endpoints_from_slices(self._slices.values(), self.settings.port_name, self.settings.scheme,
                                     self.settings.host_aliases)
        if urls != self._last:
            self._last = urls
            log.info("EndpointSlices of %s: %d teacher(s) %s", self.describe(), len(urls), sorted(urls))
            on_change(urls)

    def _run(self, on_change: OnChange) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        s = self.settings
        selector = f"kubernetes.io/service-name={s.service}"
        backoff = 0.5
        api = None
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if api is None:
                    api = self._api()
                if rv is None:
                    lst = api.list_namespaced_endpoint_slice(s.namespace, label_selector=selector,
                                                             _request_timeout=(10, 60))
                    self._slices = {i.metadata.name: i for i in lst.items}
                    rv = lst.metadata.resource_version
                    self._publish(on_change)
                self._watch = watch.Watch()
                for ev in self._watch.stream(
                    api.list_namespaced_endpoint_slice,
                    s.namespace,
                    label_selector=selector,
                    resource_version=rv,
                    allow_watch_bookmarks=True,
                    timeout_seconds=s.watch_timeout_s,
                    # a silent stream past the server-side timeout is a dead connection (or a stalled
                    # apiserver): give up on it and resume, never block for good
                    _request_timeout=(10, s.watch_timeout_s + 30),
                ):
                    if self._stop.is_set():
                        break
                    kind, obj = ev["type"], ev["object"]
                    if kind == "ERROR":
                        raise ApiException(status=getattr(obj, "code", None) or 500, reason=str(obj))
                    rv = obj.metadata.resource_version
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED":
                        self._slices.pop(obj.metadata.name, None)
                    else:
                        self._slices[obj.metadata.name] = obj
                    self._publish(on_change)
                backoff = 0.5
            except ApiException as e:
                if e.status == 410:
                    log.info("watch expired (410); relisting")
                    rv = None
                    continue
                log.warning("EndpointSlice watch error %s; retrying in %.1fs", e.status, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
            except Exception as e:  # network errors etc.: keep the last known set, resume from rv
                if self._stop.is_set():
                    break
                log.warning("EndpointSlice watch failed (%s); retrying in %.1fs", e, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
