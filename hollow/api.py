"""A raw async Kubernetes API client: pooled keep-alive connections, bytes in, bytes out.

Why not the generated client: it builds model objects for every response and is synchronous; at a
thousand lease renewals a second the agent's CPU would go to deserialisation.  Here a request is a
path, a verb label (for metrics), and an orjson-encoded body; callers parse only what they read.
Requests go through :mod:`hollow.http1` (a request is one write of pre-encoded bytes); aiohttp is kept
for watches, which are long-lived streams where its per-request cost does not matter.

Every request (except watches, which are long-lived) passes a global concurrency bound so the agent
never drowns the apiserver, and 429/5xx/timeouts/connection errors are retried with capped,
full-jitter exponential backoff (honouring a 429's ``retryAfterSeconds``).  Writes never need a GET
first: callers use create-then-adopt on 409 and patches with uid preconditions.

Credentials: a client certificate lives in the TLS context; a bearer token that can expire (a
kubeconfig ``exec`` plugin, as managed clusters use) is asked of :meth:`KubeEndpoint.auth_headers` for
every request and every watch (re)connect, which re-runs the plugin only when the token expired and
looks at most every 10 s; a static token is set once on the session.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import aiohttp
import orjson

from hollow import protobuf
from hollow.http1 import Http1Pool, HttpError
from hollow.metrics import Metrics
from kubecore.config import KubeEndpoint

log = logging.getLogger("hollow.api")

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class ApiSettings:
    """Transport settings.

    Attributes:
        max_inflight: requests in flight at once over the whole agent (watches excluded).
        request_timeout_s: seconds for one attempt of a request, connect to last byte.
        max_attempts: attempts per request before giving up (first try included).
        backoff_base_s: seconds before the first retry (doubles each time, full jitter).
        backoff_cap_s: longest wait between retries, seconds.
        user_agent: sent as User-Agent (shows up in apiserver metrics and audit logs).
    """

    max_inflight: int = 128
    request_timeout_s: float = 30.0
    max_attempts: int = 8
    backoff_base_s: float = 0.1
    backoff_cap_s: float = 10.0
    user_agent: str = "hollowscale-hollow/0.1"


_RESOURCE_VERSION = re.compile(rb'"resourceVersion"\s*:\s*"([^"]*)"')


def resource_version_of(body: bytes) -> str:
    """``metadata.resourceVersion`` of an object's JSON (its first ``resourceVersion``), '' if none.

    An answer's metadata comes before anything else that could hold a resourceVersion, so a search
    finds it without parsing the whole object.
    """
    m = _RESOURCE_VERSION.search(body)
    return m.group(1).decode() if m else ""


class Response(NamedTuple):
    """Status and raw body of the final attempt (status 0 = no HTTP response at all)."""

    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        """2xx."""
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body parsed with orjson."""
        return orjson.loads(self.body) if self.body else None

    def resource_version(self) -> str:
        """``metadata.resourceVersion`` of the object in the body (JSON or protobuf), '' if none."""
        rv = protobuf.resource_version(self.body)
        return resource_version_of(self.body) if rv is None else rv

    def message(self) -> str:
        """The Status message of an error response (JSON or protobuf), or a short body excerpt."""
        proto = protobuf.status_message(self.body)
        if proto:
            return proto
        try:
            doc = orjson.loads(self.body)
            if isinstance(doc, dict) and doc.get("message"):
                return str(doc["message"])
        except orjson.JSONDecodeError:
            pass
        return self.body[:200].decode(errors="replace")


