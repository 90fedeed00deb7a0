"""A minimal HTTP/1.1 keep-alive client on asyncio protocols: request bytes in, status and body out.

Why not aiohttp for the agent's requests: a profile of 10,000 nodes at kubelet cadence (1,000 lease
renewals a second) put a quarter of the agent's CPU inside aiohttp's request machinery (request and
response objects, header multidicts, URL objects, payload registry, per-request timers and
writers) for requests whose whole content is one pre-encoded line of JSON and whose answer is read
as bytes.  Here a request is one ``bytes`` written to a connection that is already open, and the
response is parsed just far enough to find its status and body (``Content-Length`` or chunked, which
is what Go's ``net/http`` sends).  TLS stays in the event loop's transport (uvloop's is native).

One request per connection at a time (no pipelining: a slow answer would hold up the ones behind
it); idle connections are kept for reuse, so at a steady rate the number of connections settles at
the number of requests in flight.  A request that fails on a *reused* connection before any byte of
an answer arrived (the server closed it while idle) is sent once more on a new connection, as Go's
transport does.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

_CRLF2 = b"\r\n\r\n"


class HttpError(OSError):
    """The connection failed or the answer could not be parsed (status 0 for the caller)."""


@dataclass(frozen=True)
class Origin:
    """Where requests go: scheme, host, port, and the server URL's path prefix (usually empty)."""

    host: str
    port: int
    tls: bool
    prefix: str

    @classmethod
    def parse(cls, server: str) -> Origin:
        """From a kubeconfig ``server`` URL, e.g. ``https://127.0.0.1:6443``."""
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server {server!r}: expected http(s)://HOST[:PORT][/PATH]")
        tls = parts.scheme == "https"
        return cls(parts.hostname, parts.port or (443 if tls else 80), tls, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        """The ``Host`` header value (IPv6 literals in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.tls else 80
        return host if self.port == default else f"{host}:{self.port}"


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request on it at a time."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()  # asked once: each call is a getpid() system call
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self._buf = bytearray()
        self._received = False

    # --- protocol callbacks --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(HttpError(f"connection closed{': ' + str(exc) if exc else ''}"))

    def eof_received(self) -> bool | None:
        self.closed = True
        self._fail(HttpError("connection closed by the server"))
        return None

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.closed = True  # bytes nobody asked for: the connection is out of step; drop it
            if self.transport is not None:
                self.transport.close()
            return
        self._received = True
        self._buf += data
        try:
            parsed = _parse(self._buf)
        except HttpError as exc:
            self.closed = True
            self._fail(exc)
            if self.transport is not None:
                self.transport.close()
            return
        if parsed is None:
            return
        status, body, keep_alive = parsed
        self._buf = bytearray()
        if not keep_alive:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
        self._waiter.set_result((status, body))

    # --- use -----------------------------------------------------------------------------------
    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    def send(self, raw: bytes) -> asyncio.Future[tuple[int, bytes]]:
        """Write one request; the future gets (status, body)."""
        assert self.transport is not None
        self._waiter = self.loop.create_future()
        self._received = False
        self.transport.write(raw)
        return self._waiter

    @property
    def answered_nothing(self) -> bool:
        """No byte of an answer arrived for the current request."""
        return not self._received

    def abort(self) -> None:
        """Drop the connection now (a request timed out or was cancelled mid-answer)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def _parse(buf: bytearray) -> tuple[int, bytes, bool] | None:
    """(status, body, keep_alive) once ``buf`` holds a whole answer, else None."""
    end = buf.find(_CRLF2)
    if end < 0:
        return None
    head = bytes(buf[:end]).split(b"\r\n")
    status_line = head[0]
    if not status_line.startswith(b"HTTP/1.") or len(status_line) < 12:
        raise HttpError(f"bad status line {status_line[:60]!r}")
    status = int(status_line[9:12])
    length = -1
    chunked = False
    keep_alive = status_line[7:8] == b"1"  # HTTP/1.1 keeps the connection unless told otherwise
    for line in head[1:]:
        colon = line.find(b":")
        if colon < 0:
            continue
        name = line[:colon].strip().lower()
        if name == b"content-length":
            length = int(line[colon + 1:])
        elif name == b"transfer-encoding":
            chunked = b"chunked" in line[colon + 1:].lower()
        elif name == b"connection":
            value = line[colon + 1:].strip().lower()
            keep_alive = value != b"close" and (keep_alive or value == b"keep-alive")
    start = end + 4
    if status in (204, 304) or 100 <= status < 200:
        return status, b"", keep_alive
    if chunked:
        return _dechunk(buf, start, status, keep_alive)
    if length < 0:
        raise HttpError("an answer without Content-Length or chunked encoding")
    if len(buf) - start < length:
        return None
    return status, bytes(buf[start:start + length]), keep_alive


def _dechunk(buf: bytearray, pos: int, status: int, keep_alive: bool) -> tuple[int, bytes, bool] | None:
    parts: list[bytes] = []
    while True:
        nl = buf.find(b"\r\n", pos)
        if nl < 0:
            return None
        size_field = bytes(buf[pos:nl]).split(b";", 1)[0].strip()
        try:
            size = int(size_field, 16)
        except ValueError:
            raise HttpError(f"bad chunk size {size_field[:20]!r}") from None
        pos = nl + 2
        if size == 0:
            # trailers (none from the apiserver) end with an empty line
            trailer_end = buf.find(b"\r\n", pos)
            while trailer_end > pos:
                pos = trailer_end + 2
                trailer_end = buf.find(b"\r\n", pos)
            if trailer_end < 0:
                return None
            return status, b"".join(parts), keep_alive
        if len(buf) < pos + size + 2:
            return None
        parts.append(bytes(buf[pos:pos + size]))
        pos += size + 2


class Http1Pool:
    """Keep-alive connections to one origin; the caller bounds concurrency (it holds a semaphore)."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | None, headers: dict[str, str],
                 connect_timeout_s: float = 10.0) -> None:
        self.origin = Origin.parse(server)
        self._ssl = ssl_context if self.origin.tls else None
        lines = [f"Host: {self.origin.host_header}"] + [f"{k}: {v}" for k, v in headers.items()]
        #: header lines every request carries, encoded once
        self._common = ("\r\n".join(lines) + "\r\n").encode()
        self._idle: collections.deque[_Connection] = collections.deque()
        self._connect_timeout_s = connect_timeout_s
        self.opened = 0
        self.closed = False

    def encode(self, method: str, path: str, body: bytes | None, content_type: str | None,
               params: dict[str, str] | None = None, extra_headers: dict[str, str] | None = None,
               header_lines: bytes = b"") -> bytes:
        """The whole request as bytes (request line, headers, body).

        ``header_lines``: more header lines already encoded (``b"Accept: ...\\r\\n"``), for per-request
        headers that repeat, so they are not formatted again on every request.
        """
        target = self.origin.prefix + path
        if params:
            target += ("&" if "?" in target else "?") + urlencode(params)
        head = f"{method} {target} HTTP/1.1\r\n".encode() + self._common + header_lines
        if extra_headers:
            head += "".join(f"{k}: {v}\r\n" for k, v in extra_headers.items()).encode()
        if body is None:
            return head + (b"Content-Length: 0\r\n\r\n" if method in ("POST", "PUT", "PATCH") else b"\r\n")
        return head + f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        o = self.origin
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation that comes as the
        # connect fails (it raises the connect's OSError instead), and the retry loop above then never ends
        async with asyncio.timeout(self._connect_timeout_s):
            _, conn = await loop.create_connection(
                _Connection, o.host, o.port, ssl=self._ssl, server_hostname=o.host if self._ssl else None)
        self.opened += 1
        return conn

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()  # the most recently used is the least likely to have timed out
            if not conn.closed:
                conn.reused = True
                return conn
        return None

    async def request(self, raw: bytes, timeout_s: float) -> tuple[int, bytes]:
        """Send ``raw`` (from :meth:`encode`) and return (status, body).

        Raises:
            HttpError: the connection failed (after one retry for a stale reused connection).
            TimeoutError: no whole answer within ``timeout_s`` seconds (the connection is dropped).
        """
        if self.closed:
            raise HttpError("client closed")
        for attempt in range(2):
            conn = (self._take_idle() if attempt == 0 else None) or await self._connect()
            fut = conn.send(raw)
            handle = conn.loop.call_later(timeout_s, _expire, fut)
            try:
                result = await fut
            except HttpError:
                conn.abort()
                if conn.reused and conn.answered_nothing:
                    continue  # the server had closed the idle connection: once more on a fresh one
                raise
            except BaseException:  # timeout or cancellation mid-answer: the connection is out of step
                conn.abort()
                raise
            finally:
                handle.cancel()
            if not conn.closed and not self.closed:
                self._idle.append(conn)
            return result
        raise HttpError("connection closed before an answer")  # pragma: no cover (loop returns or raises)

    def close(self) -> None:
        """Close every idle connection; later requests fail."""
        self.closed = True
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None:
                conn.transport.close()


def _expire(fut: asyncio.Future[tuple[int, bytes]]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError("no answer in time"))
