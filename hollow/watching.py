"""List-then-watch with bookmarks, resume from the last resourceVersion, and relist on 410 Gone.

The same loop client-go's reflector runs, written for raw JSON: page through a LIST, hand every object
to the handler, then WATCH from the list's resourceVersion with ``allowWatchBookmarks`` so that quiet
periods still advance the resume point.  A dropped connection resumes from the last version seen; only
``410 Gone`` (the version was compacted) forces a new LIST, after which the handler is told which
objects still exist so it can forget the ones deleted while nobody watched.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import orjson

from hollow.api import ApiClient, backoff_delay, iter_lines, resource_version_of
from hollow.metrics import Metrics

log = logging.getLogger("hollow.watching")
_MODIFIED = b'{"type":"MODIFIED"'


class WatchHandler(Protocol):
    """What a watcher feeds (all calls are synchronous and must be quick)."""

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        """ADDED, MODIFIED or DELETED (LIST items arrive as ADDED)."""
        ...

    def on_relisted(self, uids: set[str]) -> None:
        """A full LIST finished; objects whose uid is not in ``uids`` no longer exist.

        A handler may also define ``on_list_start()`` (optional, no arguments), called before the
        LIST is sent: what it learns from elsewhere after that moment may be missing from ``uids``
        without having been deleted.

        And ``is_own_write(resource_version) -> bool`` (optional): True for the version a write of the
        handler itself produced; that MODIFIED event tells the handler nothing it does not know, so it
        is not parsed at all (the version is found by a search in the raw line) and not handed on.
        """
        ...


@dataclass(frozen=True)
class WatchSettings:
    """Watch tuning.

    Attributes:
        page_size: objects per LIST page.
        timeout_s: server-side watch timeout in seconds, randomised in [t, 2t) like client-go so that
            many agents do not reconnect together.
        backoff_base_s: first wait after a failed LIST/WATCH, seconds (doubles, full jitter).
        backoff_cap_s: longest wait between attempts, seconds.
    """

    page_size: int = 500
    timeout_s: float = 300.0
    backoff_base_s: float = 0.2
    backoff_cap_s: float = 10.0


class Watcher:
    """One resource's list+watch loop."""

    def __init__(self, api: ApiClient, resource: str, path: str, selectors: dict[str, str],
                 handler: WatchHandler, metrics: Metrics, settings: WatchSettings | None = None) -> None:
        self.api = api
        self.resource = resource
        self.path = path
        self.selectors = selectors
        self.handler = handler
        self.metrics = metrics
        self.settings = settings or WatchSettings()
        self.synced = asyncio.Event()
        self.resource_version: str | None = None
        self._failures = 0

    async def _list(self) -> str:
        """LIST all pages, feed ADDED events and on_relisted; returns the list's resourceVersion."""
        seen: set[str] = set()
        cont = ""
        started = getattr(self.handler, "on_list_start", None)
        if started is not None:
            started()
        while True:
            params = {"limit": str(self.settings.page_size), **self.selectors}
            if cont:
                params["continue"] = cont
            resp = await self.api.request(f"list_{self.resource}", "GET", self.path, params=params)
            if resp.status == 410 and cont:
                # the continue token expired mid-list: start the list over
                seen.clear()
                cont = ""
                continue
            if not resp.ok:
                raise _WatchFailed(f"list {resp.status}: {resp.message()}")
            doc = orjson.loads(resp.body)
            for item in doc.get("items") or ():
                seen.add(item["metadata"]["uid"])
                self.handler.on_event("ADDED", item)
            meta = doc.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                self.handler.on_relisted(seen)
                rv = meta.get("resourceVersion")
                if not rv:
                    raise _WatchFailed("list without a resourceVersion")
                return str(rv)

    async def _watch(self, rv: str) -> str | None:
        """Stream events from ``rv``; returns the resume version, or None when a relist is needed."""
        timeout = self.settings.timeout_s * (1.0 + random.random())
        params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(int(timeout)), **self.selectors}
        async with self.api.stream(self.path, params, read_timeout_s=timeout + 30) as resp:
            if resp.status == 410:
                self.metrics.watch_restarts.labels(self.resource, "gone").inc()
                return None
            if resp.status != 200:
                raise _WatchFailed(f"watch {resp.status}: {(await resp.read())[:200]!r}")
            self._failures = 0
            counters: dict[str, Any] = {}
            own = getattr(self.handler, "is_own_write", None)
            echoes = self.metrics.watch_events.labels(self.resource, "MODIFIED_OWN")
            async for line in iter_lines(resp):
                if own is not None and line.startswith(_MODIFIED):
                    echo_rv = resource_version_of(line)
                    if echo_rv and own(echo_rv):
                        echoes.inc()
                        rv = self.resource_version = echo_rv
                        continue
                ev = orjson.loads(line)
                kind = ev.get("type")
                obj = ev.get("object") or {}
                c = counters.get(kind)
                if c is None:
                    c = counters[kind] = self.metrics.watch_events.labels(self.resource, str(kind))
                c.inc()
                if kind == "ERROR":
                    code = obj.get("code")
                    self.metrics.watch_restarts.labels(self.resource, "gone" if code == 410 else "error").inc()
                    if code == 410:
                        return None
                    raise _WatchFailed(f"watch error {code}: {obj.get('message')}")
                new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                if kind != "BOOKMARK":
                    self.handler.on_event(str(kind), obj)
                if new_rv:
                    rv = new_rv
                    self.resource_version = rv
        self.metrics.watch_restarts.labels(self.resource, "timeout").inc()
        return rv

    async def run(self) -> None:
        """List and watch until cancelled; never returns on its own.

        The resume point is :attr:`resource_version`: after a dropped stream, a timeout or an error the
        watch resumes from the last version it saw (events and bookmarks), so nothing is missed and
        nothing replayed; only 410 Gone (or no version at all) lists again.  Set it before ``run`` to
        start watching from a known version without listing.
        """
        while True:
            try:
                if self.resource_version is None:
                    self.resource_version = await self._list()
                    self.synced.set()
                self.resource_version = await self._watch(self.resource_version)
                continue
            except asyncio.CancelledError:
                raise
            except (_WatchFailed, aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
                # ValueError: orjson.JSONDecodeError (a line cut short by a dying connection)
                self.metrics.watch_restarts.labels(self.resource, "error").inc()
                log.warning("%s watch: %s; retrying from %s", self.resource, exc,
                            self.resource_version or "a new LIST")
            self._failures += 1
            await asyncio.sleep(backoff_delay(self._failures, self.settings.backoff_base_s,
                                              self.settings.backoff_cap_s))


class _WatchFailed(Exception):
    """A LIST or WATCH answered with an error; retried with backoff."""