class PrioritySemaphore:
    """A semaphore whose waiters are served by priority (0 first), FIFO within a priority.

    When the apiserver cannot keep up, requests queue here; heartbeats (priority 0) must not wait
    behind thousands of pod status patches, or every node goes NotReady and the test measures that.
    But a strict priority starves pod work for good once heartbeats alone exceed what the apiserver
    can take, so every ``fair_every``-th permit goes to a lower priority when one is waiting.
    """

    def __init__(self, value: int, levels: int = 2, fair_every: int = 4) -> None:
        self._value = value
        self._waiters: tuple[collections.deque[asyncio.Future[None]], ...] = tuple(
            collections.deque() for _ in range(levels))
        self._fair_every = fair_every
        self._grants = 0

    def waiting(self) -> int:
        """Number of queued acquirers."""
        return sum(len(q) for q in self._waiters)

    async def acquire(self, priority: int) -> None:
        """Take a permit, waiting behind queued acquirers of the same or a higher priority."""
        if self._value > 0 and not any(self._waiters):
            self._value -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[priority].append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the permit was handed over just before the cancellation
            raise

    @staticmethod
    def _hand(queue: collections.deque[asyncio.Future[None]]) -> bool:
        while queue:
            fut = queue.popleft()
            if not fut.done():
                fut.set_result(None)
                return True
        return False

    def release(self) -> None:
        """Hand the permit to the next waiter (highest priority first, with the fair share), or return it."""
        self._grants += 1
        order = self._waiters
        if self._grants % self._fair_every == 0:
            order = order[1:] + order[:1]  # this one goes to a lower priority if any is waiting
        for queue in order:
            if self._hand(queue):
                return
        self._value += 1


