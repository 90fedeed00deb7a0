"""One hollow-node agent process: wiring of the controllers, the watch, the server and shutdown.

Order of work: open the HTTP session and the local server (so ``/healthz`` and ``/metrics`` answer
from the start), start the pod watch (pods already bound to re-adopted nodes resume at once) and the
gang watch (gang members on all nodes, see :mod:`hollow.gangs`; only when gang barriers are on), register
the nodes (each starts its lease renewals as soon as it exists), then run until SIGTERM/SIGINT.  On
shutdown nodes are left as they are (the controller-manager will mark them NotReady) unless
``delete_nodes_on_exit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from hollow.api import ApiClient
from hollow.clock import Clock, SystemClock
from hollow.faults import FaultState, PodFailureWindow, choose
from hollow.gangs import LABEL_GANG
from hollow.leases import LeaseManager
from hollow.metrics import Metrics
from hollow.monitor import SelfMonitor
from hollow.nodebody import NODE_LABEL
from hollow.nodes import ForeignNodeError, NodeManager
from hollow.pods import PodController
from hollow.pools import PoolSpec
from hollow.server import make_app, serve
from hollow.settings import AgentSettings
from hollow.sharding import assign
from hollow.slices import SliceManager
from hollow.watching import Watcher
from kubecore.config import KubeEndpoint

log = logging.getLogger("hollow.agent")
#: a lost node that is never repaired stays lost this long (ten years: a finite deadline for the timers)
NEVER_S = 10 * 365 * 86400.0


class Agent:
    """A hollow-node agent for one shard of the pools."""

    def __init__(self, endpoint: KubeEndpoint, pools: list[PoolSpec], settings: AgentSettings,
                 clock: Clock | None = None, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.metrics = metrics or Metrics()
        self.slots = assign(pools, settings.shard)
        self.faults = FaultState()
        self.api = ApiClient(endpoint, settings.api, self.metrics)
        self.nodes = NodeManager(self.api, self.clock, settings, self.metrics, self.faults, self.slots)
        self.leases = LeaseManager(self.api, self.clock, settings.heartbeat, self.metrics, self.faults, self.nodes)
        # DRA pools: each node's ResourceSlices, published once it is registered (hollow/slices.py)
        self.slices = SliceManager(self.api, self.clock, self.metrics, self.nodes.nodes)
        self.nodes.on_reregistered = self.slices.add
        self.pods = PodController(self.api, self.clock, self.metrics, self.faults, self.nodes.nodes,
                                  gang_barrier=settings.gang_barrier, pools=pools)
        self.pod_watch = Watcher(self.api, "pods", "/api/v1/pods", {"fieldSelector": "spec.nodeName!="},
                                 self.pods, self.metrics, settings.watch)
        # gang members on every node (only labelled pods; no watch at all when no pool waits for gangs)
        self.gang_watch = None if self.pods.gangs is None else Watcher(
            self.api, "gang_pods", "/api/v1/pods",
            {"labelSelector": LABEL_GANG, "fieldSelector": "spec.nodeName!="}, self.pods.gangs, self.metrics,
            settings.watch)
        self.node_watch = Watcher(self.api, "nodes", "/api/v1/nodes", {"labelSelector": f"{NODE_LABEL}=true"},
                                  self.nodes, self.metrics, settings.watch)
        self.monitor = SelfMonitor(settings.monitor, self.metrics, self.leases.take_recent_lags, self._backlog)
        self.port: int | None = None
        self.stopping = asyncio.Event()
        self._fault_tasks: set[asyncio.Future[Any]] = set()

    # --- controls (server) ---------------------------------------------------------------------
    def health(self) -> tuple[bool, dict[str, Any]]:
        """Healthy once every node of this shard is registered."""
        done = sum(1 for s in self.nodes.nodes.values() if s.uid)
        return self.nodes.registered.is_set(), {"nodes": len(self.nodes.nodes), "registered": done,
                                                "shard": f"{self.settings.shard.index}/{self.settings.shard.count}",
                                                "dra_nodes": self.slices.wanted,
                                                "dra_nodes_published": len(self.slices.published)}

    def heartbeat_loss(self, fraction: float, duration_s: float, seed: int) -> dict[str, Any]:
        """Stop heartbeats of ``fraction`` of this agent's nodes for ``duration_s`` seconds."""
        chosen = choose(list(self.nodes.nodes), fraction, seed)
        self.faults.stop_heartbeats(chosen, self.clock.monotonic() + duration_s)
        self.metrics.faulted_nodes.set(len(self.faults.heartbeat_stopped))
        asyncio.get_running_loop().call_later(duration_s + 0.01, self._recover)
        log.warning("fault: heartbeats of %d nodes stop for %.0fs", len(chosen), duration_s)
        return {"nodes": chosen, "count": len(chosen), "until": self.clock.wall() + duration_s}

    def _recover(self) -> None:
        recovered = self.faults.recovered(self.clock.monotonic())
        for name in recovered:
            self._heartbeat_again(name)
        self.metrics.faulted_nodes.set(len(self.faults.heartbeat_stopped))
        if recovered:
            log.warning("fault over: %d nodes heartbeat again", len(recovered))

    def _heartbeat_again(self, name: str) -> None:
        """A node whose heartbeats stopped posts Ready, renews its Lease and runs its pods on, at once."""
        self.nodes.refresh_now(name, transition=True)
        self.leases.renew_now(name)
        self.pods.replan_node(name)

    def node_lost(self, nodes: list[str], delete_after_s: float, repair_after_s: float | None) -> dict[str, Any]:
        """Lose the named nodes this agent owns (:mod:`hollow.faults`): heartbeats stop now, the Nodes are
        deleted ``delete_after_s`` later, and registered again ``repair_after_s`` after the loss (never when
        None)."""
        now = self.clock.monotonic()
        ours = sorted(n for n in set(nodes) if n in self.nodes.nodes and self.nodes.nodes[n].uid
                      and not self.faults.is_lost(n))
        repair_at = now + (repair_after_s if repair_after_s is not None else NEVER_S)
        for name in ours:
            self.faults.lost[name] = repair_at
        self.faults.stop_heartbeats(ours, repair_at)
        self.metrics.faulted_nodes.set(len(self.faults.heartbeat_stopped))
        loop = asyncio.get_running_loop()
        if ours and (repair_after_s is None or delete_after_s < repair_after_s):
            loop.call_later(delete_after_s, lambda: self._spawn(self._delete_lost(ours)))
        if ours and repair_after_s is not None:
            loop.call_later(repair_after_s + 0.01, lambda: self._repair(ours))
        if ours:
            log.warning("fault: %d nodes lost; deleted in %.0fs, repaired %s", len(ours), delete_after_s,
                        f"in {repair_after_s:.0f}s" if repair_after_s is not None else "never")
        wall = self.clock.wall()
        return {"nodes": ours, "count": len(ours), "delete_at": wall + delete_after_s,
                "repair_at": wall + repair_after_s if repair_after_s is not None else None}

    async def _delete_lost(self, names: list[str]) -> None:
        deleted = [n for n in names if self.faults.is_lost(n) and await self.nodes.delete_lost(n)]
        log.warning("fault: %d lost nodes deleted", len(deleted))

    def _repair(self, names: list[str]) -> None:
        """The lost nodes come back: registered again if they were deleted, Ready and heartbeating."""
        for name in names:
            self.faults.lost.pop(name, None)
            self.faults.heartbeat_stopped.pop(name, None)
            if self.nodes.nodes[name].uid:  # repaired before it was deleted: as a heartbeat loss ending
                self._heartbeat_again(name)
            else:
                self.nodes.reregister(name)
        self.metrics.faulted_nodes.set(len(self.faults.heartbeat_stopped))
        log.warning("fault over: %d lost nodes repaired", len(names))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._fault_tasks.add(task)
        task.add_done_callback(self._fault_tasks.discard)

    def pod_failures(self, fraction: float, exit_code: int, duration_s: float, seed: int) -> dict[str, Any]:
        """Crash ``fraction`` of running pods now, and fail that share of finishing pods for ``duration_s``."""
        failed = self.pods.fail_running(fraction, exit_code, seed)
        until = self.clock.monotonic() + duration_s
        self.faults.pod_window = PodFailureWindow(fraction, exit_code, until, seed) if duration_s > 0 else None
        log.warning("fault: %d running pods crash with exit %d; window %.0fs", len(failed), exit_code, duration_s)
        return {"failed_now": failed, "count": len(failed), "exit_code": exit_code,
                "window_until": self.clock.wall() + duration_s}

    def pods_fail(self, pods: list[str], exit_code: int) -> dict[str, Any]:
        """Crash the named running pods (``namespace/name``) that run on this agent's nodes, now."""
        failed = self.pods.fail_named(set(pods), exit_code)
        if failed:
            log.warning("fault: %d named pods crash with exit %d", len(failed), exit_code)
        return {"failed_now": failed, "count": len(failed), "exit_code": exit_code}

    # --- running -------------------------------------------------------------------------------
    def _backlog(self) -> int:
        return self.api.waiting + self.leases.backlog() + self.pods.backlog() + self.slices.backlog()

    async def _ready_gauge(self) -> None:
        lease_s = self.settings.heartbeat.lease_s
        while True:
            now = self.clock.monotonic()
            ready = sum(1 for name, s in self.nodes.nodes.items()
                        if s.uid and not self.faults.stopped(name, now)
                        and (s.last_renew == 0.0 or now - s.last_renew < lease_s))
            self.metrics.nodes_ready.set(ready)
            self.metrics.api_inflight.set(self.api.inflight)
            self.metrics.api_waiting.set(self.api.waiting)
            await asyncio.sleep(5.0)  # a gauge: 10,000 nodes looked at every 5 s is plenty

    async def _register_then_freeze(self) -> None:
        """Register the nodes, then move what exists by then out of the garbage collector's sight.

        The node states, pools and timers live as long as the agent; a profile at 10,000 nodes had
        ~4% of the agent's CPU in the cyclic collector scanning them again and again.  Frozen objects
        are never scanned (nor freed, which they would not be anyway); and the young generation is
        collected every 20,000 allocations instead of 700, since the hot path makes few cycles.
        """
        def registered(name: str) -> None:
            self.leases.add(name)
            self.slices.add(name)

        await self.nodes.register_all(registered)
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 10, 10)

    async def run(self, announce: bool = True) -> None:
        """Run until :attr:`stopping` is set (SIGTERM/SIGINT set it when run from the CLI)."""
        await self.api.start()
        runner, self.port = await serve(make_app(self.metrics, self), self.settings.metrics_host,
                                        self.settings.metrics_port)
        if announce:
            print(f"hollow: metrics on http://{self.settings.metrics_host}:{self.port}/metrics "
                  f"({len(self.slots)} nodes, shard {self.settings.shard.index}/{self.settings.shard.count})",
                  flush=True)
        self.leases.plan_phases(self.clock.monotonic())
        tasks = [asyncio.ensure_future(c) for c in (
            self.monitor.run(), self.pod_watch.run(), self.node_watch.run(), self.pods.run(), self.leases.run(),
            self.nodes.run(), self.slices.run(),
            self._register_then_freeze(), self._ready_gauge())]
        if self.gang_watch is not None:
            tasks.append(asyncio.ensure_future(self.gang_watch.run()))
        try:
            stop = asyncio.ensure_future(self.stopping.wait())
            while not stop.done():
                await asyncio.wait([stop, *tasks], return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:
                    if task.done() and not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                tasks = [t for t in tasks if not t.done()]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.nodes.stop()
            await self.pods.stop()
            await self.leases.stop()
            await self.slices.stop()
            if self.settings.delete_nodes_on_exit:
                await self.nodes.delete_all()
            await runner.cleanup()
            await self.api.close()


def run_agent(endpoint: KubeEndpoint, pools: list[PoolSpec], settings: AgentSettings) -> int:
    """Run an agent in the foreground until SIGTERM/SIGINT; returns the exit code."""
    async def main() -> None:
        agent = Agent(endpoint, pools, settings)
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if agent.stopping.is_set():  # a second signal: stop waiting for a graceful exit
                os._exit(130)
            agent.stopping.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, on_signal)
        await agent.run()

    runner: Callable[[Coroutine[Any, Any, None]], None] = asyncio.run
    try:
        import uvloop  # a faster event loop (listed dependency; plain asyncio works too)

        runner = uvloop.run
    except ImportError:
        pass
    try:
        runner(main())
    except KeyboardInterrupt:
        pass
    except ForeignNodeError as exc:  # a node of that name that is not ours: the user's to sort out, no traceback
        print(f"hollow: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        print(f"hollow: {exc}", file=sys.stderr)
        raise
    return 0
