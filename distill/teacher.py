"""The teacher as an online inference service: ``python -m distill.teacher``.

Why: in service distillation the teacher no longer shares the student's compute; it runs
as its own process (here: its own cores) and any number of students send it samples. The
server batches concurrent requests dynamically (a model batch closes when it holds
``max_batch`` samples or ``max_wait_ms`` after its first request), so many small requests
become few efficient forward passes.

Endpoints: ``POST /v1/logits`` (see :mod:`distill.wire`), ``GET /healthz`` (process
alive), ``GET /readyz`` (model loaded and warmed up, not shutting down), ``GET /metrics``
(Prometheus). SIGTERM or Ctrl-C: readiness goes 503, in-flight requests finish, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import logging
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import torch
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from distill import wire
from distill.models import ConvNet, load_checkpoint
from distill.pinning import parse_cpus, pin
from distill.train_teacher import default_checkpoint

log = logging.getLogger("distill.teacher")


@dataclass(frozen=True)
class TeacherSettings:
    """Server settings; every field is also a command-line flag."""

    host: str = "127.0.0.1"
    port: int = 8501  # 0 = pick a free port (see port_file)
    port_file: Path | None = None  # write the bound port here once listening
    checkpoint: Path | None = None  # default: the cached teacher (~/.cache/hollowscale/distill/teacher.pt)
    max_batch: int = 512  # samples per forward pass (a single larger request is never split)
    max_wait_ms: float = 2.0  # how long a batch waits for more requests after its first one
    max_request_samples: int = 1024  # larger requests get 413
    cpus: set[int] | None = None  # core affinity
    threads: int = 1  # torch intra-op threads
    shutdown_timeout_s: float = 10.0


class Metrics:
    """Prometheus series of one teacher, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("teacher_requests", "HTTP requests to /v1/logits by status code", ["code"], registry=r)
        self.samples = Counter("teacher_samples", "Samples inferred", registry=r)
        self.batch_size = Histogram(
            "teacher_batch_size",
            "Samples per model forward pass (dynamic batching)",
            buckets=(1, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024, 2048),
            registry=r,
        )
        self.requests_per_batch = Histogram(
            "teacher_requests_per_batch",
            "Requests merged into one forward pass",
            buckets=(1, 2, 3, 4, 6, 8, 16, 32),
            registry=r,
        )
        self.latency = Histogram(
            "teacher_request_latency_seconds",
            "Request latency from arrival to logits ready",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.inference = Histogram(
            "teacher_inference_seconds",
            "Forward pass time",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
            registry=r,
        )
        self.queue_samples = Gauge("teacher_queue_depth_samples", "Samples waiting for a forward pass", registry=r)
        self.queue_requests = Gauge("teacher_queue_depth_requests", "Requests waiting for a forward pass", registry=r)
        self.ready = Gauge("teacher_ready", "1 when the teacher accepts work", registry=r)


@dataclass
class _Pending:
    x: np.ndarray
    future: asyncio.Future[np.ndarray]


class DynamicBatcher:
    """Merges concurrent requests into forward passes of at most ``max_batch`` samples.

    One forward pass at a time (the teacher's cores are its own; two passes would only
    compete for them). While a pass runs, new requests queue up and form the next batch, so
    under load batches fill without any waiting; idle, a lone request waits ``max_wait``.
    """

    def __init__(self, net: ConvNet, max_batch: int, max_wait_s: float, metrics: Metrics) -> None:
        self.net = net
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.metrics = metrics
        self._queue: collections.deque[_Pending] = collections.deque()
        self._queued_samples = 0
        self._wake = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teacher-infer")
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for p in self._queue:
            if not p.future.done():
                p.future.set_exception(RuntimeError("teacher shutting down"))
        self._queue.clear()
        self._executor.shutdown(wait=True)

    async def infer(self, x: np.ndarray) -> np.ndarray:
        fut: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(x, fut))
        self._queued_samples += len(x)
        self._gauges()
        self._wake.set()
        return await fut

    def _gauges(self) -> None:
        self.metrics.queue_samples.set(self._queued_samples)
        self.metrics.queue_requests.set(len(self._queue))

    def _take(self) -> list[_Pending]:
        items: list[_Pending] = []
        n = 0
        while self._queue and (not items or n + len(self._queue[0].x) <= self.max_batch):
            p = self._queue.popleft()
            self._queued_samples -= len(p.x)
            if p.future.cancelled():  # client went away while queued
                continue
            items.append(p)
            n += len(p.x)
        self._gauges()
        return items

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
            # Give concurrent requests max_wait to join, unless the batch is already full.
            deadline = loop.time() + self.max_wait_s
            while self._queued_samples < self.max_batch and loop.time() < deadline:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):
                        await self._wake.wait()
            items = self._take()
            if not items:
                continue
            batch = np.concatenate([p.x for p in items]) if len(items) > 1 else items[0].x
            t0 = time.perf_counter()
            try:
                logits = await loop.run_in_executor(self._executor, self._forward, batch)
            except Exception as e:  # a failed pass fails its requests, never the server
                log.exception("forward pass failed")
                for p in items:
                    if not p.future.done():
                        p.future.set_exception(e)
                continue
            self.metrics.inference.observe(time.perf_counter() - t0)
            self.metrics.batch_size.observe(len(batch))
            self.metrics.requests_per_batch.observe(len(items))
            self.metrics.samples.inc(len(batch))
            off = 0
            for p in items:
                n = len(p.x)
                if not p.future.done():
                    p.future.set_result(logits[off : off + n])
                off += n

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return self.net(torch.from_numpy(batch)).numpy()


