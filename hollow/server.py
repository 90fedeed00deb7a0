"""The agent's local HTTP server: Prometheus ``/metrics``, ``/healthz`` and the fault control endpoints.

Bound to loopback by default.  Endpoints:

* ``GET /metrics``: Prometheus text format.
* ``GET /healthz``: 200 once every node of this agent is registered, else 503 (JSON body either way).
* ``POST /faults/heartbeat-loss`` ``{"fraction": 0.1, "duration_s": 60, "seed": 1}``: answers
  ``{"nodes": [...], "count": n, "until": epoch_s}``.
* ``POST /faults/pod-failures`` ``{"fraction": 0.05, "exit_code": 137, "duration_s": 30, "seed": 1}``:
  answers ``{"failed_now": ["ns/name", ...], "count": n, "window_until": epoch_s}`` (semantics in
  :mod:`hollow.faults`); or ``{"pods": ["ns/name", ...], "exit_code": 137}``: those of the named pods that
  run on this agent's nodes crash now (the run chose them: a fault aimed at a job).
* ``POST /faults/node-lost`` ``{"nodes": ["name", ...], "delete_after_s": 60, "repair_after_s": 300}``:
  those of the named nodes this agent owns are lost (:mod:`hollow.faults`; ``repair_after_s`` null or
  absent: never repaired); answers ``{"nodes": [...], "count": n, "delete_at": epoch_s, "repair_at": ...}``.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from aiohttp import web

from hollow.metrics import Metrics


class Controls(Protocol):
    """What the server asks of the agent."""

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, details)."""
        ...

    def heartbeat_loss(self, fraction: float, duration_s: float, seed: int) -> dict[str, Any]:
        """Start a heartbeat-loss fault; returns what was affected."""
        ...

    def pod_failures(self, fraction: float, exit_code: int, duration_s: float, seed: int) -> dict[str, Any]:
        """Start a pod-failure fault; returns what was affected."""
        ...

    def pods_fail(self, pods: list[str], exit_code: int) -> dict[str, Any]:
        """Crash the named pods that run on this agent's nodes; returns what was affected."""
        ...

    def node_lost(self, nodes: list[str], delete_after_s: float, repair_after_s: float | None) -> dict[str, Any]:
        """Lose the named nodes this agent owns; returns what was affected."""
        ...


class BadRequest(ValueError):
    """A control request with a missing or invalid field."""


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _number(body: dict[str, Any], key: str, lo: float, hi: float, default: float | None = None) -> float:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise BadRequest(f"{key}: expected a number from {lo} to {hi}, got {value!r}")
    return float(value)


def _names(body: dict[str, Any], key: str) -> list[str]:
    value = body.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or len(value) > 100_000:
        raise BadRequest(f"{key}: expected a list of names, got {value!r}"[:300])
    return value


def _fields(body: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise BadRequest(f"unknown fields {unknown}; expected some of {sorted(allowed)}")
    return body


def make_app(metrics: Metrics, controls: Controls) -> web.Application:
    """The aiohttp application."""

    async def get_metrics(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4"})

    async def healthz(_: web.Request) -> web.Response:
        ok, details = controls.health()
        return _json({"ok": ok, **details}, 200 if ok else 503)

    async def read(request: web.Request, allowed: set[str]) -> dict[str, Any]:
        try:
            return _fields(orjson.loads(await request.read()), allowed)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"expected a JSON object ({exc})") from None

    async def heartbeat_loss(request: web.Request) -> web.Response:
        try:
            body = await read(request, {"fraction", "duration_s", "seed"})
            result = controls.heartbeat_loss(_number(body, "fraction", 0.0, 1.0),
                                             _number(body, "duration_s", 0.0, 86400.0),
                                             int(_number(body, "seed", -2**62, 2**62, 0)))
        except BadRequest as exc:
            return _json({"error": str(exc)}, 400)
        return _json(result)

    async def pod_failures(request: web.Request) -> web.Response:
        try:
            body = await read(request, {"fraction", "exit_code", "duration_s", "seed", "pods"})
            if "pods" in body:
                if set(body) - {"pods", "exit_code"}:
                    raise BadRequest("pods: names the pods to crash; it takes only exit_code besides")
                return _json(controls.pods_fail(_names(body, "pods"), int(_number(body, "exit_code", 1, 255))))
            result = controls.pod_failures(_number(body, "fraction", 0.0, 1.0),
                                           int(_number(body, "exit_code", 1, 255)),
                                           _number(body, "duration_s", 0.0, 86400.0, 0.0),
                                           int(_number(body, "seed", -2**62, 2**62, 0)))
        except BadRequest as exc:
            return _json({"error": str(exc)}, 400)
        return _json(result)

    async def node_lost(request: web.Request) -> web.Response:
        try:
            body = await read(request, {"nodes", "delete_after_s", "repair_after_s"})
            repair = body.get("repair_after_s")
            result = controls.node_lost(_names(body, "nodes"), _number(body, "delete_after_s", 0.0, 86400.0, 60.0),
                                        None if repair is None else _number(body, "repair_after_s", 0.0, 864000.0))
        except BadRequest as exc:
            return _json({"error": str(exc)}, 400)
        return _json(result)

    app = web.Application()
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_post("/faults/heartbeat-loss", heartbeat_loss)
    app.router.add_post("/faults/pod-failures", pod_failures)
    app.router.add_post("/faults/node-lost", node_lost)
    return app


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner (for cleanup) and the bound port (``port`` 0 = a free one)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return runner, int(bound)
