"""Synchronous HTTP to the API server: an authenticated session and the one list-then-watch loop.

The orchestrator's collectors and barriers and the load generator's watchers use this (``requests``
with streaming cooperates with gevent once Locust has monkey-patched the standard library, and
works in plain threads elsewhere).  The hollow agent has its own async client for its hot path.

:func:`list_then_watch` is the one watch loop: paginated LIST, then WATCH from its resourceVersion
with bookmarks, resume from the last resourceVersion after a dropped stream, relist on 410 Gone (with
synthetic DELETED events for what vanished meanwhile), capped backoff on errors.  Events carry the
client's receive time in epoch milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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


@dataclass
class WatchState:
    """Where a :func:`list_then_watch` stands: its resume point and what it has yielded.

    Pass one in to keep it across calls (a collector that restarts its loop resumes where it was, and
    tests can look at it); the loop updates it as it goes.

    Attributes:
        resource_version: the version to resume watching from; None: LIST first.
        known: uid -> (namespace, name) of every object yielded and not deleted since (what a relist
            compares against, to report the deletions nobody watched).
    """

    resource_version: str | None = None
    known: dict[str, tuple[str, str]] = field(default_factory=dict)


def deleted_stub(uid: str, namespace: str, name: str) -> dict[str, Any]:
    """The object of a synthetic DELETED event: metadata ``uid``, ``name`` and ``namespace`` (if any) only."""
    meta = {"uid": uid, "name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}


def list_then_watch(
    session: requests.Session,
    server: str,
    path: str,
    stop: Callable[[], bool],
    label_selector: str | None = None,
    field_selector: str | None = None,
    page: int = 500,
    on_restart: Callable[[str], None] | None = None,
    state: WatchState | None = None,
) -> Iterator[tuple[str, dict[str, Any], float]]:
    """Yield ``(type, object, received_ms)`` until ``stop()``; types: SYNC (from LIST), ADDED,
    MODIFIED, DELETED.  ``path`` is a collection, e.g. ``/api/v1/namespaces/ns/pods``.

    A dropped or timed-out stream resumes from the last resourceVersion seen (events or bookmarks);
    ``410 Gone`` (as an HTTP status or an ``ERROR`` event: the version was compacted, or the apiserver
    restarted with a newer watch cache) relists.  A relist yields every listed object again as SYNC
    (consumers apply objects by uid, so that is not a new object) and then, for each object yielded
    before that is absent from the new LIST, a *synthetic* ``DELETED`` event: it was deleted while
    nobody watched.  Its object is minimal, ``{"metadata": {"uid", "name", "namespace"}}`` (no spec or
    status; see :func:`deleted_stub`), and its time is the relist's.  Only uid -> (namespace, name) of
    live objects is kept for this.

    Errors (connection, timeouts, 429/5xx, ``ERROR`` events other than 410) back off, capped at 5 s,
    and resume; every wait is bounded (connect 10 s, a LIST 60 s, a silent stream 20 s), so a stalled
    apiserver never blocks the loop for good.  ``state`` (optional) carries the resume point and the
    known objects in and out: starting with ``state.resource_version`` set watches from it at once.
    """
    st = state if state is not None else WatchState()
    known = st.known
    backoff = 0.2

    def params_with(**kw: Any) -> dict[str, Any]:
        if label_selector:
            kw["labelSelector"] = label_selector
        if field_selector:
            kw["fieldSelector"] = field_selector
        return kw

    while not stop():
        try:
            if st.resource_version is None:
                params = params_with(limit=page)
                listed: dict[str, tuple[str, str]] = {}
                while True:
                    r = session.get(server + path, params=params, timeout=(10, 60))
                    if r.status_code == 410 and "continue" in params:  # continue token expired: start over
                        params.pop("continue")
                        listed.clear()
                        continue
                    r.raise_for_status()
                    doc = orjson.loads(r.content)
                    t = now_ms()
                    for obj in doc.get("items") or []:
                        meta = obj.get("metadata") or {}
                        uid = meta.get("uid")
                        if uid:
                            listed[uid] = known[uid] = (meta.get("namespace", ""), meta.get("name", ""))
                        yield SYNC, obj, t
                    cont = (doc.get("metadata") or {}).get("continue")
                    if not cont:
                        break
                    params["continue"] = cont
                gone = [uid for uid in known if uid not in listed]
                if gone:
                    t = now_ms()
                    for uid in gone:
                        ns, name = known.pop(uid)
                        yield "DELETED", deleted_stub(uid, ns, name), t
                st.resource_version = (doc.get("metadata") or {}).get("resourceVersion") or None
                if st.resource_version is None:
                    raise ValueError("LIST without a resourceVersion")
            params = params_with(watch="1", resourceVersion=st.resource_version, allowWatchBookmarks="true",
                                 timeoutSeconds=5)
            with session.get(server + path, params=params, stream=True, timeout=(10, 20)) as resp:
                if resp.status_code == 410:
                    st.resource_version = None
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
                                st.resource_version = None
                                if on_restart:
                                    on_restart(f"410 Gone in stream: relist ({obj.get('message', '')})")
                                raise _Restart
                            raise _WatchError(f"ERROR event {obj.get('code')}: {obj.get('message', '')}")
                        meta = obj.get("metadata") or {}
                        new_rv = meta.get("resourceVersion")
                        if new_rv:
                            st.resource_version = new_rv
                        if typ == "BOOKMARK":
                            continue
                        uid = meta.get("uid")
                        if uid:
                            if typ == "DELETED":
                                known.pop(uid, None)
                            else:
                                known[uid] = (meta.get("namespace", ""), meta.get("name", ""))
                        yield typ, obj, t
                    if stop():
                        return
            if on_restart:
                on_restart("watch ended: resume")
        except _Restart:
            continue
        except (requests.RequestException, ValueError, _WatchError) as exc:
            if stop():
                return
            if on_restart:
                on_restart(f"watch error: {exc.__class__.__name__}: {exc}")
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)


class _WatchError(Exception):
    pass


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


__all__ = ["SYNC", "WatchState", "deleted_stub", "list_all", "list_then_watch", "now_ms", "session_for"]