class TeacherServer:
    """aiohttp application around a :class:`DynamicBatcher`."""

    def __init__(self, net: ConvNet, settings: TeacherSettings) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.batcher = DynamicBatcher(net, settings.max_batch, settings.max_wait_ms / 1000.0, self.metrics)
        self.limits = wire.Limits(max_samples=settings.max_request_samples)
        self.ready = False
        self.started = time.time()
        # Room for the largest legal float32 request plus JSON overhead; beyond it aiohttp answers 413.
        max_body = settings.max_request_samples * wire.PIXELS * 4 * 4 + 65536
        self.app = web.Application(client_max_size=max_body)
        self.app.add_routes(
            [
                web.post(wire.PATH, self.handle_logits),
                web.get("/healthz", self.handle_healthz),
                web.get("/readyz", self.handle_readyz),
                web.get("/metrics", self.handle_metrics),
            ]
        )

    def _error(self, status: int, reason: str) -> web.Response:
        self.metrics.requests.labels(code=str(status)).inc()
        return web.json_response({"error": reason}, status=status, dumps=lambda o: orjson.dumps(o).decode())

    async def handle_logits(self, request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter()
        if not self.ready:
            return self._error(503, "teacher not ready (starting or shutting down)")
        try:
            ctype = request.content_type
            if ctype == wire.BINARY:
                body = await request.read()
                x = wire.decode_binary(
                    body, request.headers.get("X-Dtype"), request.headers.get("X-Shape"), self.limits
                )
                want_json = wire.JSON in request.headers.get("Accept", "")
            elif ctype == wire.JSON:
                body = await request.read()
                try:
                    doc = orjson.loads(body)
                except orjson.JSONDecodeError as e:
                    raise wire.WireError(400, f"invalid JSON: {e}") from e
                x = wire.decode_json(doc, self.limits)
                want_json = True
            else:
                raise wire.WireError(415, f"unsupported Content-Type {ctype!r}: use {wire.BINARY} or {wire.JSON}")
        except wire.WireError as e:
            return self._error(e.status, e.reason)
        except web.HTTPRequestEntityTooLarge as e:
            return self._error(413, f"oversized request body: {e.text}")
        try:
            logits = await self.batcher.infer(x)
        except Exception as e:
            return self._error(500, f"inference failed: {e}")
        self.metrics.requests.labels(code="200").inc()
        self.metrics.latency.observe(time.perf_counter() - t0)
        if want_json:
            return web.Response(body=orjson.dumps({"logits": logits.tolist()}), content_type=wire.JSON)
        body_out, headers = wire.encode_logits(logits)
        return web.Response(body=body_out, headers=headers, content_type=wire.BINARY)

    async def handle_healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def handle_readyz(self, request: web.Request) -> web.Response:
        if self.ready:
            return web.Response(text="ready\n")
        return web.Response(text="not ready\n", status=503)

    async def handle_metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    def warm_up(self) -> None:
        """One forward pass before readiness, so the first real request is not slow."""
        self.batcher._forward(np.zeros((8, 1, 28, 28), dtype=np.uint8))

    async def serve(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then drain and exit cleanly."""
        s = self.settings
        runner = web.AppRunner(self.app, shutdown_timeout=s.shutdown_timeout_s, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, s.host, s.port, reuse_address=True)
        await site.start()
        port = _bound_port(runner) or s.port
        self.batcher.start()
        self.warm_up()
        self.ready = True
        self.metrics.ready.set(1)
        if s.port_file is not None:
            tmp = s.port_file.with_suffix(".tmp")
            tmp.write_text(f"{port}\n")
            tmp.replace(s.port_file)
        log.info(
            "teacher ready on http://%s:%d (max_batch=%d, max_wait=%.1fms)", s.host, port, s.max_batch, s.max_wait_ms
        )
        await stop.wait()
        log.info("shutting down: readiness off, draining in-flight requests")
        self.ready = False
        self.metrics.ready.set(0)
        await runner.cleanup()  # stops listening, waits for running handlers
        await self.batcher.stop()
        log.info("teacher stopped")


def _bound_port(runner: web.AppRunner) -> int | None:
    for addr in runner.addresses:
        if isinstance(addr, tuple) and len(addr) >= 2:
            return int(addr[1])
    return None


async def _main_async(settings: TeacherSettings) -> None:
    ckpt_path = settings.checkpoint or default_checkpoint()
    ckpt = load_checkpoint(ckpt_path)
    net = ckpt.build()
    server = TeacherServer(net, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await server.serve(stop)


def parse_args(argv: list[str] | None = None) -> TeacherSettings:
    p = argparse.ArgumentParser(
        prog="python -m distill.teacher",
        description=(
            "Serve a distillation teacher over HTTP with dynamic batching. POST /v1/logits takes "
            "uint8/float32 images [N,1,28,28] (binary with X-Dtype/X-Shape headers, or JSON "
            '{"inputs": ...}) and returns float32 logits [N,10]. Also /healthz, /readyz, /metrics. '
            "SIGTERM/Ctrl-C drains in-flight requests and exits 0."
        ),
    )
    d = TeacherSettings()
    p.add_argument("--host", default=d.host, help="address to bind (default %(default)s)")
    p.add_argument("--port", type=int, default=d.port, help="TCP port, 0 = any free port (default %(default)s)")
    p.add_argument("--port-file", type=Path, help="write the bound port to this file once ready")
    p.add_argument("--checkpoint", type=Path, help="teacher checkpoint (default: the cached one from train-teacher)")
    p.add_argument(
        "--max-batch", type=int, default=d.max_batch, help="max samples per forward pass (default %(default)s)"
    )
    p.add_argument(
        "--max-wait-ms", type=float, default=d.max_wait_ms, help="batching window after the first request, ms"
    )
    p.add_argument(
        "--max-request", type=int, default=d.max_request_samples, help="max samples in one request (413 above)"
    )
    p.add_argument("--cpus", help='pin to these cores, e.g. "1" or "2-3" (default: no pinning)')
    p.add_argument("--threads", type=int, default=d.threads, help="torch threads (default %(default)s)")
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s teacher[%(process)d] %(levelname)s %(message)s")
    return TeacherSettings(
        host=a.host,
        port=a.port,
        port_file=a.port_file,
        checkpoint=a.checkpoint,
        max_batch=a.max_batch,
        max_wait_ms=a.max_wait_ms,
        max_request_samples=a.max_request,
        cpus=parse_cpus(a.cpus),
        threads=a.threads,
    )


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    applied = pin(settings.cpus, settings.threads)
    log.info("pinned: %s", applied)
    try:
        asyncio.run(_main_async(settings))
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
