"""The agent's HTTP/1.1 client: answer parsing, keep-alive reuse, a stale idle connection, timeouts.

The parser is checked on byte strings as Go's net/http writes them (Content-Length and chunked); the
pool against a small local asyncio HTTP server that answers as Go's does and can close an idle
connection, so reuse and the one retry on a stale connection are observed on real sockets.  (The
agent against the real apiserver is covered by the integration tests.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from hollow.http1 import Http1Pool, HttpError, Origin, _parse


def test_parse_content_length_waits_for_the_whole_body() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
    assert _parse(bytearray(answer[:-3])) is None
    assert _parse(bytearray(answer[:20])) is None
    assert _parse(bytearray(answer)) == (200, b'{"a":1}', True)


def test_parse_chunked_with_extensions_and_split_reads() -> None:
    answer = (b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"4;ext=1\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n")
    for cut in range(len(answer) - 1):
        assert _parse(bytearray(answer[:cut])) is None, cut
    assert _parse(bytearray(answer)) == (201, b'{"a":1}', True)


def test_parse_connection_close_and_no_body_statuses() -> None:
    assert _parse(bytearray(b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno")) == \
        (404, b"no", False)
    assert _parse(bytearray(b"HTTP/1.1 204 No Content\r\n\r\n")) == (204, b"", True)
    assert _parse(bytearray(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")) == (200, b"", False)


def test_parse_refuses_garbage() -> None:
    with pytest.raises(HttpError):
        _parse(bytearray(b"SSH-2.0-OpenSSH\r\n\r\n"))
    with pytest.raises(HttpError):
        _parse(bytearray(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"))
    with pytest.raises(HttpError):  # neither a length nor chunks: the end of the body is unknowable
        _parse(bytearray(b"HTTP/1.1 200 OK\r\n\r\nbody"))


def test_origin_and_request_bytes() -> None:
    o = Origin.parse("https://10.0.0.1:6443/k8s/clusters/c-1/")
    assert (o.host, o.port, o.tls, o.prefix, o.host_header) == ("10.0.0.1", 6443, True, "/k8s/clusters/c-1",
                                                                "10.0.0.1:6443")
    assert Origin.parse("http://[::1]").host_header == "[::1]"
    with pytest.raises(ValueError, match="expected http"):
        Origin.parse("unix:///run/k8s.sock")
    pool = Http1Pool("https://h:6443", None, {"Accept": "application/json"})
    raw = pool.encode("PATCH", "/api/v1/nodes/n1", b"{}", "application/merge-patch+json")
    assert raw == (b"PATCH /api/v1/nodes/n1 HTTP/1.1\r\nHost: h:6443\r\nAccept: application/json\r\n"
                   b"Content-Type: application/merge-patch+json\r\nContent-Length: 2\r\n\r\n{}")
    get = pool.encode("GET", "/api/v1/pods", None, None, {"limit": "5", "fieldSelector": "spec.nodeName!="})
    assert get.startswith(b"GET /api/v1/pods?limit=5&fieldSelector=spec.nodeName%21%3D HTTP/1.1\r\n")
    assert get.endswith(b"\r\n\r\n") and b"Content-Length" not in get


class GoLikeServer:
    """Answers each request with its request line as the body, chunked when asked; can drop idle connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.hang = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                length = next((int(v) for k, _, v in (ln.partition(": ") for ln in lines)
                               if k.lower() == "content-length"), 0)
                if length:
                    await reader.readexactly(length)
                if self.hang:
                    continue
                body = lines[0].encode()
                if "chunked" in lines[0]:
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 + b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 5]), body[i:i + 5])
                                            for i in range(0, len(body), 5)) + b"0\r\n\r\n")
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def drop_all(self) -> None:
        for w in self.writers:
            w.close()
        self.writers.clear()


@pytest.fixture
async def server() -> AsyncIterator[tuple[GoLikeServer, str]]:
    srv = GoLikeServer()
    s = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    port = s.sockets[0].getsockname()[1]
    yield srv, f"http://127.0.0.1:{port}"
    srv.drop_all()
    s.close()
    await s.wait_closed()


async def test_pool_reuses_connections_and_survives_a_stale_one(server: tuple[GoLikeServer, str]) -> None:
    srv, url = server
    pool = Http1Pool(url, None, {"User-Agent": "t"})
    for i in range(5):
        status, body = await pool.request(pool.encode("GET", f"/x/{i}", None, None), 5)
        assert (status, body) == (200, f"GET /x/{i} HTTP/1.1".encode())
    assert srv.connections == 1 and pool.opened == 1  # one keep-alive connection, reused
    status, body = await pool.request(pool.encode("POST", "/chunked", b"{}", "application/json"), 5)
    assert (status, body) == (200, b"POST /chunked HTTP/1.1")
    srv.drop_all()  # the server closes the idle connection
    await asyncio.sleep(0.05)
    status, _ = await pool.request(pool.encode("GET", "/after", None, None), 5)
    assert status == 200 and pool.opened == 2
    results = await asyncio.gather(*(pool.request(pool.encode("GET", f"/p/{i}", None, None), 5)
                                     for i in range(8)))
    assert [b for _, b in results] == [f"GET /p/{i} HTTP/1.1".encode() for i in range(8)]
    pool.close()
    with pytest.raises(HttpError):
        await pool.request(pool.encode("GET", "/closed", None, None), 5)


async def test_pool_times_out_and_drops_the_connection(server: tuple[GoLikeServer, str]) -> None:
    srv, url = server
    pool = Http1Pool(url, None, {})
    srv.hang = True
    with pytest.raises(TimeoutError):
        await pool.request(pool.encode("GET", "/slow", None, None), 0.2)
    srv.hang = False
    status, body = await pool.request(pool.encode("GET", "/next", None, None), 5)
    assert (status, body) == (200, b"GET /next HTTP/1.1") and pool.opened == 2  # not the out-of-step one
    pool.close()


async def test_a_cancellation_that_comes_as_the_connect_fails_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's SIGTERM cancels its requests; one caught while its connect was refused must end, not retry.

    The order is made exact: the connect's failure is decided (its future done) and the task is cancelled
    before either runs.  ``asyncio.wait_for`` on 3.11 then raised the connect's OSError, the request's
    retry loop took it for a refused connection and went on, and the agent never exited.
    """
    loop = asyncio.get_running_loop()
    refused = loop.create_future()
    connecting = asyncio.Event()

    async def connect(*args: object, **kwargs: object) -> tuple[object, object]:
        connecting.set()
        await refused
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(loop, "create_connection", connect)
    pool = Http1Pool("http://127.0.0.1:1", None, {})
    task = asyncio.ensure_future(pool.request(pool.encode("GET", "/api", None, None), 5.0))
    await connecting.wait()  # the task now waits on the connect
    refused.set_result(None)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
