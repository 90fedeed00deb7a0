"""Synchronous HTTP to the API server: an authenticated session and the one list-then-watch loop.

The orchestrator's collectors and barriers and the load generator's watchers use this (``requests``
with streaming cooperates with gevent once Locust has monkey-patched the standard library, and
works in plain threads elsewhere).  The hollow agent has its own async client for its hot path.

:func:`list_then_watch` is the one watch loop: paginated LIST, then WATCH from its resourceVersion
with bookmarks, resume from the last resourceVersion after a dropped stream, relist on 410 Gone,
capped backoff on errors.  Events carry the client's receive time in epoch milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import requests

from kubecore.config import KubeEndpoint

#: the synthetic event type for objects that came from a (re)LIST rather than from the watch stream
SYNC = "SYNC"


def now_ms() -> float:
    return time.time() * 1000.0


def session_for(endpoint: KubeEndpoint, pool: int = 4) -> requests.Session:
    """A requests session authenticated like the kubeconfig says."""
    s = requests.Session()
    # REQUESTS_CA_BUNDLE / proxy variables must not override the kubeconfig's CA (requests lets the
    # environment win over Session.verify) nor send loopback traffic to a proxy
    s.trust_env = False
    if endpoint.cert_file and endpoint.key_file:
        s.cert = (endpoint.cert_file, endpoint.key_file)
    s.verify = False if endpoint.insecure else (endpoint.ca_file or True)
    if endpoint.token or endpoint.refresh is not None:
        s.auth = _BearerAuth(endpoint)
    s.headers["Accept"] = "application/json"
    adapter = requests.adapters.HTTPAdapter(pool_connections=pool, pool_maxsize=pool)
    s.mount("https://", adapter)
    s.mount("http://", adapter)
    return s


def list_then_watch(
    session: requests.Session,
    server: str,
    path: str,
    stop: Callable[[], bool],
    label_selector: str | None = None,
    field_selector: str | None = None,
    page: int = 500,
    on_restart: Callable[[str], None] | None = None,
) -> Iterator[tuple[str, dict[str, Any], float]]:
    """Yield ``(type, object, received_ms)`` until ``stop()``; types: SYNC (from LIST), ADDED,
    MODIFIED, DELETED.  ``path`` is a collection, e.g. ``/api/v1/namespaces/ns/pods``."""
    rv: str | None = None
    backoff = 0.2
    while not stop():
        try:
            if rv is None:
                params: dict[str, Any] = {"limit": page}
                if label_selector:
                    params["labelSelector"] = label_selector
                if field_selector:
                    params["fieldSelector"] = field_selector
                cont = None
                while True:
                    if cont:
                        params["continue"] = cont
                    r = session.get(server + path, params=params, timeout=60)
                    if r.status_code == 410:  # continue token expired: start over
                        params.pop("continue", None)
                        cont = None
                        continue
                    r.raise_for_status()
                    doc = orjson.loads(r.content)
                    t = now_ms()
                    for obj in doc.get("items") or []:
                        yield SYNC, obj, t
                    cont = (doc.get("metadata") or {}).get("continue")
                    if not cont:
                        rv = (doc.get("metadata") or {}).get("resourceVersion")
                        break
            params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": 5}
            if label_selector:
                params["labelSelector"] = label_selector
            if field_selector:
                params["fieldSelector"] = field_selector
            with session.get(server + path, params=params, stream=True, timeout=(10, 20)) as resp:
                if resp.status_code == 410:
                    rv = None
                    if on_restart:
                        on_restart("410 on watch: relist")
                    continue
                resp.raise_for_status()
                backoff = 0.2
                buf = b""
                for chunk in resp.iter_content(chunk_size=None):
                    if not chunk:
                        continue
                    t = now_ms()
                    buf += chunk
                    if b"\n" not in chunk:
                        continue
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        if not line.strip():
                            continue
                        ev = orjson.loads(line)
                        typ = ev.get("type")
                        obj = ev.get("object") or {}
                        if typ == "ERROR":
                            if obj.get("code") == 410:
                                rv = None
                                if on_restart:
                                    on_restart("410 Gone in stream: relist")
                            raise _Restart
                        new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                        if new_rv:
                            rv = new_rv
                        if typ == "BOOKMARK":
                            continue
                        yield typ, obj, t
                    if stop():
                        return
            if on_restart:
                on_restart("watch ended: resume")
        except _Restart:
            continue
        except (requests.RequestException, ValueError) as exc:
            if stop():
                return
            if on_restart:
                on_restart(f"watch error: {exc.__class__.__name__}: {exc}")
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)


class _Restart(Exception):
    pass


class _BearerAuth(requests.auth.AuthBase):
    """Adds the endpoint's current bearer token to each request (an exec plugin's token may expire)."""

    def __init__(self, endpoint: KubeEndpoint):
        self.endpoint = endpoint

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.update(self.endpoint.auth_headers())
        return r


def list_all(session: requests.Session, server: str, path: str, page: int = 500,
             label_selector: str | None = None) -> list[dict[str, Any]]:
    """Every object of a collection (paginated LIST; restarts when a continue token expires)."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": page}
    if label_selector:
        params["labelSelector"] = label_selector
    while True:
        r = session.get(server + path, params=params, timeout=60)
        if r.status_code == 410 and "continue" in params:
            params.pop("continue")
            items.clear()
            continue
        r.raise_for_status()
        doc = orjson.loads(r.content)
        items.extend(doc.get("items") or [])
        cont = (doc.get("metadata") or {}).get("continue")
        if not cont:
            return items
        params["continue"] = cont


__all__ = ["SYNC", "list_all", "list_then_watch", "now_ms", "session_for"]