def _retry_after(body: bytes) -> float | None:
    """``details.retryAfterSeconds`` of a 429 Status (the apiserver sends it with the Retry-After header)."""
    if body.startswith(protobuf.MAGIC):
        proto = protobuf.status_retry_after(body)
        return float(proto) if proto else None
    try:
        doc = orjson.loads(body)
        seconds = ((doc.get("details") or {}).get("retryAfterSeconds")) if isinstance(doc, dict) else None
    except orjson.JSONDecodeError:
        return None
    return float(seconds) if isinstance(seconds, int | float) and seconds > 0 else None


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(cap, base * 2**attempt)] seconds."""
    r = rng or random
    return r.uniform(0.0, min(cap, base * (2 ** attempt)))


class ApiClient:
    """The one HTTP session of an agent."""

    def __init__(self, endpoint: KubeEndpoint, settings: ApiSettings, metrics: Metrics) -> None:
        self.endpoint = endpoint
        self.settings = settings
        self.metrics = metrics
        self._base = endpoint.server
        self._sem = PrioritySemaphore(settings.max_inflight)
        #: a token that may change (exec plugin): asked for per request; a static one goes on the session
        self._refresh = endpoint.refresh is not None
        static_auth = {} if self._refresh else endpoint.auth_headers()
        self._headers = {"User-Agent": settings.user_agent, **static_auth}
        #: the Accept line of each answer type, encoded on first use (requests carry it per call)
        self._accept: dict[str, bytes] = {}
        self._session: aiohttp.ClientSession | None = None  # watches (long-lived streams) only
        self._pool: Http1Pool | None = None  # every other request
        self._children: dict[tuple[str, int], Any] = {}
        self._lat: dict[str, Any] = {}
        self.waiting = 0
        self.inflight = 0
        self.closed = False

    async def start(self) -> None:
        """Open the pooled session (idempotent)."""
        if self._pool is not None and self._session is not None:
            return
        ssl_context = self.endpoint.ssl_context()  # read the certificates once for both transports
        if self._pool is None:
            self._pool = Http1Pool(self._base, ssl_context, self._headers,
                                   connect_timeout_s=self.settings.request_timeout_s)
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self.settings.max_inflight + 16, limit_per_host=0,
                ssl=ssl_context or False, keepalive_timeout=120, ttl_dns_cache=None)
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"Accept": JSON, **self._headers}, cookie_jar=aiohttp.DummyCookieJar(), json_serialize=lambda o: orjson.dumps(o).decode(),
                timeout=aiohttp.ClientTimeout(total=self.settings.request_timeout_s), auto_decompress=True,
                read_bufsize=2**18)

    async def close(self) -> None:
        """Close the session and its connections."""
        self.closed = True
        if self._pool is not None:
            self._pool.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("ApiClient.start() was not awaited")
        return self._session

    def _count(self, verb: str, status: int, seconds: float) -> None:
        child = self._children.get((verb, status))
        if child is None:
            child = self._children[(verb, status)] = self.metrics.api_requests.labels(verb, str(status))
        child.inc()
        lat = self._lat.get(verb)
        if lat is None:
            lat = self._lat[verb] = self.metrics.api_latency.labels(verb)
        lat.observe(seconds)

    async def request(self, verb: str, method: str, path: str, *, body: Any = None,
                      content_type: str = JSON, params: dict[str, str] | None = None,
                      retry: bool = True, priority: int = 1, accept: str = JSON) -> Response:
        """Send one request (with retries) and return the final response.

        Args:
            verb: metrics label, e.g. ``patch_lease``.
            method: HTTP method.
            path: API path starting with ``/``.
            body: a JSON-able object, pre-encoded bytes, or a callable returning either, called only
                once the request holds its slot (so a timestamp in it is fresh, not queued).
            content_type: for bodies; patch types differ.
            params: query parameters.
            retry: retry 429/5xx/timeouts (False for calls whose caller handles failure itself).
            priority: 0 for heartbeats (served first when requests queue), 1 for everything else.
            accept: the answer's media type (:data:`JSON`, or :data:`hollow.protobuf.PROTOBUF` where the
                caller reads it with :mod:`hollow.protobuf`; errors then come as a protobuf Status).
        """
        accept_line = self._accept.get(accept)
        if accept_line is None:
            accept_line = self._accept[accept] = f"Accept: {accept}\r\n".encode()
        make: Callable[[], Any] | None = body if callable(body) else None
        data = None if make is not None else (body if isinstance(body, bytes | None) else orjson.dumps(body))
        pool = self._pool
        if pool is None:
            raise RuntimeError("ApiClient.start() was not awaited")
        s = self.settings
        attempts = s.max_attempts if retry else 1
        last = Response(0, b"")
        for attempt in range(attempts):
            if self.closed:
                return last
            wait_s = 0.0
            reason = ""
            self.waiting += 1
            try:
                await self._sem.acquire(priority)
            finally:
                self.waiting -= 1
            try:
                self.inflight += 1
                if make is not None:
                    made = make()
                    data = made if isinstance(made, bytes) else orjson.dumps(made)
                # per attempt: a retry after a 401 carries the renewed token
                extra = self.endpoint.auth_headers() if self._refresh else None
                raw = pool.encode(method, path, data, content_type, params, extra, accept_line)
                t0 = time.perf_counter()
                try:
                    status, payload = await pool.request(raw, s.request_timeout_s)
                    last = Response(status, payload)
                    self._count(verb, status, time.perf_counter() - t0)
                    if status in _RETRY_STATUS:
                        reason = str(status)
                        ra = _retry_after(payload) if status == 429 else None
                        if ra is not None:
                            wait_s = min(ra, s.backoff_cap_s)
                except (HttpError, TimeoutError, OSError) as exc:
                    self._count(verb, 0, time.perf_counter() - t0)
                    reason = "timeout" if isinstance(exc, TimeoutError) else "connection"
                    last = Response(0, str(exc).encode())
            finally:
                self.inflight -= 1
                self._sem.release()
            if not reason:
                return last
            if attempt + 1 >= attempts or self.closed:
                break
            self.metrics.api_retries.labels(verb, reason).inc()
            await asyncio.sleep(wait_s or backoff_delay(attempt, s.backoff_base_s, s.backoff_cap_s))
        log.debug("%s %s gave up after %d attempts: %s %s", method, path, attempts, last.status, last.message())
        return last

    @asynccontextmanager
    async def stream(self, path: str, params: dict[str, str], read_timeout_s: float
                     ) -> AsyncIterator[aiohttp.ClientResponse]:
        """Open a streaming GET (a watch) outside the concurrency bound; the caller reads the body."""
        t0 = time.perf_counter()
        headers = self.endpoint.auth_headers() if self._refresh else None
        async with self.session.get(self._base + path, params=params, headers=headers, timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=self.settings.request_timeout_s, sock_read=read_timeout_s)) as resp:
            self._count("watch", resp.status, time.perf_counter() - t0)
            yield resp


async def iter_lines(resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """Newline-delimited chunks of a streaming body, without aiohttp's line-length limit."""
    buf = b""
    async for chunk in resp.content.iter_any():
        buf = buf + chunk if buf else chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            if nl > start:
                yield buf[start:nl]
            start = nl + 1
        buf = buf[start:]
    if buf.strip():
        yield buf
